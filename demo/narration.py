"""What both demos say and read back: the storefront's documents, the narration, and the
steps that read the same on kubesim and on the real control plane."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import orjson
import yaml
from kubernetes_asyncio import client

from app.annotations import POD_INFO, ROLLBACK_STATE
from app.models import plural
from app.report import Prices, build_report
from app.report_table import TABLE_WIDTH, render_table, table_rows
from app.snapshot import snapshot_view

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "demo" / "storefront.yaml"
ROLLBACK = ROOT / "examples" / "demo" / "rollback.yaml"
STEP_TIMEOUT_S = 30.0
POLICY_KINDS = frozenset(
    {"AutomationStrategy", "StaticPolicy", "ProactivePolicy", "ConfigMap", "PodDisruptionBudget"}
)


class DemoFailed(RuntimeError):
    """A step of the story did not happen in time."""


class Narrator:
    """The story told on `out`: steps and the lines under them."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def step(self, title: str) -> None:
        self.say()
        self.say(f"==> {title}")


class Story(Narrator):
    """Narration on `out` and the API calls the narration shows; a step waits at most
    `timeout_s` for what it shows."""

    def __init__(
        self, api: client.ApiClient, out: IO[str], timeout_s: float = STEP_TIMEOUT_S
    ) -> None:
        super().__init__(out)
        self.api = api
        self.timeout_s = timeout_s
        self.core = client.CoreV1Api(api)

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
        deadline = loop.time() + self.timeout_s
        while not (result := await check()):
            if loop.time() > deadline:
                raise DemoFailed(f"timed out waiting for {what}")
            await asyncio.sleep(0.05)
        return result


def documents(analyzed_at: datetime, path: Path = EXAMPLE) -> list[dict[str, Any]]:
    """The example's objects, their recommendations analyzed at `analyzed_at`."""
    text = path.read_text().replace(
        "ANALYZED_AT", analyzed_at.isoformat(timespec="seconds").replace("+00:00", "Z")
    )
    return [doc for doc in yaml.safe_load_all(text) if doc]


def resize_pending(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's PodResizePending condition, if it has one."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodResizePending"), None)


async def in_place(story: Story) -> None:
    """web and api resized in place, their pods shown."""
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


async def blocked(story: Story) -> None:
    """checkout's change blocked by a guardrail, and why."""
    story.step("A change blocked by a guardrail, and why")

    async def is_blocked() -> dict[str, Any] | None:
        status = await story.recommendation("checkout")
        return status if status.get("phase") == "Blocked" else None

    status = await story.until(is_blocked, "checkout to be blocked")
    condition = next(c for c in status["conditions"] if c["type"] == "Blocked")
    story.say(f"  checkout: {status['reason']}: {condition['message']}")
    story.say(
        "  (one replica and a strategy that may only evict: kerf will not take the only pod down)"
    )


async def admission(story: Story, created: Callable[[set[str]], Awaitable[None]]) -> None:
    """web scaled from 3 to 4; `created(names before)` returns once the new pod exists."""
    story.step("A new pod sized at admission: web scaled from 3 to 4")
    before = {p["metadata"]["name"] for p in await story.pods("web")}
    await client.AppsV1Api(story.api).patch_namespaced_deployment_scale(
        "web", "shop", {"spec": {"replicas": 4}}
    )
    await created(before)
    new = [p for p in await story.pods("web") if p["metadata"]["name"] not in before]
    for pod in new:
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        info = orjson.loads(pod["metadata"]["annotations"][POD_INFO])
        story.say(
            f"  {pod['metadata']['name']}: requests {requests} (webhook fingerprint {info['fingerprint']})"
        )


async def deferred_pod(story: Story) -> str:
    """The search pod whose resize the node defers, said with its condition; its name."""
    story.step("An eviction fallback: the node keeps deferring one search pod's resize")

    async def pending() -> dict[str, Any] | None:
        found = [p for p in await story.pods("search") if resize_pending(p)]
        return found[0] if found else None

    pod = await story.until(pending, "the Deferred resize")
    name = str(pod["metadata"]["name"])
    condition = resize_pending(pod) or {}
    story.say(f"  {name}: PodResizePending {condition['reason']}: {condition.get('message', '')}")
    return name


async def replaced(story: Story, name: str) -> None:
    """Wait until the deferred pod `name` is evicted and replaced; show search's pods."""

    async def gone() -> bool:
        names = [p["metadata"]["name"] for p in await story.pods("search")]
        return name not in names and len(names) == 2

    await story.until(gone, "the deferred pod to be evicted and replaced")
    await story.show_pods("search")


@dataclass
class RollbackWatch:
    """Says each new rollback-state of cart (with its pods' memory limits) and cart's new
    kerf events."""

    story: Story
    seen: set[str] = field(default_factory=set)
    mode: str | None = None

    async def begin(self) -> None:
        """Only events from now on are new."""
        self.seen = {e["metadata"]["name"] for e in await self.story.kerf_events()}

    async def observe(self, stamp: str) -> str | None:
        """Say what changed since the last look, prefixed by `stamp`; the current mode."""
        story = self.story
        cart = await client.AppsV1Api(story.api).read_namespaced_deployment("cart", "shop")
        state = orjson.loads((cart.metadata.annotations or {}).get(ROLLBACK_STATE) or "{}")
        if state.get("mode") != self.mode:
            self.mode = state.get("mode")
            limits = [
                p["spec"]["containers"][0]["resources"]["limits"]["memory"]
                for p in await story.pods("cart")
            ]
            detail = f", {state['failureReason']}" if state.get("failureReason") else ""
            story.say(
                f"  {stamp}  rollback-state {self.mode} (turn {state.get('turn', 1)}{detail}); pod limits {limits}"
            )
        for event in await story.kerf_events():
            if event["metadata"]["name"] not in self.seen and event["regarding"]["name"] == "cart":
                self.seen.add(event["metadata"]["name"])
                if event["reason"].startswith("Rollback") or event["reason"] == "Resized":
                    story.say(f"  {stamp}    event {event['reason']}: {event['note'][:110]}")
        return self.mode


def stamp(elapsed_s: float) -> str:
    """`t+XmYYs`: how long after the bad downsize."""
    elapsed = int(elapsed_s)
    return f"t+{elapsed // 60}m{elapsed % 60:02d}s"


async def create_all(story: Story, docs: list[dict[str, Any]]) -> None:
    """Create each object and say so."""
    for doc in docs:
        await story.create(doc)
        story.say(f"  created {doc['kind']} shop/{doc['metadata']['name']}")


ROLLBACK_TITLE = "A bad downsize rolled back: cart's memory limit to 256Mi, but it uses 300Mi"


def kubectl_path() -> str | None:
    """The project's kubectl (`KUBECTL`, else .tools/bin), else one on PATH."""
    candidate = os.environ.get("KUBECTL") or str(ROOT / ".tools" / "bin" / "kubectl")
    return candidate if Path(candidate).is_file() else shutil.which("kubectl")


async def run_kubectl(story: Story, kubeconfig: Path, *args: str) -> None:
    """Run kubectl and indent its output into the story."""
    kubectl = kubectl_path()
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


#: Example on-demand prices per core-hour and GiB-hour, for the report's monthly cost.
DEMO_PRICES = Prices(cpu_core_hour=0.031, memory_gib_hour=0.004)


async def savings(story: Story, kubeconfig: Path, now: datetime) -> None:
    """`kerf report` over the storefront, at the story's time."""
    story.step("What kerf saves")
    prices = f"--cpu-price {DEMO_PRICES.cpu_core_hour} --memory-price {DEMO_PRICES.memory_gib_hour}"
    story.say(f"  $ kerf report --kubeconfig {kubeconfig.name} {prices}")
    report = build_report(await snapshot_view(kubeconfig), now=now)
    for line in render_table(table_rows(report, DEMO_PRICES), TABLE_WIDTH).splitlines():
        story.say(f"  {line}")


async def report(story: Story, kubeconfig: Path) -> None:
    """The recommendations' table and kerf's events."""
    story.step("What kerf reports")
    await run_kubectl(story, kubeconfig, "get", "rightsizingrecommendations", "-A")
    story.say()
    for event in await story.kerf_events():
        story.say(
            f"  {event['type']:<8} {event['reason']:<26} {event['regarding']['name']:<9} {event['note'][:90]}"
        )
