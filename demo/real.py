"""`make demo-real`: the demo's story on the real control plane.

devcluster (etcd, kube-apiserver, kube-controller-manager and kube-scheduler 1.35) is
started with a real node where one can run here (a kubelet 1.35, containerd and runc:
root and `make node-tools`), else with the node agent playing the kubelet, saying why.
The storefront is applied; kerf is installed from `manifests/` with kubectl and runs as
`kerf webhook` and `kerf reconciler` local processes, each with its own ServiceAccount's
token, so the real API server calls the webhook and enforces kerf's RBAC. The story is
`make demo`'s where it applies; where kubesim moves its clock, this one waits on the wall
clock with shorter periods.

On the real node every storefront container runs kerf-load (harness/loadimage.py) using
what the example's usage annotation says, every CPU figure is a third of the example's
(the node has the machine's two cores, less a reserve), the cgroup values are read inside
the containers before and after a resize, and cart's bad downsize is OOM-killed by the
kernel once its load comes back. The node agent plays those: a fault
annotation defers search's resizes and OOM-kills cart. It exits on its own; Ctrl-C stops
everything it started and exits 130.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import IO, Any

from kubernetes_asyncio import client

from app.kube.informer import api_client_from_config
from app.model.quantities import to_millicores
from app.runtime.clock import utc_now
from demo.narration import (
    POLICY_KINDS,
    ROLLBACK,
    ROLLBACK_TITLE,
    DemoFailed,
    Narrator,
    RollbackWatch,
    Story,
    admission,
    blocked,
    create_all,
    deferred_pod,
    documents,
    in_place,
    replaced,
    report,
    savings,
    stamp,
)
from harness.backend import Backend, real_available, real_node_missing, running_backend
from harness.errors import HarnessError
from harness.kubectl import Kubectl
from harness.loadimage import cgroup_values, runnable
from harness.services import Kerf, running_kerf
from kerf.humanize import quantity
from kubesim.fault_annotations import OOM_KILL, RESIZE
from kubesim.usage import USAGE

#: A bound on each step on the wall clock of a loaded machine (not an expectation).
STEP_TIMEOUT_S = 240.0
#: The real cluster's clock cannot be moved: the periods kubesim's demo skips are shortened.
FALLBACK_AFTER = "20s"
MONITORING_PERIOD = "30s"
BACKOFF = {"timePeriod": "5s", "multiplyByTurn": 1}
APPS = ("web", "api", "checkout", "search", "cart")
#: How many lines of a kerf service's log a failure shows.
LOG_TAIL = 20
#: The real node: the machine's two cores less the kubelet's reserve, and room in memory.
REAL_NODE_CPU = "1800m"
REAL_NODE_MEMORY = "8Gi"
#: On the real node every CPU figure of the example is divided by this: the storefront's
#: requests then fit with room for search's increase (at a half they fill the node and
#: the node-capacity filter holds the increase back).
CPU_DIVISOR = 3
#: What cart's kerf-load holds until its load comes back (the example's 300Mi would make
#: the kubelet refuse the downsize below usage, which is not this step's story).
CART_IDLE_MEMORY = "96Mi"
CART_LOAD_MEMORY = "300Mi"


def on_the_wall_clock(doc: dict[str, Any]) -> dict[str, Any]:
    """The example's object with the periods this demo waits out shortened: search's
    `apply.fallbackAfter` (10m by default) and cart's rollback window and back-off."""
    kind, name = doc["kind"], doc["metadata"]["name"]
    if kind == "StaticPolicy" and name == "search":
        guardrails = doc["spec"].setdefault("guardrails", {})
        guardrails.setdefault("apply", {})["fallbackAfter"] = FALLBACK_AFTER
    if kind == "RollbackPolicy" and name == "cart":
        doc["spec"]["monitoringPeriod"] = MONITORING_PERIOD
        doc["spec"]["backoff"] = {**doc["spec"]["backoff"], **BACKOFF}
    return doc


def scaled_cpu(value: Any) -> Any:
    """`value` (an object of the example) with every `cpu` quantity divided by CPU_DIVISOR,
    inside the usage annotation and the recommendation rows' JSON too."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "cpu" and isinstance(item, str | int | float):
                out[key] = f"{to_millicores(str(item)) // CPU_DIVISOR}m"
            elif key in (USAGE, "recommendations.json") and isinstance(item, str):
                out[key] = json.dumps(scaled_cpu(json.loads(item)))
            else:
                out[key] = scaled_cpu(item)
        return out
    if isinstance(value, list):
        return [scaled_cpu(item) for item in value]
    return value


def on_the_node(doc: dict[str, Any]) -> dict[str, Any]:
    """The example's object as the real node runs it: CPU divided, every container running
    kerf-load at the example's usage, cart's idle until its load comes back."""
    doc = scaled_cpu(doc)
    if doc["kind"] not in ("Deployment", "StatefulSet", "Pod"):
        return doc
    doc = runnable(doc)
    if doc["metadata"]["name"] == "cart":
        for entry in doc["spec"]["template"]["spec"]["containers"]:
            entry["args"][entry["args"].index("--memory") + 1] = CART_IDLE_MEMORY
    return doc


def tell(out: IO[str], workdir: Path) -> int:
    """The whole story on a devcluster under `workdir`; 0 when every step happened."""
    narrator = Narrator(out)
    start = datetime.now(UTC).replace(microsecond=0)
    why = real_node_missing()
    if why:
        narrator.step(
            "A real control plane: etcd, kube-apiserver, kube-controller-manager and "
            "kube-scheduler 1.35, a node agent playing the kubelet"
        )
        narrator.say(f"  (no real node here: {why})")
        narrator.say("  starting python -m devcluster --kubelet agent (one node: 8 cpu, 16Gi) ...")
        starting = running_backend("real", workdir, nodes=1, cpu="8", memory="16Gi")
    else:
        narrator.step(
            "A real control plane (etcd, kube-apiserver, kube-controller-manager and "
            "kube-scheduler 1.35) and a real node: kubelet 1.35, containerd and runc"
        )
        narrator.say(
            f"  starting python -m devcluster --kubelet real (one node: {REAL_NODE_CPU} cpu, "
            f"{REAL_NODE_MEMORY}) ..."
        )
        starting = running_backend(
            "real", workdir, nodes=1, cpu=REAL_NODE_CPU, memory=REAL_NODE_MEMORY, kubelet="real"
        )
    with starting as cluster:
        narrator.say("  " + next(line for line in cluster.log if "serving on" in line))
        asyncio.run(_storefront(cluster, out, start))
        narrator.step("Installing kerf as in production")
        narrator.say(
            "  kubectl apply from manifests/: the CRDs, namespace kerf-system, both "
            "ServiceAccounts and their RBAC, the defaults"
        )
        narrator.say(
            "  kerf webhook and kerf reconciler as local processes, each with its "
            "ServiceAccount's token (kubectl create token): the API server enforces kerf's RBAC"
        )
        with running_kerf(cluster, workdir) as kerf:
            try:
                asyncio.run(_with_kerf(kerf, out, start))
            except (DemoFailed, HarnessError):
                _show_logs(kerf)
                raise
    narrator.step("Done: the webhook, the reconciler and the control plane are stopped.")
    return 0


def _show_logs(kerf: Kerf) -> None:
    for service in [kerf.webhook, *kerf.reconcilers]:
        lines = service.text().splitlines()[-LOG_TAIL:]
        print(f"demo-real: the last lines of {service.name}'s log:", file=sys.stderr)
        for line in lines:
            print(f"  {line}", file=sys.stderr)


async def _storefront(cluster: Backend, out: IO[str], start: datetime) -> None:
    async with await api_client_from_config(cluster.kubeconfig) as api:
        story = Story(api, out, STEP_TIMEOUT_S)
        story.step(
            "A cluster (the real control plane) with a storefront whose pods ask for more "
            "than they use"
        )
        docs = [d for d in documents(start) if d["kind"] not in POLICY_KINDS]
        docs = [shaped(cluster, d) for d in docs]
        if cluster.real_kubelet:
            story.say(
                "  every container runs kerf-load, using what the example says it uses; the CPU "
                f"figures are 1/{CPU_DIVISOR} of the example's, to fit this node's {REAL_NODE_CPU}"
            )
        for doc in docs:
            await story.create(doc)
            if doc["kind"] == "Namespace":
                # Pods are refused until the controller manager made the default account.
                await story.until(lambda: _has_default_account(story), "the default account")
        replicas = {d["metadata"]["name"]: d["spec"]["replicas"] for d in docs if "spec" in d}
        await story.until(lambda: _all_ready(story, replicas), "every storefront pod Running")
        await story.show_pods(*APPS)


def shaped(cluster: Backend, doc: dict[str, Any]) -> dict[str, Any]:
    """The example's object as this cluster's node runs it."""
    return on_the_node(doc) if cluster.real_kubelet else doc


async def cgroup(cluster: Backend, pod: dict[str, Any]) -> dict[str, int]:
    """The cgroup values of the pod's first container, read inside it (real node only)."""
    container = pod["spec"]["containers"][0]["name"]
    name = pod["metadata"]["name"]
    argv = ("-n", "shop", "exec", name, "-c", container, "--", "kerf-load", "cgroup")
    return cgroup_values(await asyncio.to_thread(Kubectl(cluster.kubeconfig), *argv))


def cgroup_line(values: dict[str, int]) -> str:
    """cpu.shares, the CFS quota and the memory limit, as the kernel holds them."""
    return " ".join(f"{name}={value}" for name, value in cgroup_cells(values).items())


def cgroup_cells(values: dict[str, int]) -> dict[str, str]:
    """The cgroup values as a person reads them: the memory limit in kubectl's notation,
    `unlimited` for no limit (a quota of -1, a limit near 2**63)."""
    memory = values.get("memory.limit_in_bytes", 0)
    quota = values.get("cpu.cfs_quota_us", -1)
    return {
        "cpu.shares": str(values.get("cpu.shares", "-")),
        "cpu.cfs_quota_us": "unlimited" if quota < 0 else str(quota),
        "memory.limit_in_bytes": "unlimited" if memory >= 2**62 else quantity("memory", memory),
    }


def restarts(pod: dict[str, Any]) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount", 0)) for s in statuses)


async def _has_default_account(story: Story) -> bool:
    try:
        await story.core.read_namespaced_service_account("default", "shop")
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


async def _all_ready(story: Story, replicas: dict[str, int]) -> bool:
    for app, count in replicas.items():
        pods = await story.pods(app)
        if len(pods) != count or not all(_ready(p) for p in pods):
            return False
    return True


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def _with_kerf(kerf: Kerf, out: IO[str], start: datetime) -> None:
    async with await api_client_from_config(kerf.backend.kubeconfig) as api:
        story = Story(api, out, STEP_TIMEOUT_S)
        story.step(f"kerf installed: the webhook on {kerf.webhook_url}, the reconciler leading")
        await story.until(lambda: _leading(kerf), "the reconciler to lead")
        cluster = kerf.backend
        web = (await story.pods("web"))[0]
        before = await cgroup(cluster, web) if cluster.real_kubelet else {}
        await _policies(story, cluster, start)
        await in_place(story)
        if cluster.real_kubelet:
            await _cgroups_moved(story, cluster, web, before)
        await blocked(story)
        await admission(story, lambda before: _new_pod(story, before))
        if cluster.real_kubelet:
            await _search_in_place(story)
        else:
            await _fallback(story)
        await _rollback(story, cluster)
        await report(story, kerf.backend.kubeconfig)
        await savings(story, kerf.backend.kubeconfig, utc_now())


async def _leading(kerf: Kerf) -> bool:
    text = await asyncio.to_thread(kerf.metrics, kerf.reconcilers[0])
    return any(line == "kerf_reconciler_leader 1.0" for line in text.splitlines())


async def _annotate(story: Story, pod: str, key: str, value: str) -> None:
    await story.core.patch_namespaced_pod(pod, "shop", {"metadata": {"annotations": {key: value}}})


async def _cgroups_moved(
    story: Story, cluster: Backend, web: dict[str, Any], before: dict[str, int]
) -> None:
    name = web["metadata"]["name"]
    [now] = [p for p in await story.pods("web") if p["metadata"]["name"] == name]
    after = await cgroup(cluster, now)
    story.say(f"  {name}'s cgroup, read inside the container (kubectl exec ... kerf-load cgroup):")
    old, new = cgroup_cells(before), cgroup_cells(after)
    story.table([["FILE", "BEFORE", "AFTER"], *([k, old[k], new[k]] for k in old)], "    ")
    story.say(
        f"    same container, {restarts(now)} restarts: the kubelet changed the cgroup in place"
    )


async def _search_in_place(story: Story) -> None:
    """search's increase, which this node has room for, applied in place by the kubelet."""
    story.step("An increase the node has room for: search's resized in place by the kubelet")

    async def applied() -> bool:
        return (await story.recommendation("search")).get("phase") == "Applied"

    await story.until(applied, "search to be resized")
    await story.show_pods("search")
    story.say(
        "  (a node without room answers Deferred or Infeasible, and kerf falls back to an "
        "eviction after apply.fallbackAfter: make demo on kubesim, and make e2e on this node)"
    )


async def _policies(story: Story, cluster: Backend, start: datetime) -> None:
    story.step(
        "Policies applied: web by a StaticPolicy, api by recommendations, checkout and search by StaticPolicies"
    )
    docs = documents(start)
    policies = [shaped(cluster, on_the_wall_clock(d)) for d in docs if d["kind"] in POLICY_KINDS]
    if cluster.real_kubelet:
        await create_all(story, policies)
        return
    search = (await story.pods("search"))[0]["metadata"]["name"]
    await _annotate(story, search, RESIZE, "Deferred")
    story.say(
        f"  the node agent defers in-place resizes of {search} ({RESIZE}=Deferred), "
        "as a busy node would"
    )
    story.say(
        f"  (search's apply.fallbackAfter is {FALLBACK_AFTER} here, not 10m: a real cluster's "
        "clock is not moved)"
    )
    await create_all(story, policies)


async def _new_pod(story: Story, before: set[str]) -> None:
    async def created() -> bool:
        return any(p["metadata"]["name"] not in before for p in await story.pods("web"))

    await story.until(created, "the ReplicaSet to create web's new pod")


async def _fallback(story: Story) -> None:
    name = await deferred_pod(story)
    story.say(f"  ... waiting out apply.fallbackAfter ({FALLBACK_AFTER}) on the cluster's clock")
    await replaced(story, name)


def _memory_limits(pod: dict[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return str(((statuses[0].get("resources") or {}).get("limits") or {}).get("memory"))


async def _rollback(story: Story, cluster: Backend) -> None:
    story.step(ROLLBACK_TITLE)
    story.say(
        f"  (monitoringPeriod {MONITORING_PERIOD} and a {BACKOFF['timePeriod']} back-off here, "
        "not 5m and 1m × 2: a real cluster's clock is not moved)"
    )
    docs = documents(datetime.now(UTC), ROLLBACK)
    await create_all(story, [shaped(cluster, on_the_wall_clock(d)) for d in docs])
    loop = asyncio.get_running_loop()
    begun = loop.time()
    watch = RollbackWatch(story)
    await watch.begin()
    killed: set[str] = set()
    told: set[str] = set()
    while (mode := await watch.observe(stamp(loop.time() - begun))) != "failedPermanent":
        pods = await story.pods("cart")
        at = stamp(loop.time() - begun)
        if mode == "monitoring" and not killed and all(_memory_limits(p) == "256Mi" for p in pods):
            killed = {p["metadata"]["name"] for p in pods}
            if cluster.real_kubelet:
                await _load_comes_back(story, cluster, pods, at)
            else:
                for pod in pods:
                    await _annotate(story, pod["metadata"]["name"], OOM_KILL, "app")
                story.wrapped(
                    f"  {at:<9} ",
                    f"the node agent OOM-kills cart's containers ({OOM_KILL}=app), as 300Mi "
                    "under a 256Mi limit would be: it models no usage",
                )
        for pod in pods:
            name = pod["metadata"]["name"]
            if cluster.real_kubelet and name in killed - told and _oom_killed(pod):
                told.add(name)
                story.say(f"  {at:<9} {name}: OOMKilled by the kernel, exit 137")
        if loop.time() - begun > story.timeout_s:
            raise DemoFailed("the bad downsize was not rolled back and given up")
        await asyncio.sleep(0.5)
    story.say(
        "  (one attempt allowed: cart keeps its manifest's values; only a new recommendation is tried)"
    )
    if cluster.real_kubelet:
        await _healthy_again(story, cluster)


async def _load_comes_back(
    story: Story, cluster: Backend, pods: list[dict[str, Any]], at: str
) -> None:
    """Each cart container, now limited to 256Mi, is told to use 300Mi: the kernel kills it."""
    for pod in pods:
        story.wrapped(
            f"  {at:<9} ",
            f"{pod['metadata']['name']}'s cgroup: {cgroup_line(await cgroup(cluster, pod))}",
        )
    story.wrapped(
        f"  {at:<9} ",
        f"cart's load comes back: kubectl exec ... kerf-load set memory={CART_LOAD_MEMORY} "
        "in each pod, over the 256Mi limit kerf gave it",
    )
    kubectl = Kubectl(cluster.kubeconfig)
    for pod in pods:
        name = pod["metadata"]["name"]
        argv = ("-n", "shop", "exec", name, "--", "kerf-load", "set", f"memory={CART_LOAD_MEMORY}")
        await asyncio.to_thread(kubectl, *argv)


def _oom_killed(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    last = (statuses[0].get("lastState") or {}).get("terminated") or {}
    return last.get("reason") == "OOMKilled"


async def _healthy_again(story: Story, cluster: Backend) -> None:
    """cart's pods ready with the manifest's limit in their cgroups, and no OOM kill since."""

    async def restored() -> list[dict[str, Any]] | None:
        pods = await story.pods("cart")
        ok = len(pods) == 2 and all(_ready(p) and _memory_limits(p) == "512Mi" for p in pods)
        return pods if ok else None

    pods = await story.until(restored, "cart's pods ready with the manifest's values")
    for pod in pods:
        values = await cgroup(cluster, pod)
        story.say(
            f"  {pod['metadata']['name']}: ready, {restarts(pod)} restarts, cgroup "
            f"{cgroup_line(values)}"
        )


def main() -> int:
    """Run the demo on the real control plane; 0 when every step happened, 1 when one did
    not, 2 when the control plane is not built, 130 when interrupted."""
    if not real_available():
        print(
            "demo-real: the real control plane is not built: run make cluster-tools",
            file=sys.stderr,
        )
        return 2
    interrupted: list[bool] = []

    def interrupt(_signum: int, _frame: FrameType | None) -> None:
        # A second Ctrl-C while everything is being stopped must not cut the stop short.
        if not interrupted:
            interrupted.append(True)
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    try:
        with tempfile.TemporaryDirectory(prefix="kerf-demo-real-") as tmp:
            return tell(sys.stdout, Path(tmp))
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        # An error while the story was being stopped is the interruption's doing.
        if not interrupted:
            if not isinstance(exc, DemoFailed | HarnessError):
                raise
            print(f"demo-real: {exc}", file=sys.stderr)
            return 1
    print("demo-real: interrupted; everything it started is stopped", file=sys.stderr)
    return 130


if __name__ == "__main__":
    raise SystemExit(main())
