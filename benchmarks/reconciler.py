"""`make bench-reconciler`: the reconciler against kubesim at scale (issue 8 part 8).

kubesim runs in its own process (pinned to one CPU) with the cluster `benchmarks.startup`
generates — by default 25,000 Deployments, 35,000 running pods, 1,000 nodes and 1,000
policies — and, every second, the kubelet's part of every accepted resize
(`finish_resizes`). The reconciler runs
in a fresh process (pinned to the other CPU), wired as `kerf reconciler` wires it, and
reports for each phase its wall time, its own CPU seconds, the API calls it made and
the process's peak RSS at its end:

1. cold start: list and watch everything to a synced view;
2. first pass: every workload once, and everything it starts followed to the end
   (policy values published, recommendations and status written, pods resized in place);
3. steady pass: every workload again, with nothing left to change — target 0 writes
   (each workload decided again: its last pass had written);
4. resync pass: every workload again, nothing changed since (what the periodic resync
   costs in a steady cluster: passes find their inputs unchanged and decide nothing).

`--workloads 1000 --pods 2000` gives the convergence figure of the issue (1,000
workloads / 2,000 pods that each need an in-place resize): API calls per resized pod.

`--cluster real` runs the same phases against the real control plane instead
(`benchmarks.real_cluster`: devcluster with the cluster created through the API, its pods
made by the controller manager and brought Running by the node agent, which also finishes
the resizes); `--cluster both` runs kubesim, then the real one, and prints them side by
side. Each phase also reports the CPU the server's processes spent during it.
Nothing is asserted; the figures are printed and written as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from app.runtime import eventloop
from benchmarks.figures import Stalls, add_size_arguments, cpu_delta, peak_rss_mib
from benchmarks.startup import (
    CLUSTER_ARGS,
    bench_header,
    client_process,
    cluster_objects,
    cpu_split,
    process_cpu_seconds,
    run_each,
    seed,
    simulator_process,
)

WRITES = ("patch", "create", "update")
#: The reconciler is done with a phase once its queue has been idle this long.
QUIET_S = 3.0
#: A follow-up due later than this is not waited for (it is counted: `scheduled_later`).
FOLLOW_UP_S = 10.0
#: ... or once nothing has been written for this long and no workload waits for a worker.
WRITES_QUIET_S = 15.0
TARGET_STEADY_CPU_S = 1.0
TARGET_RSS_MIB = 450
TARGET_SYNC_S = 30.0
#: API calls per resized pod on the first pass: the resize, plus its share of one publish,
#: one record, one status write and one Event per workload (issue 33)
TARGET_CALLS_PER_RESIZED_POD = 3.0
TARGET_CPU_MS_PER_RESIZED_POD = 4.0


def serve(args: dict[str, Any], ready: Any, stop: Any) -> None:
    """The kubesim process: the generated cluster, a kubelet step every second."""
    from kubesim.sim import Simulator

    if args.get("cpus"):
        os.sched_setaffinity(0, args["cpus"])

    async def main() -> None:
        sim = Simulator(auto_settle=False)  # only the kubelet acts, on its own beat
        count = await seed(
            sim,
            from_templates(cluster_objects(**{key: args[key] for key in CLUSTER_ARGS})),
        )
        # As benchmarks.startup's simulator: unfrozen, a full collection of the seeded
        # cluster (3.4 GB at 140,000 pods) holds the simulator for seconds, every answer
        # with it, and the replicas' Lease renewals then come too late.
        gc.collect()
        gc.freeze()
        await sim.start()
        path = sim.write_kubeconfig(Path(args["directory"]) / "kubeconfig")
        ready.send((str(path), count))

        pods = sim.api.registry.get("", "v1", "pods").key
        _, changes = sim.store.subscribe(None, pods)

        async def kubelet() -> None:
            while True:
                await asyncio.sleep(1.0)
                changed = set()
                while not changes.queue.empty():
                    event = changes.queue.get_nowait()
                    if event is not None and event.type == "MODIFIED":
                        meta = event.obj["metadata"]
                        changed.add((meta["namespace"], meta["name"]))
                finish_resizes(sim, changed)

        beat = asyncio.create_task(kubelet())
        try:
            await asyncio.get_running_loop().run_in_executor(None, stop.wait)
        finally:
            beat.cancel()
            await sim.stop()

    asyncio.run(main())


def from_templates(objects: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The generated cluster with every pod running its ReplicaSet's template resources, as
    a ReplicaSet's pods do. (`benchmarks.explain` gives each pod values of its own: the second pod
    of a workload would ask for other values than the first and wait a cooldown, which is
    not the convergence the benchmark measures.) ReplicaSets come before their pods."""
    templates: dict[tuple[str, str], dict[str, Any]] = {}
    for obj in objects:
        meta = obj["metadata"]
        if obj["kind"] == "ReplicaSet":
            containers = obj["spec"]["template"]["spec"]["containers"]
            templates[(meta["namespace"], meta["name"])] = {
                c["name"]: c.get("resources") or {} for c in containers
            }
        elif obj["kind"] == "Pod":
            owner = (meta.get("ownerReferences") or [{}])[0].get("name")
            wanted = templates.get((meta["namespace"], owner)) or {}
            for entry in (*obj["spec"]["containers"], *obj["status"]["containerStatuses"]):
                resources = wanted.get(entry["name"])
                if resources is None:
                    continue
                entry["resources"] = orjson.loads(orjson.dumps(resources))
                if "allocatedResources" in entry:
                    entry["allocatedResources"] = dict(resources.get("requests") or {})
        yield obj


def finish_resizes(sim: Any, changed: Iterable[tuple[str, str]]) -> int:
    """The kubelet's part of an accepted resize, for every pod of `changed` (namespace,
    name: the pods modified since the last step) whose spec asks for other resources than
    it runs: the new values run. (kubesim's full kubelet step walks every pod's whole
    status — seconds at 35,000 pods, during which the simulator answers no request; the
    bench needs only this part of it, for the pods a write touched: a walk of every pod
    each second takes the simulator's whole CPU at 140,000.)"""
    from kubesim.store import clone

    rt = sim.api.registry.get("", "v1", "pods")
    finished = 0
    for namespace, name in changed:
        stored = sim.store.peek(rt.key, namespace, name)
        if stored is None:
            continue
        statuses = {s["name"]: s for s in stored.get("status", {}).get("containerStatuses") or []}
        wanted = {c["name"]: c.get("resources") or {} for c in stored["spec"]["containers"]}
        if all(statuses.get(n, {}).get("resources") == r for n, r in wanted.items()):
            continue
        pod = clone(stored)
        for entry in pod["status"].get("containerStatuses") or []:
            resources = wanted.get(entry["name"])
            if resources is not None:
                entry["resources"] = clone(resources)
                entry["allocatedResources"] = clone(resources.get("requests") or {})
        pod["status"]["conditions"] = [
            c
            for c in pod["status"].get("conditions") or []
            if c.get("type") not in ("PodResizePending", "PodResizeInProgress")
        ]
        sim.api.write_status(rt, pod)
        finished += 1
    return finished


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _calls(metrics: Any, by_resource: bool = False) -> dict[str, float]:
    """API calls so far by verb, or by "verb resource" (Lease traffic of the leader
    election left out)."""
    totals: dict[str, float] = {}
    for metric in metrics.api_calls.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels["resource"] != "leases":
                key = sample.labels["verb"]
                if by_resource:
                    key = f"{key} {sample.labels['resource']}"
                totals[key] = totals.get(key, 0) + sample.value
    return totals


def _by_label(counter: Any, *labels: str) -> dict[str, float]:
    """A counter's totals so far by its `labels` (joined with "/")."""
    totals: dict[str, float] = {}
    for metric in counter.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                key = "/".join(sample.labels[label] for label in labels)
                totals[key] = totals.get(key, 0) + sample.value
    return totals


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, int]:
    return {k: int(v - before.get(k, 0)) for k, v in after.items() if v - before.get(k, 0)}


class Quiet(NamedTuple):
    """How a phase ended: the quiet time waited (not part of its wall time), and on what."""

    seconds: float
    #: "quiet": the queue idle with every pod at its target; "no writes": the deadline
    ended_by: str
    #: the CPU of the bench's own checks (walks of every pod and workload of the view):
    #: not the reconciler's, so not part of the phase's CPU
    check_cpu_seconds: float = 0.0


async def _quiet(service: Any, complete: Any = None) -> Quiet:
    """Wait until every pod runs what its spec asks and the queue has been idle for
    QUIET_S, follow-ups due within FOLLOW_UP_S fired first. A resize still in flight keeps
    the phase open: the kubelet finishing it refills the queue (the workload's next pod).
    The deadline: nothing written for WRITES_QUIET_S with no workload waiting for a worker
    (a few workloads can poll a resize the kubelet never finishes, e.g. one deferred until
    `fallbackAfter`; a pass deciding every workload writes nothing for longer than that,
    and is not over while the queue holds work). Either end only once every workload of
    the view has been passed over and the view is `complete` (sharded: a bucket lost and
    claimed again is relisted, its workloads queued only when the relist is in, and
    dropped from the queue while it is not held: a quiet queue then is not the end).
    Later follow-ups are not waited for: the phase reports how many are left
    (`scheduled_later`)."""
    idle_since: float | None = None
    writes = _writes(service.metrics)
    wrote_at = time.perf_counter()
    checks = _Checks()
    while True:
        await asyncio.sleep(0.1)
        now = time.perf_counter()
        if _writes(service.metrics) != writes:
            writes, wrote_at = _writes(service.metrics), now
        elif (
            now - wrote_at >= WRITES_QUIET_S
            and not len(service.queue)
            and checks.run(_whole, service, complete)
        ):
            return Quiet(WRITES_QUIET_S, "no writes", checks.cpu_seconds)
        if not service.queue.idle or service.queue.scheduled_within(FOLLOW_UP_S):
            idle_since = None
            continue
        idle_since = idle_since or now
        if now - idle_since < QUIET_S:
            continue
        # read once per quiet period: walks of every pod and workload
        if not checks.run(resizing_pods, service.view) and checks.run(_whole, service, complete):
            return Quiet(QUIET_S, "quiet", checks.cpu_seconds)
        idle_since = None


class _Checks:
    """Runs the bench's checks of the view and counts their CPU (they run on the loop's
    thread, between the reconciler's callbacks)."""

    def __init__(self) -> None:
        self.cpu_seconds = 0.0

    def run(self, check: Callable[..., object], *args: Any) -> bool:
        started = time.thread_time()
        try:
            return bool(check(*args))
        finally:
            self.cpu_seconds += time.thread_time() - started


def _whole(service: Any, complete: Any) -> bool:
    """The view is complete and every workload of it was passed over: a phase may end."""
    return (complete is None or complete.is_set()) and _all_passed(service)


def _all_passed(service: Any) -> bool:
    """Every workload of the view has been passed over (it has a memory record: made by
    its first pass, dropped when its bucket is lost)."""
    memory = service.reconciler.memory
    with service.view.lock:
        return all(memory.peek(w.ref.key) is not None for w in service.view.workloads())


def resizing_pods(view: Any) -> int:
    """How many pods' specs ask for other resources than the kubelet reports they run."""
    from app.policy.podstate import resources_running

    with view.lock:
        return sum(1 for pod in view.pods() if not resources_running(pod))


def _writes(metrics: Any) -> float:
    return sum(v for k, v in _calls(metrics).items() if k in WRITES)


def _server_cpu(pids: Mapping[str, int]) -> dict[str, float]:
    spent = {name: process_cpu_seconds(pid) for name, pid in pids.items()}
    return {name: value for name, value in spent.items() if value is not None}


def measure(
    kubeconfig: str, cpus: set[int] | None, server_pids: Mapping[str, int], out: Any
) -> None:
    """The reconciler process: the four phases; `server_pids` names the processes serving
    the API, whose CPU each phase reports."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    from app.kube.informer import api_client_from_config
    from app.runtime.jsonlog import configure_logging

    configure_logging("warning")  # leadership changes and failed passes, on stderr
    from reconciler.execution import ExecutionConfig
    from reconciler.main import Options, build_service
    from reconciler.service import ServiceConfig

    options = Options(
        # A workload is decided afresh at least every `steady_horizon` (10 minutes); at
        # 25,000 workloads the first pass alone can last that long, and the later phases
        # would then measure that periodic re-decision instead of what they name.
        execution=ExecutionConfig(follow_s=0.5, steady_horizon=timedelta(hours=1)),
        service=ServiceConfig(workers=8, resync_s=1e9, queue_rate=1e6),
        # one replica, the single leader (`make bench-shards` measures the sharded ones)
        shards=1,
    )

    async def main() -> dict[str, Any]:
        async with await api_client_from_config(kubeconfig) as api_client:
            feed, service = build_service(
                api_client, options, namespace="kerf-system", identity="bench"
            )
            # One replica, which elects itself: every write passes the leader's fence
            # (reconciler.leader.write_fence), so a replica without a running elector
            # would withhold them all. Its Lease calls are left out of the counts.
            figures: dict[str, Any] = {}
            stalls = Stalls().start()
            cpu0, t0, server0 = _cpu(), time.perf_counter(), _server_cpu(server_pids)
            tasks = [asyncio.create_task(feed.run())]
            if service.leader is not None:
                tasks.append(asyncio.create_task(service.leader.run()))
            await feed.wait_synced()
            figures["cold_start"] = {
                "seconds": round(time.perf_counter() - t0, 2),
                "cpu_seconds": round(_cpu() - cpu0, 2),
                "peak_rss_mib": peak_rss_mib(),
                "server_cpu_seconds": cpu_delta(_server_cpu(server_pids), server0),
                **stalls.figures(),
            }
            if service.leader is not None:
                await service.leader.elected.wait()
            workers = [asyncio.create_task(service.work()) for _ in range(service.config.workers)]
            for name in ("first_pass", "steady_pass", "resync_pass"):
                calls0, cpu0, t0 = _calls(service.metrics), _cpu(), time.perf_counter()
                server0 = _server_cpu(server_pids)
                kinds0 = _calls(service.metrics, by_resource=True)
                events0 = _by_label(service.metrics.events, "reason")
                decisions0 = _by_label(service.metrics.decisions, "outcome", "reason")
                resized0 = service.metrics.resizes.labels("requested")._value.get()
                passes0 = service.passes
                unchanged0 = service.metrics.unchanged_passes._value.get()
                if name == "first_pass":
                    service.start_accepting()
                else:
                    service.enqueue_all()
                quiet = await _quiet(service)
                calls = _delta(_calls(service.metrics), calls0)
                resized = int(service.metrics.resizes.labels("requested")._value.get() - resized0)
                figures[name] = {
                    "seconds": round(time.perf_counter() - t0 - quiet.seconds, 2),
                    "ended_by": quiet.ended_by,
                    "cpu_seconds": round(_cpu() - cpu0 - quiet.check_cpu_seconds, 2),
                    "bench_check_cpu_seconds": round(quiet.check_cpu_seconds, 2),
                    "passes": service.passes - passes0,
                    "api_calls": calls,
                    "api_calls_by_resource": _delta(
                        _calls(service.metrics, by_resource=True), kinds0
                    ),
                    "writes": sum(v for k, v in calls.items() if k in WRITES),
                    "events_by_reason": _delta(
                        _by_label(service.metrics.events, "reason"), events0
                    ),
                    "decisions_by_reason": _delta(
                        _by_label(service.metrics.decisions, "outcome", "reason"), decisions0
                    ),
                    "resized_pods": resized,
                    "unchanged_passes": int(
                        service.metrics.unchanged_passes._value.get() - unchanged0
                    ),
                    "peak_rss_mib": peak_rss_mib(),
                    "scheduled_later": service.queue.scheduled,
                    # the quiet time waited included: the server worked on through it
                    "server_cpu_seconds": cpu_delta(_server_cpu(server_pids), server0),
                    **stalls.figures(),
                }
                if resized:
                    figures[name]["api_calls_per_resized_pod"] = round(
                        sum(calls.values()) / resized, 2
                    )
                    figures[name]["cpu_ms_per_resized_pod"] = round(
                        1000 * figures[name]["cpu_seconds"] / resized, 2
                    )
            figures["peak_rss_mib"] = peak_rss_mib()
            stalls.stop()
            service.queue.close()
            for task in (*tasks, *workers):
                task.cancel()
            await asyncio.gather(*tasks, *workers, return_exceptions=True)
            return figures

    out.send(eventloop.run(main()))  # the loop `kerf reconciler` runs on


def run_sim(args: argparse.Namespace) -> dict[str, Any]:
    """Start kubesim with the cluster, then one reconciler through the four phases."""
    sim_cpus, client_cpus = cpu_split()
    figures = {**bench_header(args), "cluster": "kubesim"}
    spec = {key: getattr(args, key) for key in CLUSTER_ARGS}
    with simulator_process(serve, spec, sim_cpus, timeout_s=900) as (sim, ready):
        kubeconfig, count = ready
        figures["cluster_objects"] = count
        result, sim_cpu = client_process(
            sim,
            measure,
            (kubeconfig, client_cpus, {"kubesim": sim.pid or 0}),
            timeout_s=args.timeout,
            what="the reconciler did not finish",
        )
        figures.update(result)
        if sim_cpu is not None:
            figures["kubesim_cpu_seconds"] = round(sim_cpu, 1)
    return _with_targets(figures)


def run_real(args: argparse.Namespace) -> dict[str, Any]:
    """Start devcluster, create the cluster through the API and wait until its pods run,
    then one reconciler through the four phases. The control plane runs on the CPU
    kubesim gets in `run_sim` (pinned once the set-up is done)."""
    from benchmarks.real_cluster import real_cluster

    server_cpus, client_cpus = cpu_split()
    figures = {**bench_header(args), "cluster": "real"}
    spec = {key: getattr(args, key) for key in CLUSTER_ARGS}
    with (
        tempfile.TemporaryDirectory(prefix="kerf-bench-") as tmp,
        real_cluster(spec, Path(tmp), server_cpus, bound_s=args.timeout) as cluster,
    ):
        figures["cluster_objects"] = cluster.objects
        figures["setup"] = cluster.setup
        before = cluster.cpu_seconds()
        result, _ = client_process(
            None,
            measure,
            (cluster.kubeconfig, client_cpus, cluster.pids),
            timeout_s=args.timeout,
            what="the reconciler did not finish",
        )
        figures.update(result)
        figures["control_plane_cpu_seconds"] = cpu_delta(cluster.cpu_seconds(), before)
    return _with_targets(figures)


def _with_targets(figures: dict[str, Any]) -> dict[str, Any]:
    """Each figure that has a target, beside it (`met`: within it)."""
    first = figures.get("first_pass") or {}
    steady = figures.get("steady_pass") or {}
    checked = {
        "cold_start_seconds": ((figures.get("cold_start") or {}).get("seconds"), TARGET_SYNC_S),
        "first_pass_api_calls_per_resized_pod": (
            first.get("api_calls_per_resized_pod"),
            TARGET_CALLS_PER_RESIZED_POD,
        ),
        "first_pass_cpu_ms_per_resized_pod": (
            first.get("cpu_ms_per_resized_pod"),
            TARGET_CPU_MS_PER_RESIZED_POD,
        ),
        "steady_pass_cpu_seconds": (steady.get("cpu_seconds"), TARGET_STEADY_CPU_S),
        "steady_pass_writes": (steady.get("writes"), 0),
        "peak_rss_mib": (figures.get("peak_rss_mib"), TARGET_RSS_MIB),
    }
    figures["targets"] = {
        name: {
            "value": value,
            "target": target,
            "met": value is not None and value <= target,
        }
        for name, (value, target) in checked.items()
    }
    return figures


#: (label, phase, figure) of the side-by-side table; phase None: a figure of the whole run.
_COMPARED = (
    ("cold start, wall s", "cold_start", "seconds"),
    ("cold start, reconciler CPU s", "cold_start", "cpu_seconds"),
    ("first pass, wall s", "first_pass", "seconds"),
    ("first pass, reconciler CPU s", "first_pass", "cpu_seconds"),
    ("first pass, server CPU s", "first_pass", "server_cpu_seconds"),
    ("first pass, resized pods", "first_pass", "resized_pods"),
    ("first pass, writes", "first_pass", "writes"),
    ("first pass, API calls per resized pod", "first_pass", "api_calls_per_resized_pod"),
    ("first pass, reconciler CPU ms per resized pod", "first_pass", "cpu_ms_per_resized_pod"),
    ("steady pass, reconciler CPU s", "steady_pass", "cpu_seconds"),
    ("steady pass, writes", "steady_pass", "writes"),
    ("resync pass, reconciler CPU s", "resync_pass", "cpu_seconds"),
    ("resync pass, writes", "resync_pass", "writes"),
    ("peak RSS MiB", None, "peak_rss_mib"),
)


def _figure(figures: Mapping[str, Any], phase: str | None, name: str) -> str:
    value = (figures.get(phase) or {}).get(name) if phase else figures.get(name)
    if isinstance(value, Mapping):
        value = value.get("total")
    return "—" if value is None else f"{value:,}"


def side_by_side(sim: Mapping[str, Any], real: Mapping[str, Any]) -> list[str]:
    """The main figures of a kubesim run and a real one as a text table."""
    width = max(len(label) for label, _, _ in _COMPARED)
    lines = [f"{'':{width}}  {'kubesim':>12}  {'real':>12}"]
    for label, phase, name in _COMPARED:
        lines.append(
            f"{label:{width}}  {_figure(sim, phase, name):>12}  {_figure(real, phase, name):>12}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the figures, write them as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reconciler", description=__doc__)
    add_size_arguments(parser)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument(
        "--cluster",
        choices=("sim", "real", "both"),
        default="sim",
        help="kubesim (default), the real control plane (devcluster), or both side by side",
    )
    parser.add_argument("--out", type=Path, default=Path(".bench/reconciler.json"))
    args = parser.parse_args(argv)
    from benchmarks.real_cluster import SetupError

    try:
        figures = run_each(
            args.cluster,
            {"sim": lambda: run_sim(args), "real": lambda: run_real(args)},
            args.out,
        )
    except (SetupError, RuntimeError) as exc:
        print(f"benchmarks.reconciler: {exc}", file=sys.stderr)
        return 1
    text = orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode()
    print(text)
    if args.cluster == "both":
        print("\n".join(side_by_side(figures["sim"], figures["real"])))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
