"""What a sharded replica looks at again once a relist is in: the workloads of the
buckets it gained, not every workload it keeps (those the relist found changed are
queued by their own change, as a watch event queues them)."""

from __future__ import annotations

from app.kube.shardview import ShardFilter
from app.model.shards import bucket_of
from reconciler.api import ApiWriter
from reconciler.metrics import reconciler_metrics
from reconciler.reconcile import WorkloadReconciler
from reconciler.service import Reconciler, WatchedView
from tests.reconciler.test_leader import Recorder
from tests.reconciler.test_watched_view import deployment

BUCKETS = 64
KEPT, GAINED = "shop", "other"  # in different buckets


class Held:
    """The bucket Leases a replica holds, as the service asks them."""

    def __init__(self, *namespaces: str) -> None:
        self.buckets = frozenset(bucket_of(ns, BUCKETS) for ns in namespaces)

    def held(self) -> frozenset[int]:
        return self.buckets

    def owns(self, namespace: str | None) -> bool:
        return bucket_of(namespace or KEPT, BUCKETS) in self.buckets


def queued(service: Reconciler) -> set[tuple[str, str]]:
    return {(ref.namespace, ref.name) for ref in service.queue.queued()}


async def test_a_relist_queues_the_gained_buckets_workloads_only() -> None:
    assert bucket_of(KEPT, BUCKETS) != bucket_of(GAINED, BUCKETS)
    shard_filter = ShardFilter(BUCKETS, Held(KEPT).held())
    view = WatchedView(lambda ref: None, shard_filter=shard_filter)
    metrics = reconciler_metrics()
    reconciler = WorkloadReconciler(view, ApiWriter(Recorder([])), metrics, webhook_lease=None)  # type: ignore[arg-type]
    shards = Held(KEPT)
    service = Reconciler(view, reconciler, metrics, shards=shards)  # type: ignore[arg-type]
    view.apply(deployment("web", KEPT))
    service.start_accepting()
    assert queued(service) == {(KEPT, "web")}
    service.queue.clear()

    shards.buckets = Held(KEPT, GAINED).held()
    service.on_buckets(Held(GAINED).held(), frozenset())
    view.apply(deployment("api", GAINED))  # the relist brings the gained bucket's objects
    service.queue.clear()
    service.on_relisted()
    assert queued(service) == {(GAINED, "api")}

    # a relist for a lost bucket only: nothing to look at again
    service.queue.clear()
    shards.buckets = Held(KEPT).held()
    service.on_buckets(frozenset(), Held(GAINED).held())
    service.on_relisted()
    assert not queued(service)
