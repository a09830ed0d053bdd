"""`make bench-shards`: the reconciler sharded over 1, 2 and 4 replicas on kubesim (issue 37
part 2).

For each replica count, kubesim serves a fresh generated cluster (`benchmarks.reconciler`'s:
by default 100,000 Deployments and 140,000 running pods, each pod asking for other
resources than its policy) in its own process, with the kubelet finishing every accepted
resize each second. The replicas run in processes of their own, each wired as `kerf
reconciler --shards 64` wires it, with an identity of its own. Each one syncs its view,
then they wait for one another until the shard Leases are at rest (every replica holds
its part of the namespaces, the buckets shared by weight: `app.model.shards`), and then
all start together:

1. first pass: every workload of its buckets once, followed to the end;
2. steady pass: every workload again, nothing left to change.

Per replica: peak RSS, cold start, first-pass wall and CPU, writes per resized pod, the
steady pass's CPU and writes. Per run: the first pass's wall (the last replica's end), and
the targets beside the figures: with 4 replicas each one's peak RSS and the first pass's
wall at most 35 % of the single replica's; the single replica within 1.5 GiB.

The replicas share the CPUs the simulator leaves them: on a machine with fewer cores than
replicas their wall times add up instead of overlapping, so each replica's CPU seconds are
reported too (the wall it would take with a core of its own is about its CPU seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson

from app.model.shards import bucket_of
from app.runtime import eventloop
from benchmarks.figures import Stalls, add_size_arguments, peak_rss_mib, write_figures
from benchmarks.reconciler import (
    WRITES,
    _by_label,
    _calls,
    _cpu,
    _delta,
    _quiet,
    resizing_pods,
    serve,
)
from benchmarks.startup import CLUSTER_ARGS, bench_header, cpu_split, simulator_process

BUCKETS = 64
REPLICAS = (1, 2, 4)
#: with 4 replicas, each one's peak RSS and the first pass's wall, as a share of one's
TARGET_SHARE = 0.35
TARGET_SINGLE_RSS_MIB = 1536
#: how long the replicas may take to share the buckets out (a bound, not an expectation)
SETTLE_S = 300.0


def _total(counter: Any) -> int:
    """A counter's total over all its labels."""
    return int(
        sum(
            sample.value
            for metric in counter.collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        )
    )


def replica(
    kubeconfig: str,
    identity: str,
    replicas: int,
    lease_s: float,
    cpus: set[int] | None,
    barrier: Any,
    out: Any,
) -> None:
    """One replica: sync, wait for the buckets to be shared out and for the others, then
    the passes."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    from app.kube.informer import api_client_from_config
    from app.runtime.jsonlog import configure_logging

    configure_logging("warning")
    from app.kube.leadertimings import LeaderTimings
    from app.kube.shardview import ShardedFeed
    from reconciler.execution import ExecutionConfig
    from reconciler.main import Options, build_service
    from reconciler.service import ServiceConfig

    options = Options(
        # as benchmarks.reconciler: no periodic re-decision inside a long first pass
        execution=ExecutionConfig(follow_s=0.5, steady_horizon=timedelta(hours=1)),
        service=ServiceConfig(workers=8, resync_s=1e9, queue_rate=1e6),
        leader=LeaderTimings.scaled(lease_s),
        shards=BUCKETS,
    )

    async def main() -> dict[str, Any]:
        async with await api_client_from_config(kubeconfig) as api_client:
            feed, service = build_service(
                api_client, options, namespace="kerf-system", identity=identity
            )
            shards = service.shards
            assert shards is not None and isinstance(feed, ShardedFeed)
            figures: dict[str, Any] = {"identity": identity}
            stalls = Stalls().start()
            cpu0, t0 = _cpu(), time.perf_counter()
            # As `kerf reconciler` starts: the Namespaces, the first claims weighed by
            # them, then the view listed with the buckets held
            # (reconciler.service.run_cluster).
            weigher = feed.weigh()
            tasks = [weigher] if weigher is not None else []
            tasks.append(asyncio.create_task(shards.run()))
            await shards.settled.wait()
            tasks.append(asyncio.create_task(feed.run()))
            await feed.wait_synced()
            figures["cold_start"] = {
                "seconds": round(time.perf_counter() - t0, 2),
                "cpu_seconds": round(_cpu() - cpu0, 2),
                "peak_rss_mib": peak_rss_mib(),
                **stalls.figures(),
            }
            deadline = time.monotonic() + SETTLE_S
            # at rest as weighed with every Namespace the view has, and listed for it
            while (
                shards.members != replicas
                or not shards.at_rest
                or sum(shards.occupancy.values()) != len(service.view.namespace_names())
                or not feed.complete.is_set()
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{identity}: the buckets did not settle ({shards.held()})")
                await asyncio.sleep(0.2)
            figures["buckets"] = sorted(shards.held())
            figures["workloads"] = len(list(service.view.workloads()))
            figures["bucket_occupancy"] = occupancy(
                (w.namespace for w in service.view.workloads()), BUCKETS
            )
            figures["settled_seconds"] = round(time.perf_counter() - t0, 2)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, barrier.wait)
            workers = [asyncio.create_task(service.work()) for _ in range(service.config.workers)]
            for name in ("first_pass", "steady_pass"):
                calls0, cpu0, t0 = _calls(service.metrics), _cpu(), time.perf_counter()
                resized0 = service.metrics.resizes.labels("requested")._value.get()
                passes0 = service.passes
                withheld0 = _total(service.metrics.writes_withheld)
                failures0 = _total(service.metrics.pass_failures)
                decisions0 = _by_label(service.metrics.decisions, "outcome", "reason")
                events0 = _by_label(service.metrics.events, "reason")
                if name == "first_pass":
                    service.start_accepting()
                else:
                    service.enqueue_all()
                quiet = await _quiet(service, feed.complete)
                seconds = time.perf_counter() - t0 - quiet.seconds
                calls = _delta(_calls(service.metrics), calls0)
                resized = int(service.metrics.resizes.labels("requested")._value.get() - resized0)
                writes = sum(v for k, v in calls.items() if k in WRITES)
                figures[name] = {
                    "seconds": round(seconds, 2),
                    "cpu_seconds": round(_cpu() - cpu0 - quiet.check_cpu_seconds, 2),
                    "bench_check_cpu_seconds": round(quiet.check_cpu_seconds, 2),
                    "passes": service.passes - passes0,
                    "writes": writes,
                    "resized_pods": resized,
                    "writes_withheld": _total(service.metrics.writes_withheld) - withheld0,
                    "pass_failures": _total(service.metrics.pass_failures) - failures0,
                    "ended_by": quiet.ended_by,
                    # a pod's decision in every pass over it, by outcome/reason
                    "decisions": _delta(
                        _by_label(service.metrics.decisions, "outcome", "reason"), decisions0
                    ),
                    "events": _delta(_by_label(service.metrics.events, "reason"), events0),
                    # what the phase left: follow-ups due later, pods not yet running their spec
                    "scheduled_later": service.queue.scheduled,
                    "pods_resizing": resizing_pods(service.view),
                    "peak_rss_mib": peak_rss_mib(),
                    **stalls.figures(),
                }
                if resized:
                    figures[name]["writes_per_resized_pod"] = round(writes / resized, 2)
                # the steady pass starts once every replica's first pass is over
                await loop.run_in_executor(None, barrier.wait)
            figures["buckets_at_end"] = len(shards.held())
            figures["peak_rss_mib"] = peak_rss_mib()
            stalls.stop()
            service.queue.close()
            for task in (*tasks, *workers):
                task.cancel()
            await asyncio.gather(*tasks, *workers, return_exceptions=True)
            return figures

    out.send(eventloop.run(main()))  # the loop `kerf reconciler` runs on


def occupancy(namespaces: Iterable[str], buckets: int) -> dict[str, dict[str, int]]:
    """Namespaces and workloads per occupied bucket, from each workload's namespace. The
    generated names `team-0`… differ only at their end, which moves few of the top bits
    of their FNV-1a hash: they fill a few of the buckets only (the hash is 1.36's
    `shardRange`'s, kept as it is), and the figures are read beside this skew."""
    per_bucket: dict[int, dict[str, int]] = {}
    seen: set[str] = set()
    for namespace in namespaces:
        entry = per_bucket.setdefault(
            bucket_of(namespace, buckets), {"namespaces": 0, "workloads": 0}
        )
        entry["workloads"] += 1
        if namespace not in seen:
            seen.add(namespace)
            entry["namespaces"] += 1
    return {f"{b:02d}": per_bucket[b] for b in sorted(per_bucket)}


def run_replicas(args: argparse.Namespace, replicas: int) -> dict[str, Any]:
    """kubesim with a fresh cluster, then `replicas` replicas through both passes."""
    sim_cpus, client_cpus = cpu_split()
    spec = {key: getattr(args, key) for key in CLUSTER_ARGS}
    context = multiprocessing.get_context("spawn")
    with simulator_process(serve, spec, sim_cpus, timeout_s=args.timeout) as (sim, ready):
        kubeconfig, count = ready
        barrier = context.Barrier(replicas)
        pipes, processes = [], []
        for index in range(replicas):
            recv, send = context.Pipe(duplex=False)
            process = context.Process(
                target=replica,
                args=(
                    kubeconfig,
                    f"bench-{index}",
                    replicas,
                    args.lease_duration,
                    client_cpus,
                    barrier,
                    send,
                ),
                name=f"kerf-bench-replica-{index}",
            )
            process.start()
            pipes.append(recv)
            processes.append(process)
        results = []
        deadline = time.monotonic() + args.timeout
        for recv, process in zip(pipes, processes, strict=True):
            if not recv.poll(max(0.0, deadline - time.monotonic())):
                for p in processes:
                    p.kill()
                raise RuntimeError(
                    f"{replicas} replicas did not finish within {args.timeout:.0f} s"
                )
            results.append(recv.recv())
            process.join(30)
    return _run_figures(replicas, count, results)


def _run_figures(replicas: int, objects: int, results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    first = [r["first_pass"] for r in results]
    steady = [r["steady_pass"] for r in results]
    resized = sum(f["resized_pods"] for f in first)
    writes = sum(f["writes"] for f in first)
    occupied: dict[str, dict[str, int]] = {}
    for result in results:
        occupied.update(result["bucket_occupancy"])
    return {
        "replicas": replicas,
        "cluster_objects": objects,
        "buckets_occupied": len(occupied),
        "bucket_occupancy": dict(sorted(occupied.items())),
        "per_replica_occupancy": [
            {
                "buckets_held": len(r["buckets"]),
                "buckets_occupied": len(r["bucket_occupancy"]),
                "namespaces": sum(b["namespaces"] for b in r["bucket_occupancy"].values()),
                "workloads": r["workloads"],
            }
            for r in results
        ],
        "first_pass": {
            "wall_seconds": max(f["seconds"] for f in first),
            "cpu_seconds_per_replica": [f["cpu_seconds"] for f in first],
            "cpu_seconds_max": max(f["cpu_seconds"] for f in first),
            "resized_pods": resized,
            "writes": writes,
            "writes_per_resized_pod": round(writes / resized, 2) if resized else None,
            "decisions": _summed(f["decisions"] for f in first),
            "events": _summed(f["events"] for f in first),
        },
        "steady_pass": {
            "wall_seconds": max(f["seconds"] for f in steady),
            "cpu_seconds_per_replica": [f["cpu_seconds"] for f in steady],
            "writes": sum(f["writes"] for f in steady),
        },
        "peak_rss_mib_per_replica": [r["peak_rss_mib"] for r in results],
        "peak_rss_mib_max": max(r["peak_rss_mib"] for r in results),
        "per_replica": list(results),
    }


def _summed(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    return dict(sorted(sum(map(Counter, counts), Counter()).items()))


def with_targets(figures: dict[str, Any]) -> dict[str, Any]:
    """The targets beside the figures (`met`: within), for the runs there are."""
    runs = {run["replicas"]: run for run in figures["runs"]}
    single, four = runs.get(1), runs.get(4)
    targets: dict[str, Any] = {}
    if single is not None:
        value = single["peak_rss_mib_max"]
        targets["single_peak_rss_mib"] = {
            "value": value,
            "target": TARGET_SINGLE_RSS_MIB,
            "met": value <= TARGET_SINGLE_RSS_MIB,
        }
    if single is not None and four is not None:
        rss = round(four["peak_rss_mib_max"] / single["peak_rss_mib_max"], 3)
        wall = round(four["first_pass"]["wall_seconds"] / single["first_pass"]["wall_seconds"], 3)
        cpu = round(
            four["first_pass"]["cpu_seconds_max"] / single["first_pass"]["cpu_seconds_max"], 3
        )
        targets["four_replicas_peak_rss_share"] = {
            "value": rss,
            "target": TARGET_SHARE,
            "met": rss <= TARGET_SHARE,
        }
        targets["four_replicas_first_pass_wall_share"] = {
            "value": wall,
            "target": TARGET_SHARE,
            "met": wall <= TARGET_SHARE,
        }
        # what the wall would be with a core per replica: the busiest replica's CPU
        targets["four_replicas_first_pass_cpu_share_busiest"] = {
            "value": cpu,
            "target": TARGET_SHARE,
            "met": cpu <= TARGET_SHARE,
        }
    figures["targets"] = targets
    return figures


def table(figures: dict[str, Any]) -> list[str]:
    """The main figures, a column per replica count."""
    runs = figures["runs"]
    rows = [
        ("workloads, per replica", lambda r: [x["workloads"] for x in r["per_replica"]]),
        (
            "namespaces, per replica",
            lambda r: [x["namespaces"] for x in r["per_replica_occupancy"]],
        ),
        (
            "occupied buckets, per replica",
            lambda r: [x["buckets_occupied"] for x in r["per_replica_occupancy"]],
        ),
        ("peak RSS MiB, max replica", lambda r: r["peak_rss_mib_max"]),
        ("peak RSS MiB, per replica", lambda r: r["peak_rss_mib_per_replica"]),
        ("first pass wall s", lambda r: r["first_pass"]["wall_seconds"]),
        ("first pass CPU s, per replica", lambda r: r["first_pass"]["cpu_seconds_per_replica"]),
        ("first pass resized pods", lambda r: r["first_pass"]["resized_pods"]),
        ("first pass writes per resized pod", lambda r: r["first_pass"]["writes_per_resized_pod"]),
        ("steady pass wall s", lambda r: r["steady_pass"]["wall_seconds"]),
        ("steady pass CPU s, per replica", lambda r: r["steady_pass"]["cpu_seconds_per_replica"]),
        ("steady pass writes", lambda r: r["steady_pass"]["writes"]),
    ]
    width = max(len(label) for label, _ in rows)
    lines = [f"{'replicas':{width}}  " + "  ".join(f"{r['replicas']:>24}" for r in runs)]
    for label, value in rows:
        lines.append(f"{label:{width}}  " + "  ".join(f"{value(r)!s:>24}" for r in runs))
    # the skew beside the figures: every run shares the same buckets out
    for run in runs[:1]:
        cells = (
            f"{b}: {o['namespaces']} ns / {o['workloads']} wl"
            for b, o in run["bucket_occupancy"].items()
        )
        lines.append(
            f"bucket occupancy ({run['buckets_occupied']} of {figures['buckets']} buckets "
            "hold workloads): " + ", ".join(cells)
        )
    for name, target in figures["targets"].items():
        met = "met" if target["met"] else "NOT met"
        lines.append(f"target {name}: {target['value']} (≤ {target['target']}) {met}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the bench for each replica count, print the figures, write them as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.shards", description=__doc__)
    add_size_arguments(parser, pods=140_000)
    parser.set_defaults(workloads=100_000)
    parser.add_argument(
        "--replicas",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=REPLICAS,
        help="the replica counts to run, comma-separated (default 1,2,4)",
    )
    parser.add_argument("--timeout", type=float, default=7200.0)
    parser.add_argument(
        "--lease-duration",
        type=float,
        default=15.0,
        help="the Leases' duration, client-go's proportions for the rest (default 15)",
    )
    parser.add_argument("--out", type=Path, default=Path(".bench/shards.json"))
    args = parser.parse_args(argv)
    if any(n < 1 or BUCKETS % n for n in args.replicas):
        print(f"benchmarks.shards: --replicas must divide {BUCKETS}", file=sys.stderr)
        return 2
    figures: dict[str, Any] = {**bench_header(args), "buckets": BUCKETS, "runs": []}
    try:
        for replicas in args.replicas:
            print(f"benchmarks.shards: {replicas} replica(s)", file=sys.stderr, flush=True)
            figures["runs"].append(run_replicas(args, replicas))
            write_figures(args.out, with_targets(figures))
    except RuntimeError as exc:
        print(f"benchmarks.shards: {exc}", file=sys.stderr)
        return 1
    print(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())
    print("\n".join(table(figures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
