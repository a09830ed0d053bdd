"""Running the reconciler: over a cluster (in-cluster config, else kubeconfig), with or
without writes (`--dry-run`), once or until stopped; or over YAML files (`--state-dir`),
printing what it would do."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

import orjson

from app.kube.apitimeout import DEFAULT_API_TIMEOUT_S
from app.kube.firstsync import quiet_for_one_shot
from app.kube.informer import ClusterFeed, api_client_from_config
from app.kube.kubexflags import DEFAULT_FLAG, KubexFlag, kubex_source
from app.kube.leader import LeaderElector, answer_check, write_fence
from app.kube.leadertimings import LeaderTimings
from app.kube.lease import (
    DEFAULT_NAMESPACE,
    WEBHOOK_LEASE,
    LeaseClient,
    holder_identity,
    own_namespace,
)
from app.kube.shardleases import ShardedReplicas, ShardLeases
from app.kube.shardview import ShardedFeed, ShardFilter
from app.model.shards import DEFAULT_BUCKETS
from app.runtime import eventloop
from app.runtime.clock import Clock, utc_now
from app.runtime.health import health_app, serving
from app.runtime.heap import freeze_page
from app.store.statedir import load_view
from app.store.view import ClusterView
from reconciler.api import ApiWriter, PodReader, Transport, Writer
from reconciler.defaults import DEFAULT_METRICS_PORT
from reconciler.dryrun import dry_pass, run_dry
from reconciler.execution import ExecutionConfig
from reconciler.metrics import RollbackStatesCollector, SavingsCollector, reconciler_metrics
from reconciler.plan import LeaseAge
from reconciler.policystatus import ROLLBACK_COUNTS
from reconciler.reconcile import WorkloadReconciler
from reconciler.service import (
    RECONCILER_RESOURCES,
    Reconciler,
    ServiceConfig,
    WatchedView,
    run_cluster,
)

logger = logging.getLogger("kerf.reconciler")

LEASE_NAME = "kerf-reconciler"
#: the shard set's name in its Leases (`app.model.shards`): one bucket is LEASE_NAME itself
SHARD_SET = "reconciler"

#: A successful read of the webhook Lease is reused this long (evictions are rate-limited
#: to about one a second; one read per eviction is plenty).
LEASE_CACHE_S = 5.0


@dataclass(frozen=True, slots=True)
class Options:
    """What `kerf reconciler` was asked to do."""

    kubeconfig: Path | None = None
    dry_run: bool = False
    once: bool = False
    metrics_host: str = "0.0.0.0"
    metrics_port: int = DEFAULT_METRICS_PORT
    execution: ExecutionConfig = ExecutionConfig()
    service: ServiceConfig = ServiceConfig()
    leader: LeaderTimings = LeaderTimings()
    #: buckets of the namespace hash (`app.model.shards`); 1: a single leader, as before sharding
    shards: int = DEFAULT_BUCKETS
    #: Kubex's recommendation ConfigMap (app/kube/kubexflags.py)
    kubex: KubexFlag = DEFAULT_FLAG
    #: how long `once` or `dry_run` waits for the API server before the first pass
    #: (app/kube/firstsync.py); the service waits as long as it takes
    api_timeout_s: float = DEFAULT_API_TIMEOUT_S

    @property
    def first_sync_bound(self) -> float | None:
        """The bound on the first sync: a one-shot run (`once`, `dry_run`) has one."""
        return self.api_timeout_s if self.once or self.dry_run else None


async def plan_state_dir(state_dir: Path, out: IO[str], *, kubex: KubexFlag = DEFAULT_FLAG) -> int:
    """One dry-run pass over the YAML files of `state_dir`: print what the reconciler would
    do (one JSON line each, then the summary), change nothing."""
    view = load_view([state_dir], kubex_source=kubex_source(kubex, DEFAULT_NAMESPACE))
    actions, tally = dry_pass(view, utc_now())
    for action in actions:
        out.write(orjson.dumps(action.fields(), default=str).decode() + "\n")
    summary = {"action": "summary", "message": tally.sentence(), **tally.fields()}
    out.write(orjson.dumps(summary).decode() + "\n")
    for warning in view.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def cached_lease(
    reader: LeaseClient,
    clock: Clock = utc_now,
    monotonic: Callable[[], float] = time.monotonic,
) -> LeaseAge:
    """`reader.renewed_at` with a short cache, kept by wall time and by the decision clock:
    a simulated clock that stands still still reads again, and one moved ahead (`make
    demo` skips minutes) does not judge the Lease by a read from before the move."""
    cache: list[tuple[float, datetime, datetime | None]] = []

    async def renewed_at() -> datetime | None:
        now, at = monotonic(), clock()
        if cache:
            read, read_at, value = cache[0]
            if now - read < LEASE_CACHE_S and at - read_at < timedelta(seconds=LEASE_CACHE_S):
                return value
        value = await reader.renewed_at()
        cache[:] = [(now, at, value)]
        return value

    return renewed_at


def build_service(
    api_client: Any,
    options: Options,
    *,
    namespace: str,
    identity: str,
    clock: Clock = utc_now,
) -> tuple[ClusterFeed, Reconciler]:
    """The feed and the service over one API client, wired as in production."""
    metrics = reconciler_metrics()
    transport = Transport(api_client, metrics)
    holder: list[Reconciler] = []
    leader_log = logging.getLogger("kerf.reconciler.leader")
    leader: LeaderElector | None = None
    shards: ShardLeases | None = None
    shard_filter: ShardFilter | None = None
    cluster_writer: Writer | None = None
    if options.shards == 1:
        leader = LeaderElector(
            transport,
            namespace,
            identity,
            name=LEASE_NAME,
            logger=leader_log,
            timings=options.leader,
            on_change=lambda leading: holder[0].on_leadership(leading),
            # `--shards` lowered to 1 in a rolling update: not while sharded replicas write
            may_acquire=ShardedReplicas(
                transport,
                namespace,
                identity,
                shard_set=SHARD_SET,
                mismatch_gauge=metrics.bucket_count_mismatch,
                logger=leader_log,
            ).absent,
        )
        writer = ApiWriter(
            transport,
            fence=write_fence(leader, metrics.writes_withheld),
            answered=answer_check(leader, metrics.writes_outlived, leader_log),
        )
    else:
        shard_filter = ShardFilter(options.shards)
        shards = ShardLeases(
            transport,
            namespace,
            identity,
            shard_set=SHARD_SET,
            buckets=options.shards,
            held_gauge=metrics.buckets_held,
            rebalances=metrics.bucket_rebalances,
            mismatch_gauge=metrics.bucket_count_mismatch,
            logger=leader_log,
            timings=options.leader,
            on_change=lambda gained, lost: holder[0].on_buckets(gained, lost),
            namespaces=lambda: holder[0].view.namespace_names(),
            namespaces_gauge=metrics.bucket_namespaces_held,
            # the ClusterRollbackPolicies' counters of each bucket (reconciler/policystatus.py)
            note=ROLLBACK_COUNTS,
        )
        fence, answered = shards.writes(
            metrics.writes_withheld, metrics.writes_outlived, leader_log
        )
        writer = ApiWriter(transport, fence=fence, answered=answered)
        fence, answered = shards.writes(
            metrics.writes_withheld, metrics.writes_outlived, leader_log, cluster=True
        )
        cluster_writer = ApiWriter(transport, fence=fence, answered=answered)
    view = WatchedView(
        lambda ref: holder[0].on_change(ref),
        lambda: holder[0].on_input(),
        own_namespace=namespace,
        kubex_source=kubex_source(options.kubex, namespace),
        shard_filter=shard_filter,
    )
    metrics.registry.register(SavingsCollector(view, clock))
    metrics.registry.register(RollbackStatesCollector(view))
    execution = options.execution
    if options.once:
        # One pass per workload and exit: a rollout is not followed to its end, so each
        # pass reports what it did.
        execution = replace(execution, pending_after=timedelta(0))
    reconciler = WorkloadReconciler(
        view,
        writer,
        metrics,
        webhook_lease=cached_lease(LeaseClient(transport, namespace, WEBHOOK_LEASE), clock),
        read_pod=PodReader(transport).get,
        clock=clock,
        config=execution,
    )
    # The initial lists freeze what they load as they go (app.runtime.heap); the service freezes
    # the whole view once it is synced (start_accepting).
    feed = (ShardedFeed if shards is not None else ClusterFeed)(
        api_client, view, RECONCILER_RESOURCES, on_initial_page=freeze_page
    )
    service = Reconciler(
        view,
        reconciler,
        metrics,
        config=options.service,
        leader=leader,
        shards=shards,
        cluster_writer=cluster_writer,
        relist=feed.relist if isinstance(feed, ShardedFeed) else None,
    )
    holder.append(service)
    if isinstance(feed, ShardedFeed):
        feed.on_relisted = service.on_relisted
    if shards is not None and isinstance(feed, ShardedFeed):
        shards.weighing = feed.weighing
    return feed, service


async def serve_cluster(options: Options, stop: asyncio.Event) -> int:
    """The service over the cluster until `stop` (or one pass with `once`), with its
    health and metrics endpoint."""
    async with await api_client_from_config(options.kubeconfig) as api_client:
        if options.first_sync_bound is not None:
            quiet_for_one_shot(api_client)
        if options.dry_run:
            return await _serve_dry_run(api_client, options, stop)
        feed, service = build_service(
            api_client, options, namespace=own_namespace(), identity=holder_identity()
        )
        app = health_app(
            service.metrics.registry,
            ready=lambda: service.view.synced,
            alive=lambda: not stop.is_set(),
            reachable=lambda: feed.reachability.reachable,
        )
        async with serving(app, options.metrics_host, options.metrics_port):
            return await run_cluster(
                feed,
                service,
                stop=stop,
                once=options.once,
                api_timeout_s=options.first_sync_bound,
            )


async def _serve_dry_run(api_client: Any, options: Options, stop: asyncio.Event) -> int:
    """A dry run: the view, its health and metrics endpoint, and a pass that writes nothing
    once synced, then every resync interval (no leader election: it never writes)."""
    metrics = reconciler_metrics()
    namespace = own_namespace()
    view = ClusterView(own_namespace=namespace, kubex_source=kubex_source(options.kubex, namespace))
    feed = ClusterFeed(api_client, view, RECONCILER_RESOURCES, on_initial_page=freeze_page)
    app = health_app(
        metrics.registry,
        ready=lambda: view.synced,
        alive=lambda: not stop.is_set(),
        reachable=lambda: feed.reachability.reachable,
    )
    async with serving(app, options.metrics_host, options.metrics_port):
        return await run_dry(
            feed,
            view,
            stop=stop,
            once=options.once,
            interval_s=options.service.resync_s,
            clock=utc_now,
            metrics=metrics,
            api_timeout_s=options.first_sync_bound,
        )


def run_reconciler(options: Options) -> int:
    """`kerf reconciler` over a cluster: SIGTERM and SIGINT stop it gracefully."""

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        return await serve_cluster(options, stop)

    return eventloop.run(main())
