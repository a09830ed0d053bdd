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

from app.kube.snapshot import snapshot_view
from app.model.annotations import POD_INFO, ROLLBACK_STATE
from app.model.crd import plural
from app.outcome.report import Prices, build_report
from app.store.statedir import relative_times
from kerf.humanize import ARROW, change, changes, ordered, quantity, wrap
from kerf.report_table import TABLE_WIDTH, render_table, table_rows

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "demo" / "storefront.yaml"
ROLLBACK = ROOT / "examples" / "demo" / "rollback.yaml"
STEP_TIMEOUT_S = 30.0
#: The narration's lines fit a terminal this wide; longer texts wrap under their column.
WIDTH = 100
#: An Event's note takes at most this many lines; a longer one ends with `…` (`kubectl
#: describe` shows it whole).
NOTE_LINES = 3
#: How a status's lastApplied.method reads.
METHODS = {"inPlace": "in place", "evict": "by eviction", "admission": "at admission"}
POLICY_KINDS = frozenset(
    {"AutomationStrategy", "StaticPolicy", "ProactivePolicy", "ConfigMap", "PodDisruptionBudget"}
)


class DemoFailed(RuntimeError):
    """A step of the story did not happen in time."""


class Narrator:
    """The story told on `out`: steps and the lines under them."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def write(self, line: str) -> None:
        """One line as it is (a table's, a command's output)."""
        self.out.write(line + "\n")
        self.out.flush()

    def say(self, text: str = "") -> None:
        """A line of the story; a longer one than WIDTH wraps under its own indentation."""
        if len(text) <= WIDTH:
            self.write(text)
            return
        body = text.lstrip(" ")
        self.wrapped(text[: len(text) - len(body)], body)

    def step(self, title: str) -> None:
        self.write("")
        self.wrapped("==> ", title)

    def wrapped(self, prefix: str, text: str, max_lines: int | None = None) -> None:
        """`prefix` then `text`, wrapped to WIDTH with the next lines under the text; past
        `max_lines` lines cut at a word with `…`."""
        lines = wrap(text, WIDTH - len(prefix), max_lines)
        self.write(prefix + lines[0])
        for line in lines[1:]:
            self.write(" " * len(prefix) + line)

    def table(self, rows: list[list[str]], indent: str = "  ") -> None:
        for line in render_table(rows).splitlines():
            self.write(indent + line)


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

    async def manifest(self, app: str) -> dict[str, dict[str, Any]]:
        """The resources the Deployment `app` asks for, per container: the values before kerf."""
        raw = await client.AppsV1Api(self.api).read_namespaced_deployment(
            app, "shop", _preload_content=False
        )
        containers = (await raw.json())["spec"]["template"]["spec"]["containers"]
        return {c["name"]: c.get("resources") or {} for c in containers}

    async def show_pods(self, *apps: str) -> None:
        rows = [POD_HEADER]
        for app in apps:
            rows += pod_rows(await self.pods(app), await self.manifest(app))
        self.table(rows)
        if any(ARROW in cell for row in rows for cell in row):
            self.say("  (a changed value reads: the manifest's → the pod's)")

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


POD_HEADER = ["POD", "CPU REQ", "MEM REQ", "SIZED AT ADMISSION"]


def pod_rows(pods: list[dict[str, Any]], manifest: dict[str, dict[str, Any]]) -> list[list[str]]:
    """One row per pod: its first container's requests, `manifest → pod` where they differ,
    and whether the webhook sized it."""
    rows = []
    for pod in pods:
        container = pod["spec"]["containers"][0]
        asked = (manifest.get(container["name"]) or {}).get("requests") or {}
        requests = (container.get("resources") or {}).get("requests") or {}
        sized = POD_INFO in (pod["metadata"].get("annotations") or {})
        rows.append(
            [
                pod["metadata"]["name"],
                change("cpu", asked.get("cpu"), requests.get("cpu")),
                change("memory", asked.get("memory"), requests.get("memory")),
                "yes" if sized else "no",
            ]
        )
    return rows


def applied_rows(
    manifest: dict[str, dict[str, Any]], applied: dict[str, dict[str, Any]]
) -> list[list[str]]:
    """What kerf set (a status's lastApplied.containers) against the manifest: one row per
    container and value, BEFORE and AFTER in kubectl's notation."""
    rows = [["CONTAINER", "VALUE", "BEFORE", "AFTER"]]
    for name in sorted(applied):
        for fld in ("requests", "limits"):
            before = (manifest.get(name) or {}).get(fld) or {}
            after = applied[name].get(fld) or {}
            for resource in ordered([*before, *after]):
                old, new = before.get(resource), after.get(resource)
                rows.append(
                    [name, f"{fld}.{resource}", quantity(resource, old), quantity(resource, new)]
                )
    return rows


def counted(cells: list[str], noun: str = "pod") -> str:
    """Cells grouped with their counts, in order: `512Mi → 256Mi (1 pod), 512Mi (1 pod)`."""
    counts: dict[str, int] = {}
    for cell in cells:
        counts[cell] = counts.get(cell, 0) + 1
    return ", ".join(f"{c} ({n} {noun}{'s' if n > 1 else ''})" for c, n in counts.items())


def rollback_line(state: dict[str, Any], limits: list[str], manifest_limit: str | None) -> str:
    """A rollback-state and the pods' memory limits against the manifest's."""
    detail = f", {state['failureReason']}" if state.get("failureReason") else ""
    cells = [change("memory", manifest_limit, limit) for limit in limits]
    return (
        f"rollback-state {state.get('mode')} (turn {state.get('turn', 1)}{detail}); "
        f"memory limit {counted(cells)}"
    )


def documents(now: datetime, path: Path = EXAMPLE) -> list[dict[str, Any]]:
    """The example's objects, its relative times (`${now-1h}`) taken from `now`, as
    `kerf explain -f` takes them."""
    text = relative_times(path.read_text(), now, str(path))
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
    applied = web["lastApplied"]
    how = METHODS.get(applied.get("method"), applied.get("method"))
    story.say(f"  web: {web['phase']} {how}; its status's lastApplied, against the manifest:")
    story.table(applied_rows(await story.manifest("web"), applied["containers"]), "    ")


async def blocked(story: Story) -> None:
    """checkout's change blocked by a guardrail, and why."""
    story.step("A change blocked by a guardrail, and why")

    async def is_blocked() -> dict[str, Any] | None:
        status = await story.recommendation("checkout")
        return status if status.get("phase") == "Blocked" else None

    status = await story.until(is_blocked, "checkout to be blocked")
    condition = next(c for c in status["conditions"] if c["type"] == "Blocked")
    story.wrapped("  ", f"checkout: {status['reason']}: {condition['message']}")
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
    manifest = await story.manifest("web")
    for pod in new:
        container = pod["spec"]["containers"][0]
        asked = (manifest.get(container["name"]) or {}).get("requests")
        info = orjson.loads(pod["metadata"]["annotations"][POD_INFO])
        story.wrapped(
            "  ",
            f"{pod['metadata']['name']}: requests {changes(asked, container['resources']['requests'])}"
            f" (the manifest's → the admitted pod's; webhook fingerprint {info['fingerprint']})",
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
    story.wrapped(
        "  ", f"{name}: PodResizePending {condition['reason']}: {condition.get('message', '')}"
    )
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
            asked = cart.spec.template.spec.containers[0].resources.limits or {}
            story.wrapped(f"  {stamp:<9} ", rollback_line(state, limits, asked.get("memory")))
        for event in await story.kerf_events():
            if event["metadata"]["name"] not in self.seen and event["regarding"]["name"] == "cart":
                self.seen.add(event["metadata"]["name"])
                if event["reason"].startswith("Rollback") or event["reason"] == "Resized":
                    story.wrapped(
                        f"  {stamp:<9}   event ", f"{event['reason']}: {event['note']}", NOTE_LINES
                    )
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
        story.write(f"  {line}")


#: Example on-demand prices per core-hour and GiB-hour, for the report's monthly cost.
DEMO_PRICES = Prices(cpu_core_hour=0.031, memory_gib_hour=0.004)


async def savings(story: Story, kubeconfig: Path, now: datetime) -> None:
    """`kerf report` over the storefront, at the story's time."""
    story.step("What kerf saves")
    prices = f"--cpu-price {DEMO_PRICES.cpu_core_hour} --memory-price {DEMO_PRICES.memory_gib_hour}"
    story.say(f"  $ kerf report --kubeconfig {kubeconfig.name} {prices}")
    report = build_report(await snapshot_view(kubeconfig), now=now)
    for line in render_table(table_rows(report, DEMO_PRICES), TABLE_WIDTH).splitlines():
        story.write(f"  {line}")


async def report(story: Story, kubeconfig: Path) -> None:
    """The recommendations' table and kerf's events."""
    story.step("What kerf reports")
    await run_kubectl(story, kubeconfig, "get", "rightsizingrecommendations", "-A")
    story.say()
    events = await story.kerf_events()
    for prefix, note in event_columns(events):
        story.wrapped(prefix, note, NOTE_LINES)


def event_columns(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The header, then each event: its TYPE, REASON and OBJECT columns (a prefix, padded
    to the widest) and its NOTE, which the narration wraps under its column."""
    rows = [("TYPE", "REASON", "OBJECT", "NOTE")] + [
        (e["type"], e["reason"], e["regarding"]["name"], e["note"]) for e in events
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return [
        (
            "  "
            + "".join(f"{cell:<{width}}  " for cell, width in zip(row[:3], widths, strict=True)),
            row[3],
        )
        for row in rows
    ]
