"""Running the recommender: once over YAML files (`--state-dir`), once over a cluster
(`--once`, no Lease), or as a service that analyses every `--interval` until stopped: the
leader of its replicas (`recommender.leadership`), or every replica with `--dry-run`, which
writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import aiohttp
from kubernetes_asyncio import client

from app.kube.apitimeout import DEFAULT_API_TIMEOUT_S
from app.kube.firstsync import first_sync, quiet_for_one_shot
from app.kube.informer import WEBHOOK_RESOURCES, ClusterFeed, Resource, api_client_from_config
from app.kube.leader import Fence
from app.kube.leadertimings import LeaderTimings
from app.kube.lease import holder_identity, own_namespace
from app.kube.shardleases import ShardLeases
from app.kube.shardview import ShardedFeed, ShardedView, ShardFilter
from app.kube.transport import ApiTransport
from app.model.shards import CLUSTER_BUCKET, DEFAULT_BUCKETS
from app.runtime import eventloop
from app.runtime.clock import utc_now
from app.runtime.health import health_app, serving
from app.store.statedir import load_view
from app.store.view import ClusterView
from recommender.analyze import Analysis, Settings, analyze, record
from recommender.configmaps import store
from recommender.defaults import DEFAULT_METRICS_PORT
from recommender.gpu import GpuOutcome, GpuReactor, check_interval_s
from recommender.leadership import SHARD_SET, run_leading, run_sharded
from recommender.metrics import RecommenderMetrics, recommender_metrics
from recommender.output import write_json, write_table
from recommender.prometheus import PrometheusApi

logger = logging.getLogger("kerf.recommender")


#: What the recommender reads from the cluster: workloads, the pods that name them and the
#: intermediate owners between (its ConfigMaps it reads itself, before each write), and the
#: proactive policies whose `recommender` blocks override its flags (app/recommend/policy.py).
_KINDS = frozenset(
    {"Pod", "ReplicaSet", "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Rollout"}
)
_POLICY_KINDS = frozenset(
    {
        "ProactivePolicy",
        "ClusterProactivePolicy",
        "PolicyEvaluation",
        # the GPU reactive evaluation (recommender/gpu.py): its policies, settings and the
        # status where it keeps each workload's baseline
        "GpuReactivePolicy",
        "ClusterGpuReactivePolicy",
        "GlobalConfiguration",
        "RightsizingRecommendation",
    }
)
RECOMMENDER_RESOURCES: tuple[Resource, ...] = (
    *(r for r in WEBHOOK_RESOURCES if r.kind in _KINDS),
    # Optional: without kerf's CRDs the recommender runs on its flags alone.
    *(replace(r, optional=True) for r in WEBHOOK_RESOURCES if r.kind in _POLICY_KINDS),
)
#: Sharded, the Namespaces too: the replicas share the buckets by the namespaces in them.
SHARDED_RESOURCES: tuple[Resource, ...] = (
    *(r for r in WEBHOOK_RESOURCES if r.kind == "Namespace"),
    *RECOMMENDER_RESOURCES,
)


@dataclass(frozen=True, slots=True)
class Options:
    """What `kerf recommend` was asked to do against a cluster."""

    prometheus: str
    settings: Settings = Settings()
    kubeconfig: Path | None = None
    once: bool = False
    dry_run: bool = False
    output: str = "table"
    interval_s: float = 3600.0
    now: datetime | None = None
    metrics_host: str = "0.0.0.0"
    metrics_port: int = DEFAULT_METRICS_PORT
    leader: LeaderTimings = LeaderTimings()
    #: buckets of the namespace hash (`app.model.shards`) the service's replicas share; 1: a
    #: single leader runs for every namespace (`--once` and `--dry-run` always do)
    shards: int = DEFAULT_BUCKETS
    #: how long `once` or `dry_run` waits for the API server before the first run
    #: (app/kube/firstsync.py); the service waits as long as it takes
    api_timeout_s: float = DEFAULT_API_TIMEOUT_S

    @property
    def first_sync_bound(self) -> float | None:
        """The bound on the first sync: a run by hand (`once`, `dry_run`) has one."""
        return self.api_timeout_s if self.once or self.dry_run else None


def print_analysis(
    analysis: Analysis, output: str, out: IO[str], gpu: Sequence[GpuOutcome] = ()
) -> int:
    """Print one run; 1 when Prometheus gave nothing to analyse (said on stderr too)."""
    if output == "json":
        write_json(analysis, out, gpu)
    else:
        write_table(analysis, out, gpu)
    if analysis.failure is not None:
        print(f"kerf recommend: {analysis.failure}: {analysis.failure_message}", file=sys.stderr)
        return 1
    return 0


async def run_state_dir(
    state_dir: Path, prometheus: str, settings: Settings, output: str, now: datetime | None
) -> int:
    """One run over the workloads and pods of YAML files; prints it, writes nothing."""
    view = load_view([state_dir])
    for warning in view.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    async with aiohttp.ClientSession() as session:
        api = PrometheusApi(session, prometheus)
        analysis = await analyze(view, api, settings, recommender_metrics(), now or utc_now())
    return print_analysis(analysis, output, sys.stdout)


async def run_one(
    view: ClusterView,
    api: PrometheusApi,
    api_client: client.ApiClient,
    options: Options,
    metrics: RecommenderMetrics,
    fence: Fence | None = None,
) -> Analysis:
    """One analysis of the cluster (sharded: of the view's buckets), recorded and stored
    (unless a dry run), each write through `fence` when one is given."""
    with metrics.run_seconds.time():
        analysis = await analyze(
            view,
            api,
            options.settings,
            metrics,
            options.now or utc_now(),
            own_namespaces=isinstance(view, ShardedView) and view.shard_filter is not None,
        )
        # `--once` prints the failure itself (print_analysis): said once, not logged too.
        record(analysis, metrics, log_failure=not options.once)
        await store(api_client, analysis, metrics, dry_run=options.dry_run, fence=fence)
    return analysis


async def _until(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def _synced_or_stopped(
    feed: ClusterFeed, stop: asyncio.Event, bound_s: float | None = None
) -> bool:
    """Wait for the view's first sync or for `stop`; True when synced. With `bound_s`
    the wait is bounded (`app.kube.firstsync`: ApiUnavailable)."""
    if bound_s is not None:
        return await first_sync(feed, bound_s, stop=stop) and not stop.is_set()
    waits = {asyncio.create_task(feed.wait_synced()), asyncio.create_task(stop.wait())}
    _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return not stop.is_set()


async def serve_cluster(options: Options, stop: asyncio.Event) -> int:
    """Sync the view, then one run (`once`), or runs every interval until `stop`: the
    leader's, or with `dry_run` every replica's (it writes nothing, so it elects no one)."""
    metrics = recommender_metrics()
    async with (
        await api_client_from_config(options.kubeconfig) as api_client,
        aiohttp.ClientSession() as session,
    ):
        if options.first_sync_bound is not None:
            quiet_for_one_shot(api_client)
        sharded = options.shards > 1 and not options.once and not options.dry_run
        shard_filter = ShardFilter(options.shards) if sharded else None
        view = ShardedView(shard_filter=shard_filter)
        feed = (
            ShardedFeed(api_client, view, SHARDED_RESOURCES)
            if sharded
            else ClusterFeed(api_client, view, RECOMMENDER_RESOURCES)
        )
        gained = asyncio.Event()
        shards: ShardLeases | None = None
        if shard_filter is not None and isinstance(feed, ShardedFeed):
            shards = _shard_leases(api_client, options, metrics, shard_filter, feed, gained, view)
        tasks: list[asyncio.Task[Any]] = []
        if shards is not None and isinstance(feed, ShardedFeed):
            # The Namespaces go first: the first claims weigh the buckets by them.
            weigher = feed.weigh()
            tasks.extend([weigher] if weigher is not None else [])
            tasks.append(asyncio.create_task(shards.run(), name="shards"))
        api = PrometheusApi(session, options.prometheus)
        reactor = GpuReactor(
            view, session, api_client, options.prometheus, dry_run=options.dry_run, metrics=metrics
        )
        try:
            if options.once:
                tasks.append(asyncio.create_task(feed.run(), name="feed"))
                if not await _synced_or_stopped(feed, stop, options.first_sync_bound):
                    return 0
                analysis = await run_one(view, api, api_client, options, metrics)
                gpu = await reactor.run(now=options.now)
                return print_analysis(analysis, options.output, sys.stdout, gpu)
            app = health_app(
                metrics.registry,
                ready=lambda: view.synced,
                reachable=lambda: feed.reachability.reachable,
            )
            async with serving(app, options.metrics_host, options.metrics_port):
                # Sharded, the view is listed with the buckets it starts with
                # (app/kube/shardview.py).
                if shards is not None and await _first_of(shards.settled.wait(), stop.wait()):
                    return 0
                tasks.append(asyncio.create_task(feed.run(), name="feed"))
                if not await _synced_or_stopped(feed, stop, options.first_sync_bound):
                    return 0
                if options.dry_run:
                    while not stop.is_set():
                        await run_one(view, api, api_client, options, metrics)
                        await reactor.run()
                        await _until(stop, options.interval_s)
                    return 0

                async def leading_run(fence: Fence) -> Analysis:
                    return await run_one(view, api, api_client, options, metrics, fence)

                if shards is not None and isinstance(feed, ShardedFeed):
                    await run_sharded(
                        shards,
                        leading_run,
                        metrics,
                        complete=feed.complete,
                        gained=gained,
                        interval_s=options.interval_s,
                        stop=stop,
                        also=[(reactor.run, lambda: check_interval_s(view))],
                    )
                    return 0
                await run_leading(
                    ApiTransport(api_client),
                    leading_run,
                    metrics,
                    namespace=own_namespace(),
                    identity=holder_identity(),
                    timings=options.leader,
                    interval_s=options.interval_s,
                    stop=stop,
                    also=[(reactor.run, lambda: check_interval_s(view))],
                )
            return 0
        finally:
            if shards is not None and stop.is_set():
                await shards.release()
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


def _shard_leases(
    api_client: client.ApiClient,
    options: Options,
    metrics: RecommenderMetrics,
    shard_filter: ShardFilter,
    feed: ShardedFeed,
    gained: asyncio.Event,
    view: ShardedView,
) -> ShardLeases:
    """The recommender's shard set: a change of the held buckets changes what the view
    keeps, lists the per-workload resources again and (gained) runs again."""

    def changed(more: frozenset[int], fewer: frozenset[int]) -> None:
        shard_filter.held = shards.held()
        metrics.leader.set(1 if shards.holds(CLUSTER_BUCKET) else 0)
        feed.relist()
        if more:
            gained.set()

    shards = ShardLeases(
        ApiTransport(api_client),
        own_namespace(),
        holder_identity(),
        shard_set=SHARD_SET,
        buckets=options.shards,
        held_gauge=metrics.buckets_held,
        rebalances=metrics.bucket_rebalances,
        mismatch_gauge=metrics.bucket_count_mismatch,
        logger=logging.getLogger("kerf.recommender.leader"),
        timings=options.leader,
        on_change=changed,
        namespaces=view.namespace_names,
        namespaces_gauge=metrics.bucket_namespaces_held,
        weighing=feed.weighing,
    )
    return shards


async def _first_of(*waits: Any) -> int:
    """Wait for the first of `waits`; its index (the others are cancelled)."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
    return min(tasks.index(task) for task in done)


def run_recommender(options: Options) -> int:
    """`kerf recommend` over a cluster: SIGTERM and SIGINT stop it between runs."""

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        return await serve_cluster(options, stop)

    return eventloop.run(main())
