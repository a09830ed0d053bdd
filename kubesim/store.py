"""Object storage with a global resourceVersion and a bounded watch history.

Like etcd behind the real API server: every write gets the next resourceVersion, events
are kept for a window (`history`), and a watch from a version older than the window is
answered 410 Gone. `compact()` drops the window on demand so tests can force a 410.
"""

from __future__ import annotations

import asyncio
import bisect
from collections import deque
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from kubesim.errors import gone

Obj = dict[str, Any]
Key = tuple[str, str]  # (group, plural)


def clone(obj: Any) -> Any:
    """A deep copy of a JSON-shaped value (fast path through orjson)."""
    return orjson.loads(orjson.dumps(obj))


@dataclass(frozen=True)
class WatchEvent:
    """One change: its type, the resourceVersion it created, and the objects."""

    type: str  # ADDED, MODIFIED, DELETED
    rv: int
    key: Key
    obj: Obj
    old: Obj | None


class Subscription:
    """A queue of events for one watcher (of one resource's, or with no `key` of every
    resource's); `None` in the queue means "closed by the server"."""

    def __init__(self, store: Store, key: Key | None = None) -> None:
        self._store = store
        self.key = key
        self.queue: asyncio.Queue[WatchEvent | None] = asyncio.Queue()

    def close(self) -> None:
        """Stop receiving events."""
        self._store._subscribers.get(self.key, set()).discard(self)


class Store:
    """All objects of all resources, keyed by (group, plural) then (namespace, name)."""

    def __init__(self, history: int = 5000, first_rv: int = 1000) -> None:
        self._objects: dict[Key, dict[tuple[str, str], Obj]] = {}
        #: each resource's (namespace, name) keys in order, rebuilt after an object is added
        #: or removed: a paged list of 35,000 pods must not sort them again for every page
        self._order: dict[Key, list[tuple[str, str]]] = {}
        self._history: deque[WatchEvent] = deque(maxlen=history)
        self._rv = first_rv
        # Events with rv <= _compacted are no longer available to watches. Nothing is
        # lost yet: a version from before the first one replays the whole history.
        self._compacted = 0
        # Per resource, the version its watch cache started at: a custom resource's
        # starts when its CRD is served, and older versions are 410 for it alone.
        self._watch_start: dict[Key, int] = {}
        #: watchers by the resource they watch (None: every resource). Each event goes to
        #: its resource's watchers only, as the real server's watch cache is per resource:
        #: otherwise every event wakes every watch of every client (a sharded bench's
        #: replicas hold 34 watches each).
        self._subscribers: dict[Key | None, set[Subscription]] = {}

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out."""
        return self._rv

    def last_version(self, excluding: Collection[str] = ()) -> int:
        """The resourceVersion of the latest write to a resource whose plural is not in
        `excluding` (e.g. Lease renewals), among the kept history."""
        for event in reversed(self._history):
            if event.key[1] not in excluding:
                return event.rv
        return self._compacted

    @property
    def compacted(self) -> int:
        """Versions up to this one are no longer served (watches and list continuations)."""
        return self._compacted

    def get(self, key: Key, namespace: str, name: str) -> Obj | None:
        """A copy of one object, or None."""
        obj = self._objects.get(key, {}).get((namespace, name))
        return clone(obj) if obj is not None else None

    def peek(self, key: Key, namespace: str, name: str) -> Obj | None:
        """The stored object itself (read-only use; avoids a copy on hot paths)."""
        return self._objects.get(key, {}).get((namespace, name))

    def list(self, key: Key, namespace: str | None = None) -> list[Obj]:
        """Copies of all objects of one resource (optionally in one namespace), name order."""
        return [clone(o) for o in self.iter(key, namespace)]

    def iter(
        self, key: Key, namespace: str | None = None, after: tuple[str, str] | None = None
    ) -> Iterator[Obj]:
        """The stored objects themselves, sorted by namespace and name (read-only use),
        optionally only those after the (namespace, name) position `after`.

        Objects removed while the iterator is suspended are skipped; objects added
        meanwhile may be missed, as with a list taken a moment earlier.
        """
        bucket = self._objects.get(key, {})
        order = self._order.get(key)
        if order is None:
            order = self._order[key] = sorted(bucket)
        start = 0
        if namespace is not None:
            start = bisect.bisect_left(order, (namespace, ""))
        if after is not None:
            start = max(start, bisect.bisect_right(order, after))
        for index in range(start, len(order)):
            ns_name = order[index]
            if namespace is not None and ns_name[0] != namespace:
                return
            obj = bucket.get(ns_name)
            if obj is not None:
                yield obj

    def put(self, key: Key, obj: Obj, event_type: str) -> Obj:
        """Store `obj` (ADDED or MODIFIED), stamping the next resourceVersion; returns a copy."""
        meta = obj["metadata"]
        slot = (meta.get("namespace", ""), meta["name"])
        bucket = self._objects.setdefault(key, {})
        old = bucket.get(slot)
        if old is None:
            self._order.pop(key, None)
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        stored = clone(obj)
        bucket[slot] = stored
        self._emit(WatchEvent(event_type, self._rv, key, stored, old))
        return clone(stored)

    def restore(self, key: Key, objects: Iterable[Obj]) -> int:
        """Load objects as a restarted API server finds them in etcd: each gets the next
        resourceVersion, but no watch event is kept (history starts after them).

        For building large clusters quickly (benchmarks); the objects are stored as
        given, not copied. Returns how many were stored.
        """
        bucket = self._objects.setdefault(key, {})
        self._order.pop(key, None)
        count = 0
        for obj in objects:
            meta = obj["metadata"]
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            bucket[(meta.get("namespace", ""), meta["name"])] = obj
            count += 1
        self._history.clear()
        self._compacted = self._rv
        return count

    def remove(self, key: Key, namespace: str, name: str) -> Obj | None:
        """Delete one object; the DELETED event carries a new resourceVersion."""
        bucket = self._objects.get(key, {})
        old = bucket.pop((namespace, name), None)
        if old is None:
            return None
        self._order.pop(key, None)
        self._rv += 1
        final = clone(old)
        final["metadata"]["resourceVersion"] = str(self._rv)
        self._emit(WatchEvent("DELETED", self._rv, key, final, old))
        return clone(final)

    def drop_resource(self, key: Key) -> list[Obj]:
        """Delete every object of one resource (a CRD went away)."""
        removed = []
        for ns, name in sorted(self._objects.get(key, {})):
            obj = self.remove(key, ns, name)
            if obj is not None:
                removed.append(obj)
        self._watch_start.pop(key, None)
        return removed

    def start_watch_cache(self, key: Key) -> None:
        """A resource starts being served now (a CRD was established): as the real
        server's watch cache for it, watches from an earlier version get 410."""
        self._watch_start.setdefault(key, self._rv)

    def _emit(self, event: WatchEvent) -> None:
        self._history.append(event)
        if len(self._history) == self._history.maxlen:
            self._compacted = max(self._compacted, self._history[0].rv - 1)
        for key in (event.key, None):
            for sub in list(self._subscribers.get(key, ())):
                sub.queue.put_nowait(event)

    def subscribe(
        self, since: int | None, key: Key | None = None
    ) -> tuple[list[WatchEvent], Subscription]:
        """Events after `since` from history plus a live subscription, atomically.

        Raises 410 Gone when `since` is older than the kept history or than the start of
        `key`'s watch cache, with the real server's message.
        """
        backlog: list[WatchEvent] = []
        if since is not None:
            oldest = max(self._compacted, self._watch_start.get(key, 0) if key else 0)
            if since < oldest:
                raise gone(f"too old resource version: {since} ({oldest})")
            backlog = [e for e in self._history if e.rv > since and key in (None, e.key)]
        sub = Subscription(self, key)
        self._subscribers.setdefault(key, set()).add(sub)
        return backlog, sub

    def compact(self) -> None:
        """Forget all history (like an etcd compaction): older watches now get 410."""
        self._history.clear()
        self._compacted = self._rv

    def close_watches(self) -> int:
        """End every live watch stream (clients see the connection end); returns how many."""
        subs = [sub for subs in self._subscribers.values() for sub in subs]
        for sub in subs:
            sub.queue.put_nowait(None)
        return len(subs)
