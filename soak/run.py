"""One soak: set the cluster up, run the chaos, let kerf converge, check and print."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from app.model.shards import at_rest, bucket_weights
from soak import checks
from soak.chaos import Chaos, Timeline
from soak.cluster import Cluster, start_cluster, stop_cluster
from soak.observe import PODS, Observer, is_healthy
from soak.workloads import NAMESPACE, PHASE_B, WORKLOADS, Values, workload_of_pod

KERF_CONTROLLER = "rightsizing.kubex.ai/kerf-reconciler"
#: how many bucket Leases a replica says it holds
BUCKETS_HELD = "kerf_reconciler_buckets_held"
#: how long kerf may take to converge once the chaos ends (a bound, not an expectation)
CONVERGE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Options:
    """What `python -m soak` was asked for."""

    seed: int
    duration_s: float
    workdir: Path | None
    #: the reconcilers' buckets (1: one leader and a follower, as before sharding)
    shards: int = 1


def expected_values() -> dict[str, Values]:
    """Each workload's policy values at the end (phase B)."""
    return {w.name: w.values(PHASE_B) for w in WORKLOADS}


def _records(cluster: Cluster) -> dict[str, dict[str, Any]]:
    api = cluster.sim.api
    rt = api.resource("rightsizing.kubex.ai", "v1alpha1", "rightsizingrecommendations")
    found = api.list(rt, NAMESPACE)["items"]
    return {r["metadata"]["name"].removeprefix("deployment-"): r.get("status") or {} for r in found}


def _kerf_events(cluster: Cluster) -> list[dict[str, Any]]:
    api = cluster.sim.api
    items = api.list(api.resource("events.k8s.io", "v1", "events"), NAMESPACE)["items"]
    return [e for e in items if e.get("reportingController") == KERF_CONTROLLER]


async def _leaders(cluster: Cluster) -> dict[str, bool | None]:
    answers = await asyncio.gather(*(r.is_leader(cluster.session) for r in cluster.reconcilers))
    return {r.name: a for r, a in zip(cluster.reconcilers, answers, strict=True)}


async def _held(cluster: Cluster) -> dict[str, float | None]:
    answers = await asyncio.gather(
        *(r.gauge(cluster.session, BUCKETS_HELD) for r in cluster.reconcilers)
    )
    return {r.name: a for r, a in zip(cluster.reconcilers, answers, strict=True)}


async def _ownership(cluster: Cluster) -> checks.Check:
    """One leader, or sharded every bucket held once, shared out by weight."""
    if cluster.shards == 1:
        return checks.one_leader(cluster.lease_holder(), await _leaders(cluster))
    holders = {lease: cluster.holder(lease) for lease in cluster.bucket_leases()}
    held = await _held(cluster)
    names = (ns["metadata"]["name"] for ns in cluster.sim.store.list(("", "namespaces")))
    by_bucket = {int(lease.rsplit("-", 1)[1]): h for lease, h in holders.items() if h}
    rest = at_rest(by_bucket, bucket_weights(names, cluster.shards), held, cluster.shards)
    return checks.buckets_held(holders, held, rest)


def _whole(cluster: Cluster) -> bool:
    pods = cluster.sim.store.list(PODS, NAMESPACE)
    healthy = Counter(workload_of_pod(p["metadata"]["name"]) for p in pods if is_healthy(p))
    return all(healthy[w.name] == w.replicas for w in WORKLOADS) and len(pods) == sum(
        w.replicas for w in WORKLOADS
    )


async def _converged(cluster: Cluster) -> bool:
    """Every Deployment whole, every policed pod settled, one leader (every bucket held)."""
    if not _whole(cluster):
        return False
    statuses = _records(cluster)
    if any(s.get("phase") == "Pending" for s in statuses.values()):
        return False
    pods = cluster.sim.store.list(PODS, NAMESPACE)
    if not checks.policed_pods(pods, expected_values(), statuses).ok:
        return False
    return (await _ownership(cluster)).ok


async def _converge(cluster: Cluster, timeline: Timeline) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CONVERGE_TIMEOUT_S
    while not await _converged(cluster):
        if loop.time() > deadline:
            timeline.note("unsettled", f"not converged {CONVERGE_TIMEOUT_S:.0f}s after the chaos")
            return
        await asyncio.sleep(1.0)
    owned = "one leader" if cluster.shards == 1 else "every bucket held"
    timeline.note("converged", f"converged: Deployments whole, statuses settled, {owned}")


async def _verdicts(cluster: Cluster, observer: Observer) -> list[checks.Check]:
    pods = cluster.sim.store.list(PODS, NAMESPACE)
    seen = observer.seen
    logs = {p.name: p.log_text() for p in cluster.processes}
    logs["kubesim and the soak"] = cluster.log.read_text() if cluster.log.exists() else ""
    return [
        checks.policed_pods(pods, expected_values(), _records(cluster)),
        checks.requests_within_limits(pods, seen.over_limit),
        checks.events_per_change(seen.changes, seen.evictions, _kerf_events(cluster)),
        checks.writes_by_leader(
            cluster.sim.writes.entries,
            cluster.tokens,
            cluster.lease_of,
            cluster_lease=cluster.lease_of(""),
        ),
        checks.evictions_within_budgets(seen.evictions, seen.pdb_breaks, seen.pod_deletes),
        await _ownership(cluster),
        checks.no_tracebacks(logs),
    ]


def _report(options: Options, cluster: Cluster, chaos: Chaos, verdicts: list[checks.Check]) -> None:
    writes = cluster.sim.writes.entries
    by_kerf = [w for w in writes if w.user in cluster.tokens]
    counts = chaos.timeline.counts
    sharded = f", {options.shards} buckets over 3 replicas" if options.shards > 1 else ""
    print(f"\nsoak figures (seed {options.seed}, {options.duration_s:.0f}s of chaos{sharded})")
    print(
        f"  chaos: {counts['kill']} kills, {counts['stop']} stops of the workloads' writer, "
        f"{sum(v for k, v in counts.items() if k.startswith('fault-'))} fault windows, "
        f"{counts['delete-pod']} pods deleted, {counts['scale']} scalings"
    )
    fired = ", ".join(f"{k}: {v}" for k, v in sorted(chaos.fired.items()))
    print(f"  faults fired: {fired or 'none'}")
    print(
        f"  writes carried out: {len(writes)} ({len(by_kerf)} by the reconcilers, "
        f"{sum(1 for w in writes if w.answer_lost)} with the answer lost)"
    )
    print(f"  restarts: {', '.join(f'{p.name} {p.starts - 1}' for p in cluster.processes)}")
    for verdict in verdicts:
        print(f"  {'PASS' if verdict.ok else 'FAIL'} {verdict.name}: {verdict.figures}")
        for line in verdict.problems[: checks.SHOWN]:
            print(f"         {line}")
        if len(verdict.problems) > checks.SHOWN:
            print(f"         … and {len(verdict.problems) - checks.SHOWN} more")
    print(f"  logs in {cluster.workdir}; replay the schedule with --seed {options.seed}")


def _keep(cluster: Cluster, observer: Observer) -> None:
    """What the checks read, into the work directory, for whoever looks into a failure."""
    workdir = cluster.workdir
    with open(workdir / "writes.jsonl", "w") as out:
        for write in cluster.sim.writes.entries:
            out.write(json.dumps(dataclasses.asdict(write)) + "\n")
    changes = {k: sorted(v) for k, v in observer.seen.changes.items()}
    (workdir / "changes.json").write_text(json.dumps(changes, indent=1))
    (workdir / "events.json").write_text(json.dumps(_kerf_events(cluster), indent=1))
    (workdir / "records.json").write_text(json.dumps(_records(cluster), indent=1))


async def soak(options: Options) -> int:
    """Run the soak; 0 when every check holds, 1 when one fails."""
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="kerf-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"soak: seed {options.seed}, {options.duration_s:.0f}s of chaos, logs in {workdir}")
    rng = random.Random(options.seed)
    async with aiohttp.ClientSession() as session:
        cluster = await start_cluster(workdir, options.seed, session, options.shards)
        containers = {w.name: w.containers for w in WORKLOADS}
        observer = Observer(cluster.sim.store, cluster.tokens, containers)
        try:
            observer.start()
            cluster.sim.writes.listeners.append(observer.on_write)
            cluster.sim.writes.enabled = True
            timeline = Timeline()
            print("soak: chaos", flush=True)
            chaos = Chaos(cluster, rng, options.duration_s, timeline)
            await chaos.run()
            await _converge(cluster, timeline)
            verdicts = await _verdicts(cluster, observer)
            _keep(cluster, observer)
            _report(options, cluster, chaos, verdicts)
        finally:
            observer.close()
            await stop_cluster(cluster)
    return 0 if all(v.ok for v in verdicts) else 1
