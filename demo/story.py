"""The demo's story: a storefront running oversized, then kerf installed on it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import orjson
import yaml
from kubernetes_asyncio import client

from app.annotations import POD_INFO, ROLLBACK_STATE
from app.models import plural
from kubesim.clock import FakeClock
from kubesim.sim import Simulator
from kubesim.testing import running_sim
from reconciler.leader import LeaderTimings
from reconciler.logs import configure_logging
from reconciler.main import Options, build_service
from reconciler.reconcile import ExecutionConfig
from reconciler.service import ServiceConfig, run_cluster
from webhook.local import running_local_webhook, webhook_configuration

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "demo" / "storefront.yaml"
ROLLBACK = ROOT / "examples" / "demo" / "rollback.yaml"
CRD_DIR = ROOT / "manifests" / "crds"
STEP_TIMEOUT_S = 30.0
#: The reconciler follows changes quickly so the story moves on without waiting.
OPTIONS = Options(
    execution=ExecutionConfig(
        eviction_rate=5.0,
        follow_s=0.1,
        refused_retry_s=0.5,
        refused_retry_max_s=5.0,
        lease_retry_s=0.5,
    ),
    service=ServiceConfig(workers=2, resync_s=3600.0),
    leader=LeaderTimings.scaled(5.0),
)
POLICY_KINDS = frozenset(
    {"AutomationStrategy", "StaticPolicy", "ProactivePolicy", "ConfigMap", "PodDisruptionBudget"}
)


class Story:
    """Narration on `out` and the API calls the narration shows."""

    def __init__(self, sim: Simulator, api: client.ApiClient, out: IO[str]) -> None:
        self.sim = sim
        self.api = api
        self.out = out
        self.core = client.CoreV1Api(api)

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def step(self, title: str) -> None:
        self.say()
        self.say(f"==> {title}")

    async def create(self, doc: dict[str, Any]) -> None:
        """POST one object to its REST path (namespaced, or cluster-scoped Namespace)."""
        api_version, kind = doc["apiVersion"], doc["kind"]
        prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        namespace = (doc.get("metadata") or {}).get("namespace")
        path = (
            f"{prefix}/namespaces/{namespace}/{plural(kind)}"
            if namespace
            else f"{prefix}/{plural(kind)}"
        )
        response = await self.api.call_api(
            path,
            "POST",
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=doc,
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
        body = await response.read()
        response.release()
        if response.status >= 300:
            raise RuntimeError(f"creating {kind} {doc['metadata']['name']}: {body[:300]!r}")

    async def pods(self, app: str) -> list[dict[str, Any]]:
        raw = await self.core.list_namespaced_pod(
            "shop", label_selector=f"app={app}", _preload_content=False
        )
        items = (await raw.json())["items"]
        return sorted(
            (p for p in items if not p["metadata"].get("deletionTimestamp")),
            key=lambda p: p["metadata"]["name"],
        )

    async def show_pods(self, *apps: str) -> None:
        self.say(f"  {'POD':<28} {'CPU REQ':>8} {'MEM REQ':>8}  SIZED AT ADMISSION")
        for app in apps:
            for pod in await self.pods(app):
                requests = pod["spec"]["containers"][0]["resources"].get("requests") or {}
                info = POD_INFO in (pod["metadata"].get("annotations") or {})
                self.say(
                    f"  {pod['metadata']['name']:<28} {requests.get('cpu', '-'):>8} "
                    f"{requests.get('memory', '-'):>8}  {'yes' if info else 'no'}"
                )

    async def recommendation(self, workload: str) -> dict[str, Any]:
        """The status of a workload's RightsizingRecommendation ({} until it exists)."""
        try:
            record = await client.CustomObjectsApi(self.api).get_namespaced_custom_object(
                "rightsizing.kubex.ai",
                "v1alpha1",
                "shop",
                "rightsizingrecommendations",
                f"deployment-{workload}",
            )
        except client.ApiException as exc:
            if exc.status == 404:
                return {}
            raise
        return record.get("status") or {}

    async def kerf_events(self) -> list[dict[str, Any]]:
        raw = await client.EventsV1Api(self.api).list_namespaced_event(
            "shop", _preload_content=False
        )
        items = (await raw.json())["items"]
        kerf = [e for e in items if "kerf" in (e.get("reportingController") or "")]
        return sorted(kerf, key=lambda e: int(e["metadata"]["resourceVersion"]))

    async def until(self, check: Callable[[], Awaitable[Any]], what: str) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STEP_TIMEOUT_S
        while not (result := await check()):
            if loop.time() > deadline:
                raise DemoFailed(f"timed out waiting for {what}")
            await asyncio.sleep(0.05)
        return result


class DemoFailed(RuntimeError):
    """A step of the story did not happen in time."""


def _documents(analyzed_at: datetime, path: Path = EXAMPLE) -> list[dict[str, Any]]:
    text = path.read_text().replace(
        "ANALYZED_AT", analyzed_at.isoformat(timespec="seconds").replace("+00:00", "Z")
    )
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _kubectl() -> str | None:
    candidate = os.environ.get("KUBECTL") or str(ROOT / ".tools" / "bin" / "kubectl")
    return candidate if Path(candidate).is_file() else shutil.which("kubectl")


async def _run_kubectl(story: Story, kubeconfig: Path, *args: str) -> None:
    kubectl = _kubectl()
    if kubectl is None:
        story.say("  (kubectl not found: run `make tools` to see its tables here)")
        return
    story.say(f"  $ kubectl {' '.join(args)}")
    done = await asyncio.to_thread(
        subprocess.run,
        [kubectl, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    for line in (done.stdout or done.stderr).splitlines():
        story.say(f"  {line}")


async def tell(out: IO[str], on_interrupt: Callable[[], object] = lambda: None) -> int:
    """The whole story; 0 when every step happened. Ctrl-C calls `on_interrupt` and
    cancels the story, which then stops everything it started."""
    story_task = asyncio.current_task()
    assert story_task is not None

    def interrupt() -> None:
        on_interrupt()
        story_task.cancel()

    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, interrupt)
    start = datetime.now(UTC).replace(microsecond=0)
    clock = FakeClock(start)
    with tempfile.TemporaryDirectory(prefix="kerf-demo-") as tmp:
        async with running_sim(tmp, clock=clock) as sim, sim.api_client() as api:
            story = Story(sim, api, out)
            await _cluster(story, start)
            async with running_local_webhook(
                api,
                Path(tmp) / "certs",
                holder="kerf-webhook-demo",
                clock=clock.now,
                log_level="warning",
            ) as hook:
                await client.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(
                    webhook_configuration(hook.url, hook.ca_bundle)
                )
                feed, service = build_service(
                    api,
                    OPTIONS,
                    namespace="kerf-system",
                    identity="kerf-reconciler-demo",
                    clock=clock.now,
                )
                stop = asyncio.Event()
                task = asyncio.create_task(run_cluster(feed, service, stop=stop))
                try:
                    story.step(
                        "kerf installed: the webhook on " + hook.url + ", the reconciler leading"
                    )
                    await story.until(lambda: _true(service.leading), "the reconciler to lead")
                    await _policies(story, start)
                    await _in_place(story)
                    await _blocked(story)
                    await _admission(story, hook.view)
                    await _fallback(story, service)
                    await _rollback(story, service)
                    story.step("What kerf reports")
                    await _run_kubectl(
                        story, sim.kubeconfig_path, "get", "rightsizingrecommendations", "-A"
                    )
                    story.say()
                    for event in await story.kerf_events():
                        story.say(
                            f"  {event['type']:<8} {event['reason']:<26} {event['regarding']['name']:<9} {event['note'][:90]}"
                        )
                finally:
                    stop.set()
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(task, 10)
    story.step("Done: kubesim, the webhook and the reconciler are stopped.")
    return 0


async def _true(value: bool) -> bool:
    return value


async def _cluster(story: Story, start: datetime) -> None:
    story.step("A cluster (kubesim) with a storefront whose pods ask for more than they use")
    extensions = client.ApiextensionsV1Api(story.api)
    for path in sorted(CRD_DIR.glob("rightsizing.kubex.ai_*.yaml")):
        await extensions.create_custom_resource_definition(yaml.safe_load(path.read_text()))
    await story.sim.add_namespace("kerf-system")
    await story.sim.add_node("node-a", cpu="8", memory="16Gi")
    for doc in _documents(start - timedelta(hours=1)):
        if doc["kind"] not in POLICY_KINDS:
            await story.create(doc)
    await story.sim.settle()
    await story.show_pods("web", "api", "checkout", "search", "cart")


async def _policies(story: Story, start: datetime) -> None:
    story.step(
        "Policies applied: web by a StaticPolicy, api by recommendations, checkout and search by StaticPolicies"
    )
    # The node defers in-place resizes of one search pod, as a busy node would.
    search = (await story.pods("search"))[0]["metadata"]["name"]
    story.sim.kubelet.resize_verdicts[("shop", search)] = ("Deferred", "the node is busy")
    for doc in _documents(start - timedelta(hours=1)):
        if doc["kind"] in POLICY_KINDS:
            await story.create(doc)
            story.say(f"  created {doc['kind']} shop/{doc['metadata']['name']}")


async def _in_place(story: Story) -> None:
    story.step("Running pods resized in place (same pods, no restart)")

    async def done() -> bool:
        web = await story.recommendation("web")
        api = await story.recommendation("api")
        return web.get("phase") == "Applied" and api.get("phase") == "Applied"

    await story.until(done, "web and api to be resized")
    await story.show_pods("web", "api")
    web = await story.recommendation("web")
    story.say(
        f"  web: phase {web['phase']}, lastApplied {orjson.dumps(web['lastApplied']['containers']).decode()} by {web['lastApplied']['method']}"
    )


async def _blocked(story: Story) -> None:
    story.step("A change blocked by a guardrail, and why")

    async def blocked() -> dict[str, Any] | None:
        status = await story.recommendation("checkout")
        return status if status.get("phase") == "Blocked" else None

    status = await story.until(blocked, "checkout to be blocked")
    condition = next(c for c in status["conditions"] if c["type"] == "Blocked")
    story.say(f"  checkout: {status['reason']}: {condition['message']}")
    story.say(
        "  (one replica and a strategy that may only evict: kerf will not take the only pod down)"
    )


async def _admission(story: Story, view: Any) -> None:
    story.step("A new pod sized at admission: web scaled from 3 to 4")
    before = {p["metadata"]["name"] for p in await story.pods("web")}
    await client.AppsV1Api(story.api).patch_namespaced_deployment_scale(
        "web", "shop", {"spec": {"replicas": 4}}
    )
    await story.sim.settle()
    new = [p for p in await story.pods("web") if p["metadata"]["name"] not in before]
    for pod in new:
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        info = orjson.loads(pod["metadata"]["annotations"][POD_INFO])
        story.say(
            f"  {pod['metadata']['name']}: requests {requests} (webhook fingerprint {info['fingerprint']})"
        )


async def _fallback(story: Story, service: Any) -> None:
    story.step("An eviction fallback: the node keeps deferring one search pod's resize")
    pods = await story.pods("search")
    deferred = next(
        (
            p
            for p in pods
            if any(c["type"] == "PodResizePending" for c in p["status"].get("conditions") or [])
        ),
        None,
    )
    if deferred is None:

        async def pending() -> Any:
            found = [
                p
                for p in await story.pods("search")
                if any(c["type"] == "PodResizePending" for c in p["status"].get("conditions") or [])
            ]
            return found[0] if found else None

        deferred = await story.until(pending, "the Deferred resize")
    name = deferred["metadata"]["name"]
    condition = next(c for c in deferred["status"]["conditions"] if c["type"] == "PodResizePending")
    story.say(f"  {name}: PodResizePending {condition['reason']}: {condition.get('message', '')}")
    story.say(
        "  ... 11 minutes later (apply.fallbackAfter is 10m; the demo moves the simulated clock)"
    )
    await story.sim.advance(11 * 60)
    await asyncio.sleep(0.5)  # the webhook renews its Lease at the new time first
    service.enqueue_all()

    async def replaced() -> bool:
        names = [p["metadata"]["name"] for p in await story.pods("search")]
        return name not in names and len(names) == 2

    await story.until(replaced, "the deferred pod to be evicted and replaced")
    await story.show_pods("search")


async def _rollback(story: Story, service: Any) -> None:
    story.step("A bad downsize rolled back: cart's memory limit to 256Mi, but it uses 300Mi")
    for doc in _documents(datetime.now(UTC), ROLLBACK):
        await story.create(doc)
        story.say(f"  created {doc['kind']} shop/{doc['metadata']['name']}")
    apps = client.AppsV1Api(story.api)
    start = story.sim.clock.now()
    seen: set[str] = {e["metadata"]["name"] for e in await story.kerf_events()}
    last_mode = None
    for _ in range(60):
        cart = await apps.read_namespaced_deployment("cart", "shop")
        state = orjson.loads((cart.metadata.annotations or {}).get(ROLLBACK_STATE) or "{}")
        elapsed = int((story.sim.clock.now() - start).total_seconds())
        stamp = f"t+{elapsed // 60}m{elapsed % 60:02d}s"
        if state.get("mode") != last_mode:
            last_mode = state.get("mode")
            limits = [
                p["spec"]["containers"][0]["resources"]["limits"]["memory"]
                for p in await story.pods("cart")
            ]
            detail = f", {state['failureReason']}" if state.get("failureReason") else ""
            story.say(
                f"  {stamp}  rollback-state {last_mode} (turn {state.get('turn', 1)}{detail}); pod limits {limits}"
            )
        for event in await story.kerf_events():
            if event["metadata"]["name"] not in seen and event["regarding"]["name"] == "cart":
                seen.add(event["metadata"]["name"])
                if event["reason"].startswith("Rollback") or event["reason"] == "Resized":
                    story.say(f"  {stamp}    event {event['reason']}: {event['note'][:110]}")
        if last_mode == "failedPermanent":
            break
        await story.sim.advance(30)
        await asyncio.sleep(0.2)
        service.enqueue_all()
        await story.until(lambda: _true(service.queue.idle), "the reconciler to settle")
    if last_mode != "failedPermanent":
        raise DemoFailed("the bad downsize was not rolled back and given up")
    story.say(
        "  (one attempt allowed: cart keeps its manifest's values; only a new recommendation is tried)"
    )


def main() -> int:
    """Run the demo; exit 0 when every step happened."""
    # The story is told on stdout; the services' own JSON logs only when something fails.
    configure_logging("warning")
    interrupted: list[bool] = []
    try:
        return asyncio.run(tell(sys.stdout, on_interrupt=lambda: interrupted.append(True)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    except Exception as exc:
        # An error while the story was being stopped is the interruption's doing.
        if not interrupted:
            if not isinstance(exc, DemoFailed):
                raise
            print(f"demo: {exc}", file=sys.stderr)
            return 1
    print("demo: interrupted; everything it started is stopped", file=sys.stderr)
    return 130
