"""`make demo-real`: the demo's story on the real control plane.

devcluster (etcd, kube-apiserver, kube-controller-manager and kube-scheduler 1.35, with the
node agent playing the kubelet) is started; the storefront is applied; kerf is installed
from `manifests/` with kubectl and runs as `kerf webhook` and `kerf reconciler` local
processes, each with its own ServiceAccount's token, so the real API server calls the
webhook and enforces kerf's RBAC. The story is `make demo`'s where it applies; where
kubesim moves its clock, this one waits on the wall clock with shorter periods, and
where kubesim's usage model OOM-kills cart, the node agent's fault annotation does.
It exits on its own; Ctrl-C stops everything it started and exits 130.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import IO, Any

from kubernetes_asyncio import client

from app.clock import utc_now
from app.informer import api_client_from_config
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
from harness.backend import Backend, real_available, running_backend
from harness.errors import HarnessError
from harness.services import Kerf, running_kerf
from kubesim.fault_annotations import OOM_KILL, RESIZE

#: A bound on each step on the wall clock of a loaded machine (not an expectation).
STEP_TIMEOUT_S = 240.0
#: The real cluster's clock cannot be moved: the periods kubesim's demo skips are shortened.
FALLBACK_AFTER = "20s"
MONITORING_PERIOD = "30s"
BACKOFF = {"timePeriod": "5s", "multiplyByTurn": 1}
APPS = ("web", "api", "checkout", "search", "cart")
#: How many lines of a kerf service's log a failure shows.
LOG_TAIL = 20


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


def tell(out: IO[str], workdir: Path) -> int:
    """The whole story on a devcluster under `workdir`; 0 when every step happened."""
    narrator = Narrator(out)
    start = datetime.now(UTC).replace(microsecond=0)
    narrator.step(
        "A real control plane: etcd, kube-apiserver, kube-controller-manager and kube-scheduler "
        "1.35, a node agent playing the kubelet"
    )
    narrator.say("  starting python -m devcluster (one node: 8 cpu, 16Gi) ...")
    with running_backend("real", workdir, nodes=1, cpu="8", memory="16Gi") as cluster:
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
        docs = [d for d in documents(start - timedelta(hours=1)) if d["kind"] not in POLICY_KINDS]
        for doc in docs:
            await story.create(doc)
            if doc["kind"] == "Namespace":
                # Pods are refused until the controller manager made the default account.
                await story.until(lambda: _has_default_account(story), "the default account")
        replicas = {d["metadata"]["name"]: d["spec"]["replicas"] for d in docs if "spec" in d}
        await story.until(lambda: _all_ready(story, replicas), "every storefront pod Running")
        await story.show_pods(*APPS)


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
        await _policies(story, start)
        await in_place(story)
        await blocked(story)
        await admission(story, lambda before: _new_pod(story, before))
        await _fallback(story)
        await _rollback(story)
        await report(story, kerf.backend.kubeconfig)
        await savings(story, kerf.backend.kubeconfig, utc_now())


async def _leading(kerf: Kerf) -> bool:
    text = await asyncio.to_thread(kerf.metrics, kerf.reconcilers[0])
    return any(line == "kerf_reconciler_leader 1.0" for line in text.splitlines())


async def _annotate(story: Story, pod: str, key: str, value: str) -> None:
    await story.core.patch_namespaced_pod(pod, "shop", {"metadata": {"annotations": {key: value}}})


async def _policies(story: Story, start: datetime) -> None:
    story.step(
        "Policies applied: web by a StaticPolicy, api by recommendations, checkout and search by StaticPolicies"
    )
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
    docs = documents(start - timedelta(hours=1))
    await create_all(story, [on_the_wall_clock(d) for d in docs if d["kind"] in POLICY_KINDS])


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


async def _rollback(story: Story) -> None:
    story.step(ROLLBACK_TITLE)
    story.say(
        f"  (monitoringPeriod {MONITORING_PERIOD} and a {BACKOFF['timePeriod']} back-off here, "
        "not 5m and 1m × 2: a real cluster's clock is not moved)"
    )
    await create_all(story, [on_the_wall_clock(d) for d in documents(datetime.now(UTC), ROLLBACK)])
    loop = asyncio.get_running_loop()
    begun = loop.time()
    watch = RollbackWatch(story)
    await watch.begin()
    killed = False
    while (mode := await watch.observe(stamp(loop.time() - begun))) != "failedPermanent":
        pods = await story.pods("cart")
        if mode == "monitoring" and not killed and all(_memory_limits(p) == "256Mi" for p in pods):
            for pod in pods:
                await _annotate(story, pod["metadata"]["name"], OOM_KILL, "app")
            killed = True
            story.say(
                f"  {stamp(loop.time() - begun)}  the node agent OOM-kills cart's containers "
                f"({OOM_KILL}=app), as 300Mi under a 256Mi limit would be: it models no usage"
            )
        if loop.time() - begun > story.timeout_s:
            raise DemoFailed("the bad downsize was not rolled back and given up")
        await asyncio.sleep(0.5)
    story.say(
        "  (one attempt allowed: cart keeps its manifest's values; only a new recommendation is tried)"
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
