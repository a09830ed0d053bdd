"""What a sharded replica keeps: the objects of its buckets' namespaces, and every
cluster-wide one.

`ShardFilter` says which namespaces' per-workload objects (workloads, the ReplicaSets and
Jobs between them and their pods, pods, autoscalers, LimitRanges and ResourceQuotas,
RightsizingRecommendations) a view keeps: those whose namespace's bucket
(`app.model.shards.bucket_of`) this replica holds. Everything else (nodes, namespaces, kerf's
policies and strategies, recommendation ConfigMaps) every replica keeps, so each decides
with the same inputs a single replica would; of the ConfigMaps' rows, those of its buckets'
namespaces (a row names its workload's namespace; at 100,000 workloads the rows are
86 MiB).

`ShardedView` consults the filter on every object the informers bring: one outside its
buckets is not stored (and dropped, had it been stored while its bucket was held). Of a
pod outside, only what it takes from its node is kept, so the room a resize needs on a
node still counts every pod there (`node_requests`).

The Namespaces are listed first (`ShardedFeed.weigh`): the shard set weighs its buckets
by them before its first claims, and the rest is listed with the buckets claimed.

When the held buckets change, the filter changes and `ShardedFeed.relist` lists the
per-workload resources and the recommendation ConfigMaps again: the informers of the
other resources go on watching.
That is the simplest way that is correct both ways. A gained bucket's objects arrive
with the list (while a watch goes on, events of a namespace not kept were never
stored, and nothing but a list brings them back); a lost bucket's are dropped as the
list brings them through the filter, or at its end if they are gone. Buckets change
only when members come or go, so a relist is rare. Until it is in, the view shows the
gained buckets' objects only in part (`complete` says no), and the replica does not act on
them: a workload seen without its pods would be decided as having none; it does not write
for the buckets it lost either (the fence, `app.kube.shardleases`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from app.kube.informer import ClusterFeed, Informer
from app.kube.shardleases import Weighing
from app.model.crd import KerfResource
from app.model.kube_types import PodDict, as_pod, node_name
from app.model.quantities import QuantityError
from app.model.shards import bucket_of
from app.model.workloads import WORKLOAD_KINDS
from app.store.inputs import NO_REACH, Reach
from app.store.namespace_bounds import BOUND_KINDS
from app.store.view import (
    INTERMEDIATE_OWNER_KINDS,
    TERMINAL_PHASES,
    ClusterView,
    node_requests_of,
    object_key,
)

#: What belongs to a namespace's workloads: kept only for the buckets a replica holds.
PER_WORKLOAD_KINDS = frozenset(
    {
        *WORKLOAD_KINDS,
        *INTERMEDIATE_OWNER_KINDS,
        "Pod",
        "HorizontalPodAutoscaler",
        "VerticalPodAutoscaler",
        "RightsizingRecommendation",
        *BOUND_KINDS,
    }
)

#: What a relist brings again when the held buckets change: the per-workload objects, and
#: the recommendation ConfigMaps, whose rows a replica keeps for its buckets' namespaces
#: only (every replica keeps the ConfigMaps themselves).
RELISTED_KINDS = PER_WORKLOAD_KINDS | {"ConfigMap"}


class ShardFilter:
    """The buckets a replica holds, asked per object: kept or not."""

    def __init__(self, buckets: int, held: Iterable[int] = ()) -> None:
        self.buckets = buckets
        self.held: frozenset[int] = frozenset(held)
        #: the held buckets the view has every object of: a gained bucket's arrive with a
        #: relist, in any order across the resources (a workload before its pods), and
        #: only once it is in does the view show that bucket's workloads whole
        self.listed: frozenset[int] = frozenset()
        self._bucket: dict[str, int] = {}

    def bucket(self, namespace: str) -> int:
        """The namespace's bucket (remembered: every event of the namespace asks)."""
        found = self._bucket.get(namespace)
        if found is None:
            found = self._bucket[namespace] = bucket_of(namespace, self.buckets)
        return found

    def owns(self, namespace: str) -> bool:
        """The namespace's bucket is held."""
        return self.bucket(namespace) in self.held

    def complete(self, namespace: str) -> bool:
        """The view has every object of the namespace's bucket."""
        return self.bucket(namespace) in self.listed

    def keeps(self, kind: str, namespace: str) -> bool:
        """Whether a view keeps an object: cluster-wide, or of a held bucket."""
        return kind not in PER_WORKLOAD_KINDS or not namespace or self.owns(namespace)


def _key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    if isinstance(obj, KerfResource):
        return obj.kind, obj.metadata.namespace or "", obj.metadata.name
    return object_key(obj)


class ShardedView(ClusterView):
    """A ClusterView that keeps only what its `shard_filter` keeps (all without one)."""

    def __init__(self, *, shard_filter: ShardFilter | None = None, **kwargs: Any) -> None:
        rows_of = shard_filter.owns if shard_filter is not None else None
        super().__init__(rows_of=rows_of, **kwargs)
        self.shard_filter = shard_filter
        #: pods outside the held buckets: (node, cpu, memory) each, and the totals by node
        self._foreign: dict[tuple[str, str], tuple[str, int, int]] = {}
        self._foreign_totals: dict[str, list[int]] = {}
        #: every Namespace's name: the shard set weighs its buckets by them
        self._namespace_names: set[str] = set()

    def namespace_names(self) -> list[str]:
        """The names of every Namespace the view has (every replica keeps them all)."""
        with self.lock:
            return list(self._namespace_names)

    def complete(self, namespace: str) -> bool:
        """The view has every object of the namespace (sharded: its bucket is listed)."""
        return self.shard_filter is None or self.shard_filter.complete(namespace)

    def apply(self, obj: Mapping[str, Any]) -> Reach:
        kind, namespace, name = _key(obj)
        if kind == "Namespace":
            with self.lock:
                self._namespace_names.add(name)
        if self.shard_filter is None:
            return super().apply(obj)
        if self.shard_filter.keeps(kind, namespace):
            if kind == "Pod":
                self._forget_foreign(namespace, name)
            return super().apply(obj)
        if kind == "Pod":
            self._count_foreign(as_pod(obj), namespace, name)
        return self._drop(kind, namespace, name)

    def delete(self, kind: str, namespace: str, name: str) -> Reach:
        if kind == "Namespace":
            with self.lock:
                self._namespace_names.discard(name)
        if kind == "Pod":
            self._forget_foreign(namespace, name)
        return super().delete(kind, namespace, name)

    def _drop(self, kind: str, namespace: str, name: str) -> Reach:
        with self.lock:
            if self._stored(kind, namespace, name) is None:
                return NO_REACH
        return super().delete(kind, namespace, name)

    def _count_foreign(self, pod: PodDict, namespace: str, name: str) -> None:
        self._forget_foreign(namespace, name)
        node = node_name(pod)
        if not node or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return
        try:
            cpu, memory = node_requests_of(pod)
        except QuantityError:  # the API server refuses these; counted as none
            return
        with self.lock:
            self._foreign[(namespace, name)] = (node, cpu, memory)
            totals = self._foreign_totals.setdefault(node, [0, 0])
            totals[0] += cpu
            totals[1] += memory

    def _forget_foreign(self, namespace: str, name: str) -> None:
        with self.lock:
            old = self._foreign.pop((namespace, name), None)
            if old is not None:
                totals = self._foreign_totals[old[0]]
                totals[0] -= old[1]
                totals[1] -= old[2]

    def node_requests(self, node: str) -> tuple[int, int]:
        cpu, memory = super().node_requests(node)
        foreign = self._foreign_totals.get(node, (0, 0))
        return cpu + foreign[0], memory + foreign[1]


class ShardedFeed(ClusterFeed):
    """A ClusterFeed whose per-workload resources can be listed again (`relist`) when the
    buckets a replica holds change."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._relist_due = asyncio.Event()
        self._tasks: dict[int, asyncio.Task[None]] = {}
        #: set while every resource is listed with the buckets held now (no relist due or
        #: under way)
        self.complete = asyncio.Event()
        #: called once a relist is in: the objects of a gained bucket arrive in any order
        #: across the resources (a workload before its pods), so whoever acts on them looks
        #: at them again once all are in
        self.on_relisted: Callable[[], object] = lambda: None
        self._relisting = False
        #: the Namespaces' informer: the shard set weighs its buckets by them
        self._names = next(
            (
                i
                for i, informer in enumerate(self.informers)
                if informer.resource.kind == "Namespace"
            ),
            None,
        )
        if isinstance(self.view, ShardedView) and self.view.shard_filter is not None:
            # The records of other replicas' buckets are dropped before they are parsed.
            for informer in self.informers:
                informer.keeps = self.view.shard_filter.keeps

    def weigh(self) -> asyncio.Task[None] | None:
        """List and watch the Namespaces now, ahead of `run` (which goes on with them):
        the shard set's first claims wait for them, and the per-workload kinds wait for
        the first claims. The task, to cancel should `run` never start; None without a
        Namespaces resource."""
        if self._names is None:
            return None
        if self._names not in self._tasks:
            self._start(self._names, self.informers[self._names])
        return self._tasks[self._names]

    def weighing(self) -> Weighing:
        """Whether the Namespaces are listed; unavailable when the list is refused (401,
        403: no permission) or this feed has no Namespaces resource."""
        if self._names is None:
            return Weighing.UNAVAILABLE
        informer = self.informers[self._names]
        if informer.listed:
            return Weighing.LISTED
        return Weighing.UNAVAILABLE if informer.last_status in (401, 403) else Weighing.PENDING

    def relist(self) -> None:
        """List the per-workload resources again, soon (requests made before it starts
        are one relist)."""
        self.complete.clear()
        self._relist_due.set()

    async def run(self) -> None:
        """Run every informer until cancelled, relisting when asked."""
        # The first list is made with the buckets held now: nothing to list again yet.
        self._relist_due.clear()
        try:
            for index, informer in enumerate(self.informers):
                if index not in self._tasks:  # the Namespaces may be under way (`weigh`)
                    self._start(index, informer)
            while True:
                await self._relist_due.wait()
                self._relist_due.clear()
                await self._relist()
        finally:
            for task in self._tasks.values():
                task.cancel()
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def _start(self, index: int, informer: Informer) -> None:
        self._tasks[index] = asyncio.create_task(
            informer.run(), name=f"informer {informer.resource.kind}"
        )

    async def _relist(self) -> None:
        again = [
            (index, informer)
            for index, informer in enumerate(self.informers)
            if informer.resource.kind in RELISTED_KINDS
        ]
        # Unlisted before the cancellations are awaited: another resource's contact in
        # between must not find the view complete.
        self._relisting = True
        for index, informer in again:
            informer.listed = False
            self._tasks[index].cancel()
        await asyncio.gather(*(self._tasks[index] for index, _ in again), return_exceptions=True)
        for index, informer in again:
            # The list ends by deleting what it no longer holds: the lost buckets' objects.
            informer.resource_version = None
            informer.listed = False
            self._start(index, informer)

    def _contact(self, informer: Informer) -> None:
        super()._contact(informer)
        if self.complete.is_set() or self._relist_due.is_set() or self.unlisted():
            return
        self.complete.set()
        shard_filter = self.view.shard_filter if isinstance(self.view, ShardedView) else None
        if shard_filter is not None:
            # Every held bucket changes the filter and asks for a relist first.
            shard_filter.listed = shard_filter.held
        if self._relisting:
            self._relisting = False
            self.on_relisted()
