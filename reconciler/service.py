"""The reconciler service: the watched view, the work queue and its workers, the periodic
resync, leader election, health and metrics, and a graceful stop (SPEC §7).

Every replica keeps its view warm; only the leader works the queue (and so writes). A
replica that stops leading drops its queue, and its passes under way send no more writes
(`app.kube.leader.write_fence`): the next leader decides again from fresh state.

Sharded (`--shards` above 1, `app.kube.shardleases`), a replica keeps and works only the
workloads of the namespaces whose bucket Lease it holds (`app.kube.shardview`), each write
fenced on that bucket; what concerns the whole cluster (the GlobalConfiguration's status,
the ClusterRollbackPolicies' counters, the reports on recommendation ConfigMaps, static
policies and stored Kubex kinds) the holder of bucket 00 writes (docs/decisions.md).
A change of any input of a workload queues the workloads it may touch, as
`app.store.inputs` derives them from what the decisions declare they read (its pods, itself,
its RightsizingRecommendation, its autoscalers, its namespace and the bounds there; kerf
objects, recommendation ConfigMaps and a node's allocatable queue every workload). The
periodic resync queues all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.kube.firstsync import POLL_S, REFUSED_STATUSES, ApiUnavailable, first_sync
from app.kube.informer import KERF_CRDS, WEBHOOK_RESOURCES, ClusterFeed, Resource, kerf_resources
from app.kube.leader import WORK_TERMS, LeaderElector, NotLeading
from app.kube.reachability import describe, format_seconds, is_outage, status_of
from app.kube.shardleases import ShardLeases
from app.kube.shardview import ShardedFeed, ShardedView
from app.model.crd import CRD_KIND, STORED_KINDS, KerfResource
from app.model.owners import WorkloadRef
from app.policy.uninstall import stand_down
from app.runtime.heap import freeze_for_service
from app.store.decision_cache import RECONCILER_CACHED_PLANS, RECONCILER_PARSED_PODS
from app.store.inputs import Reach
from app.store.view import ClusterView
from reconciler.api import Writer
from reconciler.defaults import DEFAULT_RESYNC_S, DEFAULT_WORKERS
from reconciler.globalstatus import GlobalStatusReporter
from reconciler.metrics import ReconcilerMetrics
from reconciler.policyevents import PolicyEvents
from reconciler.policystatus import SharedCounts, write_policy_status
from reconciler.queue import QueueClosed, WorkQueue
from reconciler.reconcile import WorkloadReconciler
from reconciler.sources import SourceReporter
from reconciler.storedkinds import StoredKindReporter

logger = logging.getLogger("kerf.reconciler")

#: What the running-path decision reads: the same resources as the webhook's view; and the
#: Kubex kinds kerf stores only, to tell each of them once that kerf does not act on it
#: (optional: a cluster upgraded without applying the new CRDs first still reconciles).
RECONCILER_RESOURCES: tuple[Resource, ...] = (
    *WEBHOOK_RESOURCES,
    *(replace(r, optional=True) for r in kerf_resources(STORED_KINDS)),
    KERF_CRDS,
)
#: How long (seconds) the workers may run passes back to back before they let the watches
#: and the Lease renewals in: a pass that needs no API call never suspends.
YIELD_EVERY_S = 0.005


class WatchedView(ShardedView):
    """A ClusterView that tells which workloads a change may touch (`app.store.inputs.reach`,
    derived from what the decisions declare they read), and (`on_input`) when a Kubex
    kind kerf only stores changed: no workload is touched, only the reports are due."""

    def __init__(
        self,
        on_change: Callable[[WorkloadRef | None], None],
        on_input: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.caches.max_plans = RECONCILER_CACHED_PLANS
        self.caches.max_parsed = RECONCILER_PARSED_PODS
        self._on_change = on_change
        self._on_input = on_input or (lambda: on_change(None))
        #: how many times one of kerf's CRDs came or changed (`Reconciler.stands_down`)
        self.crd_changes = 0

    def apply(self, obj: Mapping[str, Any]) -> Reach:
        found = super().apply(obj)
        self._route(obj.kind if isinstance(obj, KerfResource) else str(obj.get("kind")), found)
        return found

    def delete(self, kind: str, namespace: str, name: str) -> Reach:
        found = super().delete(kind, namespace, name)
        self._route(kind, found)
        return found

    def _route(self, kind: str, found: Reach) -> None:
        if kind == CRD_KIND:
            self.crd_changes += 1
        if kind in STORED_KINDS:
            self._on_input()
        elif found.every:
            self._on_change(None)
        else:
            for key in sorted(found.workloads):
                self._on_change(WorkloadRef(*key))
            if found.namespaces:
                for workload in [w for w in self.workloads() if w.namespace in found.namespaces]:
                    self._on_change(workload.ref)


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """Settings of the running service."""

    workers: int = DEFAULT_WORKERS
    resync_s: float = DEFAULT_RESYNC_S
    #: queue-wide rate of workload passes
    queue_rate: float = 200.0
    #: how often the rollback policies' status counters are brought up to date
    policy_status_s: float = 30.0


class Reconciler:
    """The service around `WorkloadReconciler`: queue, workers, resync, leadership."""

    def __init__(
        self,
        view: WatchedView,
        reconciler: WorkloadReconciler,
        metrics: ReconcilerMetrics,
        *,
        config: ServiceConfig | None = None,
        leader: LeaderElector | None = None,
        shards: ShardLeases | None = None,
        cluster_writer: Writer | None = None,
        relist: Callable[[], None] | None = None,
    ) -> None:
        self.view = view
        self.reconciler = reconciler
        self.metrics = metrics
        self.config = config or ServiceConfig()
        self.leader = leader
        self.shards = shards
        #: lists the per-workload resources again once the held buckets changed
        self._relist = relist or (lambda: None)
        self.queue: WorkQueue[WorkloadRef] = WorkQueue(
            rate=self.config.queue_rate, coalesce_s=reconciler.config.follow_s
        )
        # Read when scraped, not set at every pass.
        metrics.queue_depth.set_function(lambda: len(self.queue))
        self._all_pending = False
        self._accepting = False
        #: buckets gained since the last relist was in: their workloads are looked at again
        #: once it is (`on_relisted`)
        self._gained: set[int] = set()
        self.passes = 0
        #: when a worker last let the event loop run
        self._yielded = time.monotonic()
        instance, clock = reconciler.config.instance, reconciler.clock
        #: the writes for the whole cluster (sharded: fenced on bucket 00)
        cluster = cluster_writer or reconciler.writer
        self.sources = SourceReporter(cluster, instance=instance, clock=clock)
        self.policy_events = PolicyEvents(cluster, instance=instance, clock=clock)
        self.stored_kinds = StoredKindReporter(cluster, instance=instance, clock=clock)
        self.global_status = GlobalStatusReporter(cluster, reconciler.webhook_lease, clock=clock)
        #: set when a ConfigMap or kerf object changed, at leadership and resync: the bad
        #: recommendation ConfigMaps and the static policies no node can hold are told
        self._inputs_due = asyncio.Event()
        #: why the service makes no change now (app/policy/uninstall.py), as last logged,
        #: and the view's CRD changes it was worked out at (asked before every pass)
        self._standing_down: str | None = None
        self._crds_seen: int | None = None

    # ----------------------------------------------------------------- queueing

    def on_change(self, ref: WorkloadRef | None) -> None:
        """A watched change: queue the workload it touches, or every one (batched)."""
        if not self._accepting:
            return
        if ref is not None:
            self.queue.add(ref)
            return
        self._inputs_due.set()
        if not self._all_pending:
            self._all_pending = True
            asyncio.get_running_loop().call_soon(self.enqueue_all)

    def on_input(self) -> None:
        """A change no decision reads (a stored Kubex kind): only the reports are due."""
        if self._accepting:
            self._inputs_due.set()

    def enqueue_all(self) -> None:
        """Queue every workload of the view."""
        self._all_pending = False
        refs = [workload.ref for workload in self.view.workloads()]
        # A workload deleted while this replica did not pass over it leaves no memory.
        self.reconciler.keep(ref.key for ref in refs)
        for ref in refs:
            self.queue.add(ref, bulk=True)

    def on_leadership(self, leading: bool) -> None:
        """Passes made while following were skipped: a new leader looks at everything. A
        replica that stops leading drops what it had queued: those decisions were made
        for a leader, and whoever leads now makes its own."""
        self.metrics.leader.set(1 if leading else 0)
        if not leading:
            self.queue.clear()
        # Another leader may have carried on and reported a rollout this replica had not
        # reported yet: the cluster says what was applied, not this replica's memory.
        self.reconciler.forget_unreported()
        if leading and self._accepting:
            self._inputs_due.set()
            self.enqueue_all()

    def on_buckets(self, gained: frozenset[int], lost: frozenset[int]) -> None:
        """Sharded, the held buckets changed: the view keeps the new set's objects (a
        relist brings the gained buckets' workloads, worked once it is in, and drops the
        lost ones'), and what was remembered of the lost buckets' workloads is forgotten:
        whoever held them since decided from the cluster, and so does this replica. A
        bucket lost and claimed again in one round (a pause past its Lease) is in both."""
        assert self.shards is not None and self.view.shard_filter is not None
        shard_filter = self.view.shard_filter
        held = self.shards.held()
        shard_filter.held = held
        shard_filter.listed &= held
        self._gained = (self._gained | gained) & held
        self.metrics.leader.set(1 if self.writes_cluster else 0)
        if lost:
            bucket = shard_filter.bucket
            with self.view.lock:
                kept = [
                    w.ref.key
                    for w in self.view.workloads()
                    if bucket(w.namespace) in held and bucket(w.namespace) not in lost
                ]
            self.reconciler.keep(kept)
        self.reconciler.forget_unreported()
        self._relist()
        if self._accepting:
            self._inputs_due.set()

    def on_relisted(self) -> None:
        """The view has every object of the buckets held now: each workload of a gained
        bucket is looked at again (one listed before its pods was passed over without
        them). The kept buckets' workloads need no second look: what the relist brought
        of them that had changed queued them as it came, as a watch event does."""
        gained, self._gained = self._gained, set()
        if not self._accepting or not gained:
            return
        assert self.view.shard_filter is not None
        bucket = self.view.shard_filter.bucket
        with self.view.lock:
            refs = [w.ref for w in self.view.workloads() if bucket(w.namespace) in gained]
        for ref in refs:
            self.queue.add(ref, bulk=True)

    @property
    def leading(self) -> bool:
        """This replica may write: it leads (sharded: it holds bucket 00, the writer for
        the whole cluster)."""
        if self.shards is not None:
            return self.writes_cluster
        return self.leader is None or self.leader.leading()

    @property
    def writes_cluster(self) -> bool:
        """This replica writes what concerns the whole cluster now."""
        return self.owns(None)

    def owns(self, namespace: str | None) -> bool:
        """This replica may write for the namespace (None: for the whole cluster); sharded,
        once its view has every object of the namespace's bucket, not only its Lease."""
        if self.shards is not None:
            return self.shards.owns(namespace) and (
                namespace is None or self.view.complete(namespace)
            )
        return self.leader is None or self.leader.leading()

    # ----------------------------------------------------------------- working

    def start_accepting(self) -> None:
        """The view is synced: queue every workload and follow changes from now on."""
        self._accepting = True
        self._gained.clear()  # every workload is queued now
        self.metrics.synced.set(1)
        freeze_for_service()  # the loaded view stays: full collections need not walk it
        self._inputs_due.set()
        self.enqueue_all()

    async def work(self) -> None:
        """One worker: take a workload, reconcile it, until the queue closes."""
        while True:
            try:
                ref, waited = await self.queue.get()
            except QueueClosed:
                return
            self.metrics.queue_latency.observe(waited)
            try:
                if self.owns(ref.namespace) and not self.stands_down():
                    await self._pass(ref)
            finally:
                self.queue.done(ref)
            # A long queue of passes that need no API call would starve the watches and
            # the Lease renewals: one turn of the event loop per YIELD_EVERY_S of passes,
            # not one per pass (25,000 quiet passes make a steady pass).
            if time.monotonic() - self._yielded >= YIELD_EVERY_S:
                self._yielded = time.monotonic()
                await asyncio.sleep(0)

    def stands_down(self) -> bool:
        """kerf's CRDs are being deleted: no pass, status or Event now (logged once)."""
        seen = getattr(self.view, "crd_changes", None)
        if seen is not None and seen == self._crds_seen:
            return self._standing_down is not None
        self._crds_seen = seen
        reason = stand_down(self.view)
        if reason != self._standing_down:
            if reason is not None:
                logger.warning(reason)
            else:
                logger.info("kerf's CRDs are no longer being deleted: reconciling again")
            self._standing_down = reason
        return reason is not None

    def _terms(self, ref: WorkloadRef) -> dict[str, int]:
        """The term of the Lease the pass's writes need, as the pass begins."""
        if self.shards is not None:
            elector, _ = self.shards.guard(ref.namespace)
        elif self.leader is not None:
            elector = self.leader
        else:
            return {}
        return {elector.name: elector.term}

    async def _pass(self, ref: WorkloadRef) -> None:
        started = time.perf_counter()
        terms = WORK_TERMS.set(self._terms(ref))
        try:
            again = await self.reconciler.reconcile(ref)
        except NotLeading:
            # Leadership (its bucket) was lost mid-pass: the rest is dropped, not retried.
            logger.info(
                "dropped the pass over %s/%s/%s: no longer the leader",
                ref.kind,
                ref.namespace,
                ref.name,
            )
            return
        except Exception as exc:
            delay = self.queue.add_failed(ref)
            code = getattr(exc, "code", None)
            self.metrics.pass_failures.labels(str(code) if code else type(exc).__name__).inc()
            logger.warning(
                "reconciling %s/%s/%s failed (%s: %s); again in %.2fs",
                ref.kind,
                ref.namespace,
                ref.name,
                type(exc).__name__,
                exc,
                delay,
            )
            return
        finally:
            WORK_TERMS.reset(terms)
            self.passes += 1
            self.metrics.pass_seconds.observe(time.perf_counter() - started)
        self.queue.forget(ref)
        if again is not None:
            self.queue.add_after(ref, again)

    async def resync(self) -> None:
        """Queue every workload every `resync_s`."""
        while True:
            await asyncio.sleep(self.config.resync_s)
            self._inputs_due.set()
            self.enqueue_all()

    async def report_policies(self) -> None:
        """Every `policy_status_s`, the leader writes the rollback policies' counters and
        the GlobalConfiguration's status (the webhook's health)."""
        while True:
            await asyncio.sleep(self.config.policy_status_s)
            await self.write_policy_status()

    async def write_policy_status(self) -> None:
        """The rollback policies' counters, written where they changed (leader only;
        sharded, each by the holder of its namespace's bucket, bucket 00 for the
        cluster's, summed over the bucket Leases every replica publishes its counts on),
        and the GlobalConfiguration's status."""
        # A follower of the single leader has nothing to write (and says nothing).
        if (self.shards is None and not self.leading) or self.stands_down():
            return
        try:
            await write_policy_status(
                self.view, self.reconciler.writer, owns=self.owns, shared=self._shared_counts()
            )
            if self.writes_cluster:
                await self.global_status.report(self.view)
        except NotLeading:
            return  # whoever leads now writes them
        except Exception as exc:  # the next round tries again
            logger.warning("writing rollback policy status failed: %s: %s", type(exc).__name__, exc)

    def _shared_counts(self) -> SharedCounts | None:
        """Sharded, the ClusterRollbackPolicies' counters go through the bucket Leases:
        this replica counts the buckets its view holds whole."""
        shard_filter = self.view.shard_filter
        if self.shards is None or shard_filter is None:
            return None
        return SharedCounts(
            bucket=shard_filter.bucket,
            counted=self.shards.held() & shard_filter.listed,
            publish=self.shards.publish,
            notes=self.shards.notes,
        )

    async def report_inputs(self) -> None:
        """Whenever a ConfigMap or kerf object changed, the leader tells what is wrong with
        each recommendation ConfigMap's new version and each static policy's values."""
        while True:
            await self._inputs_due.wait()
            self._inputs_due.clear()
            await self.write_input_reports()

    async def write_input_reports(self) -> None:
        """Log and record an Event for each bad recommendation ConfigMap, each static
        policy with a value no node can hold and each stored Kubex kind kerf does not act
        on (with its `Supported=False` condition), not told yet."""
        if not self.leading or self.stands_down():
            return
        try:
            await self.sources.report(self.view)
            await self.policy_events.report(self.view)
            await self.stored_kinds.report(self.view)
            await self.global_status.report(self.view)
        except Exception as exc:  # the next change, leadership or resync tries again
            logger.warning("reporting bad inputs failed: %s: %s", type(exc).__name__, exc)

    async def drain(self) -> None:
        """Work the queue until nothing is queued or in progress (`--once`): one pass per
        workload, so a rollout started here is not followed to its end."""
        self.queue.seal()
        workers = [asyncio.create_task(self.work()) for _ in range(self.config.workers)]
        try:
            while not self.queue.idle:
                await asyncio.sleep(0.01)
        finally:
            self.queue.close()
            await asyncio.gather(*workers, return_exceptions=True)
        await self.write_policy_status()
        await self.write_input_reports()


async def run_cluster(
    feed: ClusterFeed,
    service: Reconciler,
    *,
    stop: asyncio.Event,
    once: bool = False,
    api_timeout_s: float | None = None,
) -> int:
    """Run the service until `stop` is set (or one full pass with `once`): the feed, the
    leader election, the workers and the resync; on stop, in-flight passes finish, the
    Lease is released and the watches end. With `api_timeout_s` the first sync is
    bounded (`app.kube.firstsync`: ApiUnavailable); without, it waits as long as it takes."""
    tasks: list[asyncio.Task[Any]] = []
    leader, shards = service.leader, service.shards
    if leader is not None and not once:
        tasks.append(asyncio.create_task(leader.run(), name="leader"))
    graceful = True
    try:
        if shards is not None:
            # The view is listed with the buckets this replica starts with, not listed
            # whole first and then again (app/kube/shardview.py); the Namespaces go
            # first, as the first claims weigh the buckets by them.
            weigher = feed.weigh() if isinstance(feed, ShardedFeed) else None
            tasks.extend([weigher] if weigher is not None else [])
            tasks.append(asyncio.create_task(shards.run(), name="shards"))
            await _settled(shards, stop, api_timeout_s, feed.reachability.server)
            if stop.is_set():
                return 0
        tasks.append(asyncio.create_task(feed.run(), name="feed"))
        if api_timeout_s is None:
            await _first(feed.wait_synced(), stop.wait())
        else:
            await first_sync(feed, api_timeout_s, stop=stop)
        if stop.is_set():
            return 0
        service.start_accepting()
        logger.info(
            "view synced", extra={"fields": {"workloads": len(list(service.view.workloads()))}}
        )
        if once:
            if leader is not None:
                # Sought once the view is synced: a run that cannot sync fails with one
                # line (app/kube/firstsync.py), not with the election's retries besides.
                tasks.append(asyncio.create_task(leader.run(), name="leader"))
                await _first(leader.elected.wait(), stop.wait())
            await service.drain()
            return 0
        workers = [asyncio.create_task(service.work()) for _ in range(service.config.workers)]
        periodic = [
            asyncio.create_task(service.resync()),
            asyncio.create_task(service.report_policies()),
            asyncio.create_task(service.report_inputs()),
        ]
        await stop.wait()
        service.queue.close()
        for task in periodic:
            task.cancel()
        await asyncio.gather(*workers, *periodic, return_exceptions=True)
        return 0
    except asyncio.CancelledError:
        graceful = False  # torn down, not stopped: like a crash, the Lease simply expires
        raise
    finally:
        if leader is not None and graceful:
            await leader.release()
        if shards is not None and graceful:
            await shards.release()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _settled(
    shards: ShardLeases, stop: asyncio.Event, bound_s: float | None, server: str
) -> None:
    """Wait until the shard set's first claims are in (or `stop`); with `bound_s` (a
    one-shot run), at most that long, and not at all once the server refuses the Leases:
    ApiUnavailable, one line that names the server and the error, as `first_sync` says."""
    if bound_s is None:
        await _first(shards.settled.wait(), stop.wait())
        return
    shards.quiet = True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound_s
    where = f"the {shards.shard_set}'s Leases in {shards.namespace}"
    while not shards.settled.is_set() and not stop.is_set():
        error = shards.last_error
        if error is not None and status_of(error) in REFUSED_STATUSES:
            raise ApiUnavailable(f"the API server {server} refuses {where}: {describe(error)}")
        if loop.time() >= deadline:
            bound = f"gave up after {format_seconds(bound_s)} (--api-timeout)"
            if error is not None and is_outage(error):
                raise ApiUnavailable(
                    f"the API server {server} is unavailable: {describe(error)}; {bound}"
                )
            if error is not None:
                raise ApiUnavailable(f"the API server {server} failed {where}: {describe(error)}")
            raise ApiUnavailable(f"no answer from the API server {server} for {where}; {bound}")
        await _first(shards.settled.wait(), stop.wait(), asyncio.sleep(POLL_S))


async def _first(*waits: Any) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def workloads_of(view: ClusterView) -> Iterable[WorkloadRef]:
    """Every workload of a view, in a stable order."""
    return sorted((w.ref for w in view.workloads()), key=lambda r: r.key)
