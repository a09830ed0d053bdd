"""A keyed, de-duplicated, rate-limited work queue of workloads (client-go's workqueue
semantics): a key is queued at most once; a key added while it is being worked on is
worked on again after it is done, never by two workers at once; failures back off per key,
exponentially; `add_after` schedules a key for later.

A key queued in bulk (`add(key, bulk=True)`: every workload at start, at a resync, when a
policy changes) waits behind every key queued for a change of its own (a watch event, a
follow-up, a retry), as controller-runtime's priority queue puts its initial list last:
a rollout under way is followed to its end before another starts. Queued in bulk, 25,000
workloads made every follow-up of a rollout wait a whole round of the others, and a
two-pod rollout outlasted the 10 s after which it is reported Pending (10,000 status
writes more at that size). A key queued in bulk and then for a change moves ahead.

A change of a key due back within `coalesce_s` (a rollout followed every second) waits
for that time rather than queueing it now: the echoes of the pass's own writes and the
kubelet's progress arrive in that second, and one pass reads them all instead of one
pass each. A bulk add does not wait: it asks for a look at everything now."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from reconciler.ratelimit import TokenBucket

K = TypeVar("K", bound=Hashable)

FAILURE_BASE_S = 0.05
FAILURE_MAX_S = 300.0


class WorkQueue(Generic[K]):
    """Keys waiting to be reconciled."""

    def __init__(
        self,
        *,
        rate: float = 200.0,
        burst: float = 1000.0,
        clock: Callable[[], float] = time.monotonic,
        coalesce_s: float = 0.0,
    ) -> None:
        self.coalesce_s = coalesce_s
        self._queued: OrderedDict[K, float] = OrderedDict()  # key -> when it was added
        self._bulk: OrderedDict[K, float] = OrderedDict()  # the same, queued in bulk
        self._active: set[K] = set()
        self._dirty: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._bucket = TokenBucket(rate, burst, clock=clock)
        self._clock = clock
        self._ready = asyncio.Event()
        self._closed = False
        self._sealed = False

    def __len__(self) -> int:
        return len(self._queued) + len(self._bulk)

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing being worked on (scheduled keys do not count)."""
        return not self._queued and not self._bulk and not self._active

    def queued(self) -> list[K]:
        """The queued keys, in the order they are handed out."""
        return [*self._queued, *self._bulk]

    def scheduled_within(self, seconds: float) -> int:
        """How many keys are scheduled (`add_after`) to come back within `seconds`."""
        horizon = asyncio.get_running_loop().time() + seconds
        return sum(1 for timer in self._timers.values() if timer.when() <= horizon)

    @property
    def scheduled(self) -> int:
        """How many keys are scheduled to come back later."""
        return len(self._timers)

    def add(self, key: K, *, bulk: bool = False) -> None:
        """Queue `key` unless it is queued already (`bulk`: behind every key queued for a
        change of its own)."""
        if self._closed or self._sealed:
            return
        timer = self._timers.get(key)
        if (
            not bulk
            and timer is not None
            and timer.when() - asyncio.get_running_loop().time() <= self.coalesce_s
        ):
            return  # it comes back soon, and then reads this change too
        if timer is not None:
            del self._timers[key]
            timer.cancel()
            bulk = False  # it was to come back: something of its own is under way
        if key in self._active:
            self._dirty.add(key)
        elif key in self._queued:
            return
        elif bulk:
            if key not in self._bulk:
                self._bulk[key] = self._clock()
                self._ready.set()
        else:
            added = self._bulk.pop(key, None)
            self._queued[key] = self._clock() if added is None else added
            self._ready.set()

    def add_after(self, key: K, delay_s: float) -> None:
        """Queue `key` in `delay_s` seconds (an earlier schedule for it wins)."""
        if self._closed or self._sealed:
            return
        if delay_s <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        existing = self._timers.get(key)
        when = loop.time() + delay_s
        if existing is not None and existing.when() <= when:
            return
        if existing is not None:
            existing.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_failed(self, key: K) -> float:
        """Queue `key` again after its per-key backoff; returns the delay."""
        count = self._failures.get(key, 0)
        self._failures[key] = count + 1
        delay = min(FAILURE_MAX_S, FAILURE_BASE_S * 2**count)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """`key` succeeded: its failure backoff starts over."""
        self._failures.pop(key, None)

    async def get(self) -> tuple[K, float]:
        """The next key and how long it waited; waits for one (and for the rate limit)."""
        while True:
            while not (self._queued or self._bulk) or self._closed:
                if self._closed:
                    raise QueueClosed
                self._ready.clear()
                await self._ready.wait()
            wait = self._bucket.try_take()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            if self._queued:
                key, added = self._queued.popitem(last=False)
            elif self._bulk:
                key, added = self._bulk.popitem(last=False)
            else:
                continue
            self._active.add(key)
            return key, self._clock() - added

    def done(self, key: K) -> None:
        """The work on `key` is finished; it is queued again if it was added meanwhile."""
        self._active.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def clear(self) -> None:
        """Drop every queued and scheduled key and every backoff; keys being worked on
        finish, and are not queued again for what was added meanwhile."""
        self._queued.clear()
        self._bulk.clear()
        self._dirty.clear()
        self._failures.clear()
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def seal(self) -> None:
        """Hand out what is queued, take nothing new (`--once`: each key exactly once,
        even when its pass asks to come back or the watches report its own writes)."""
        self._sealed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def close(self) -> None:
        """Stop handing out keys; waiting getters raise QueueClosed."""
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._ready.set()


class QueueClosed(Exception):
    """The queue was closed."""
