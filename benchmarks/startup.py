"""`make bench`: cold start from a cluster to a synced view (issue 10 part 4).

kubesim, in its own process pinned to one CPU, serves the generated cluster of
`benchmarks.explain.generate` — 25,000 Deployments with their ReplicaSets, 35,000 running pods,
1,000 nodes, 250 namespaces, 1,000 policies and the recommendations ConfigMap — with the
fields a real API server and kubelet fill in, so list responses are as large as a real
cluster's. A fresh interpreter, pinned to the other CPU, then does what `kerf webhook`
does without `--state-dir`: a `ClusterFeed` over `WEBHOOK_RESOURCES` lists and watches
every resource until the view is synced, then the heap is frozen (`app.runtime.heap`).

Reported: wall time from the first list to the synced view (the final freeze included,
and also shown alone), CPU seconds and
peak RSS of the client process, and how long each resource's initial list took. Nothing
is asserted: the figures are for people and for comparing runs.

`--cluster real` serves the cluster from the real control plane instead
(`benchmarks.real_cluster`: created through the API, the pods made by the controller manager
and run by devcluster's node agent), and reports the CPU each of its processes spent
serving the cold start; `--cluster both` runs kubesim, then the real one.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import platform
import resource
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import orjson
import yaml

from benchmarks.figures import add_size_arguments, cpu_delta, write_figures

REPO = Path(__file__).resolve().parent.parent
CRD_DIR = REPO / "manifests" / "crds"
POD_TEMPLATE = REPO / "examples" / "admission" / "replicaset-pod.json"
STAMP = "2026-11-20T08:00:00Z"
TARGET_SYNC_S = 30.0


# ---------------------------------------------------------------------------- the cluster


def _clone(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def _meta(meta: Mapping[str, Any], index: int) -> dict[str, Any]:
    """Metadata as the API server returns it: uid, creation time (resourceVersion is
    stamped by the store)."""
    return {
        **meta,
        "uid": str(uuid.UUID(int=index + 1, version=4)),
        "creationTimestamp": STAMP,
    }


def _pod(pod: Mapping[str, Any], template: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A generated pod with what the API server defaults and the kubelet reports."""
    spec = _clone(template["spec"])
    mount = spec["containers"][0]["volumeMounts"]
    containers = []
    for container in pod["spec"]["containers"]:
        filled = _clone(template["spec"]["containers"][0])
        filled.update(_clone(container))
        filled["volumeMounts"] = _clone(mount)
        containers.append(filled)
    spec.update(containers=containers, nodeName=pod["spec"]["nodeName"])
    meta = _meta(pod["metadata"], index)
    for owner in meta["ownerReferences"]:
        owner["uid"] = str(uuid.UUID(int=10**9 + index, version=4))
        owner["blockOwnerDeletion"] = True
    ready = {"status": "True", "lastProbeTime": None, "lastTransitionTime": STAMP}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": kind, **ready}
                for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
            ]
            + [{"type": "PodScheduled", **ready}],
            "hostIP": f"10.0.{index % 250}.{index % 200 + 1}",
            "podIP": f"10.244.{index % 250}.{index % 240 + 2}",
            "podIPs": [{"ip": f"10.244.{index % 250}.{index % 240 + 2}"}],
            "startTime": STAMP,
            "qosClass": "Burstable",
            "containerStatuses": [
                {
                    "name": c["name"],
                    "state": {"running": {"startedAt": STAMP}},
                    "lastState": {},
                    "ready": True,
                    "restartCount": 0,
                    "image": c["image"],
                    "imageID": f"docker.io/{c['image']}@sha256:{index:064x}",
                    "containerID": f"containerd://{index:064x}",
                    "started": True,
                    "allocatedResources": c["resources"].get("requests", {}),
                    "resources": c["resources"],
                }
                for c in containers
            ],
        },
    }


def _replica_set(deployment: Mapping[str, Any], index: int) -> dict[str, Any]:
    meta = deployment["metadata"]
    template = _clone(deployment["spec"]["template"])
    template["metadata"]["labels"]["pod-template-hash"] = "5d8f7"
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": _meta(
            {
                "name": f"{meta['name']}-5d8f7",
                "namespace": meta["namespace"],
                "labels": template["metadata"]["labels"],
                "annotations": {"deployment.kubernetes.io/revision": "1"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": meta["name"],
                        "uid": str(uuid.UUID(int=index + 1, version=4)),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            10**9 + index,
        ),
        "spec": {
            "replicas": deployment["spec"]["replicas"],
            "selector": {"matchLabels": template["metadata"]["labels"]},
            "template": template,
        },
        "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2},
    }


def cluster_objects(
    *, workloads: int, pods: int, nodes: int, policies: int, namespaces: int
) -> Iterator[dict[str, Any]]:
    """The objects of the generated cluster as an API server stores them."""
    from benchmarks.explain import wall_clock_documents

    template = orjson.loads(POD_TEMPLATE.read_bytes())["request"]["object"]
    # kerf's own namespace: the webhook renews its Lease there
    yield {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta({"name": "kerf-system"}, 0)}
    index = 0
    for obj in wall_clock_documents(
        workloads=workloads, pods=pods, nodes=nodes, policies=policies, namespaces=namespaces
    ):
        index += 1
        kind = obj["kind"]
        if kind == "Pod":
            yield _pod(obj, template, index)
            continue
        obj = {**obj, "metadata": _meta(obj["metadata"], index)}
        if kind == "Deployment":
            labels = obj["spec"]["template"]["metadata"]["labels"]
            obj["spec"] = {**obj["spec"], "selector": {"matchLabels": dict(labels)}}
            obj["status"] = {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}
            yield obj
            yield _replica_set(obj, index)
        else:
            yield obj


async def seed(sim: Any, objects: Iterator[dict[str, Any]]) -> int:
    """Store `objects` in the simulator as a running cluster's etcd holds them; returns
    how many.

    The kerf CRDs are created through the API (they register the custom resources);
    the bulk is restored straight into the store, one kind at a time.
    """
    from kubesim.defaults import validate_object

    crds = sim.api.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    for path in sorted(CRD_DIR.glob("rightsizing.kubex.ai_*.yaml")):
        await sim.api.create(crds, "", yaml.load(path.read_text(), Loader=yaml.CSafeLoader))
    by_kind: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault((obj["apiVersion"], obj["kind"]), []).append(obj)
    count = 0
    for (api_version, kind), items in by_kind.items():
        group, _, version = api_version.rpartition("/")
        resource = sim.api.registry.by_kind(group, version, kind)
        if kind == "ConfigMap":  # the one generated kind a size limit applies to
            for item in items:
                if causes := validate_object(resource.plural, group, item):
                    name = item["metadata"]["name"]
                    raise ValueError(
                        f"ConfigMap {name}: the API server refuses it: {causes[0].message}"
                    )
        count += sim.store.restore(resource.key, items)
    return count


def serve_cluster(args: Mapping[str, Any], ready: Any, stop: Any) -> None:
    """The kubesim process: seed the cluster, serve it until `stop` is set.

    Sends (url, kubeconfig path, objects, seconds) on `ready` once serving.
    """
    from kubesim.sim import Simulator

    if args.get("cpus"):
        os.sched_setaffinity(0, args["cpus"])

    async def main() -> None:
        # No settling: the controllers would otherwise reconcile the whole cluster on the
        # first write (the webhook's Lease) while the benchmark measures.
        sim = Simulator(auto_settle=False)
        started = time.perf_counter()
        count = await seed(
            sim,
            cluster_objects(**{key: args[key] for key in CLUSTER_ARGS}),
        )
        seeded_s = time.perf_counter() - started
        gc.collect()
        gc.freeze()  # what kubesim holds lives until the end: keep collections short
        await sim.start()
        path = sim.write_kubeconfig(Path(args["directory"]) / "kubeconfig")
        ready.send((sim.url, str(path), count, round(seeded_s, 1)))
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, stop.wait)
        finally:
            await sim.stop()

    asyncio.run(main())


# ---------------------------------------------------------------------------- the client


def measure_sync(kubeconfig: str, page_size: int | None, out: Any) -> None:
    """The client process: list and watch into a view until synced, freeze, report."""
    from app.kube.informer import WEBHOOK_RESOURCES, ClusterFeed, api_client_from_config
    from app.runtime.heap import freeze_loaded_state, freeze_page
    from app.store.view import ClusterView

    usage_start = resource.getrusage(resource.RUSAGE_SELF)

    async def main() -> dict[str, Any]:
        async with await api_client_from_config(kubeconfig) as api_client:
            view = ClusterView()
            options = {} if page_size is None else {"page_size": page_size}
            freeze_s: list[float] = []

            def freeze() -> None:
                t0 = time.perf_counter()
                freeze_loaded_state()
                freeze_s.append(time.perf_counter() - t0)

            # As the webhook's serve_cluster wires it.
            feed = ClusterFeed(
                api_client,
                view,
                WEBHOOK_RESOURCES,
                on_synced=freeze,
                on_initial_page=freeze_page,
                **options,
            )
            started = time.perf_counter()
            task = asyncio.create_task(feed.run())
            await feed.wait_synced()  # on_synced (the final freeze) has run by now
            synced_s = time.perf_counter() - started
            usage = resource.getrusage(resource.RUSAGE_SELF)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            # What one full collection costs a request that triggers it: with the view
            # frozen, then with it handed back to the collector (CPU time, not wall).
            full_ms = {}
            for state in ("frozen", "unfrozen"):
                if state == "unfrozen":
                    gc.unfreeze()
                t0 = time.process_time()
                gc.collect()
                full_ms[state] = round((time.process_time() - t0) * 1000, 1)
            return {
                "sync_seconds": round(synced_s, 2),
                "cpu_seconds": round(
                    usage.ru_utime - usage_start.ru_utime + usage.ru_stime - usage_start.ru_stime,
                    2,
                ),
                "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # KiB on Linux
                "final_freeze_seconds": round(freeze_s[0], 3),
                "full_collection_cpu_ms": full_ms,
                "view_pods": sum(1 for _ in view.pods()),
                "view_workloads": sum(1 for _ in view.workloads()),
                "list_seconds": {
                    i.resource.kind: round(i.list_seconds or 0.0, 2) for i in feed.informers
                },
            }

    out.send(asyncio.run(main()))


# ---------------------------------------------------------------------------- the run


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of another process so far (Linux /proc; else None)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # after the command name: state is field 3, utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_split() -> tuple[set[int] | None, set[int] | None]:
    """(kubesim's CPUs, the client's CPUs); None when there is one CPU to share."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None, None
    if len(cpus) < 2:
        return None, None
    return set(cpus[1:]), {cpus[0]}


# The arguments of the generated cluster (`cluster_objects`), as the benches' flags name them.
CLUSTER_ARGS = ("workloads", "pods", "nodes", "policies", "namespaces")


@contextmanager
def simulator_process(
    serve: Callable[[dict[str, Any], Any, Any], None],
    spec: Mapping[str, Any],
    cpus: set[int] | None,
    *,
    timeout_s: float,
) -> Iterator[tuple[BaseProcess, Any]]:
    """kubesim serving a generated cluster in its own process (pinned to `cpus`), stopped on
    exit: yields the process and what `serve` sent once it was ready. `serve(args, ready,
    stop)` gets `spec` with a scratch `directory` and the `cpus`."""
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="kerf-bench-") as tmp:
        ready_recv, ready_send = context.Pipe(duplex=False)
        stop = context.Event()
        sim = context.Process(
            target=serve,
            args=({**spec, "directory": tmp, "cpus": cpus}, ready_send, stop),
            name="kubesim-bench",
        )
        sim.start()
        try:
            if not ready_recv.poll(timeout_s):
                raise RuntimeError(f"kubesim did not come up within {timeout_s:.0f} s")
            yield sim, ready_recv.recv()
        finally:
            stop.set()
            sim.join(30)
            if sim.is_alive():
                sim.kill()


def client_process(
    sim: BaseProcess | None,
    target: Callable[..., None],
    args: tuple[Any, ...],
    *,
    timeout_s: float,
    what: str,
) -> tuple[Any, float | None]:
    """Run `target(*args, out)` in a fresh interpreter; returns what it sent on `out` and
    the CPU seconds kubesim (`sim`) spent meanwhile (None without `sim` or where /proc
    cannot tell)."""
    context = multiprocessing.get_context("spawn")
    out_recv, out_send = context.Pipe(duplex=False)
    client = context.Process(target=target, args=(*args, out_send), name="kerf-bench-client")
    before = process_cpu_seconds(sim.pid or 0) if sim is not None else None
    client.start()
    if not out_recv.poll(timeout_s):
        client.kill()
        raise RuntimeError(f"{what} within {timeout_s:.0f} s")
    result = out_recv.recv()
    after = process_cpu_seconds(sim.pid or 0) if sim is not None else None
    client.join(30)
    spent = None if before is None or after is None else after - before
    return result, spent


def run_each(
    cluster: str, runners: Mapping[str, Callable[[], dict[str, Any]]], out: Path
) -> dict[str, Any]:
    """The figures of `runners[cluster]()`, or, for "both", of kubesim's then the real
    one's as {"sim": …, "real": …}, `out` written after each (a failed second run keeps
    the first's figures)."""
    if cluster != "both":
        return runners[cluster]()
    figures: dict[str, Any] = {}
    for name in ("sim", "real"):
        figures[name] = runners[name]()
        write_figures(out, figures)
    return figures


def bench_header(args: argparse.Namespace) -> dict[str, Any]:
    """The figures every cluster bench starts with: the cluster's size and the machine."""
    return {
        **{key: getattr(args, key) for key in CLUSTER_ARGS},
        "python": platform.python_version(),
        "machine": platform.machine(),
        # the machine is shared: a high load stretches wall times, not CPU seconds
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start kubesim with the cluster, then `--runs` cold starts of a fresh client."""
    sim_cpus, client_cpus = cpu_split()
    figures: dict[str, Any] = {
        **bench_header(args),
        "cluster": "kubesim",
        "page_size": args.page_size,
    }
    spec = {key: getattr(args, key) for key in CLUSTER_ARGS}
    with simulator_process(serve_cluster, spec, sim_cpus, timeout_s=600) as (sim, ready):
        _, kubeconfig, count, seeded_s = ready
        figures["cluster_objects"] = count
        figures["seed_seconds"] = seeded_s
        runs = []
        for _ in range(args.runs):
            figures_of_run, sim_cpu = client_process(
                sim,
                _pinned_measure,
                (client_cpus, kubeconfig, args.page_size),
                timeout_s=600,
                what="the client did not sync",
            )
            if sim_cpu is not None:
                # serving the lists (and the first seconds of watches)
                figures_of_run["kubesim_cpu_seconds"] = round(sim_cpu, 2)
            runs.append(figures_of_run)
        figures["runs"] = runs
    return _summarised(figures, "kubesim_cpu_seconds")


def run_real(args: argparse.Namespace) -> dict[str, Any]:
    """Start devcluster with the cluster created through the API and its pods running,
    then `--runs` cold starts of a fresh client (the control plane pinned where kubesim
    is in `run`)."""
    from benchmarks.real_cluster import real_cluster

    server_cpus, client_cpus = cpu_split()
    figures: dict[str, Any] = {**bench_header(args), "cluster": "real", "page_size": args.page_size}
    spec = {key: getattr(args, key) for key in CLUSTER_ARGS}
    with (
        tempfile.TemporaryDirectory(prefix="kerf-bench-") as tmp,
        real_cluster(spec, Path(tmp), server_cpus, bound_s=args.setup_timeout) as cluster,
    ):
        figures["cluster_objects"] = cluster.objects
        figures["setup"] = cluster.setup
        runs = []
        for _ in range(args.runs):
            before = cluster.cpu_seconds()
            figures_of_run, _ = client_process(
                None,
                _pinned_measure,
                (client_cpus, cluster.kubeconfig, args.page_size),
                timeout_s=600,
                what="the client did not sync",
            )
            # serving the lists and the first seconds of watches, and whatever the
            # controllers and the node agent did meanwhile (lease renewals)
            figures_of_run["control_plane_cpu_seconds"] = cpu_delta(cluster.cpu_seconds(), before)
            runs.append(figures_of_run)
        figures["runs"] = runs
    return _summarised(figures, "control_plane_cpu_seconds")


def _summarised(figures: dict[str, Any], server_cpu: str) -> dict[str, Any]:
    figures["best"] = min(figures["runs"], key=lambda r: r["sync_seconds"])
    best = figures["best"]
    figures["summary"] = {
        "sync_seconds": best["sync_seconds"],
        "target_sync_seconds": TARGET_SYNC_S,
        "sync_met": best["sync_seconds"] <= TARGET_SYNC_S,
        "cpu_seconds": best["cpu_seconds"],
        server_cpu: best.get(server_cpu),
        "peak_rss_mib": best["peak_rss_mib"],
        "full_collection_cpu_ms": best["full_collection_cpu_ms"],
    }
    return figures


def _pinned_measure(
    cpus: set[int] | None, kubeconfig: str, page_size: int | None, out: Any
) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)
    measure_sync(kubeconfig, page_size, out)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `make bench` (start-up part)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_size_arguments(parser)
    parser.add_argument("--runs", type=int, default=2, help="cold starts; the fastest is reported")
    parser.add_argument(
        "--page-size", type=int, default=None, help="list page size (default: the informer's)"
    )
    parser.add_argument(
        "--cluster",
        choices=("sim", "real", "both"),
        default="sim",
        help="kubesim (default), the real control plane (devcluster), or both in turn",
    )
    parser.add_argument(
        "--setup-timeout",
        type=float,
        default=1800.0,
        help="with --cluster real: seconds the pods may take to run",
    )
    parser.add_argument("--out", type=Path, default=Path(".bench/startup.json"))
    args = parser.parse_args(argv)
    from benchmarks.real_cluster import SetupError

    try:
        figures = run_each(
            args.cluster, {"sim": lambda: run(args), "real": lambda: run_real(args)}, args.out
        )
    except (SetupError, RuntimeError) as exc:
        print(f"benchmarks.startup: {exc}", file=sys.stderr)
        return 1
    write_figures(args.out, figures)
    for name, result in figures.items() if args.cluster == "both" else [("", figures)]:
        if name:
            print(f"--- {name}")
        for key, value in result.items():
            if key != "runs":
                print(f"{key:20} {value}")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
