"""The demo's story: a storefront running oversized, then kerf installed on it."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import yaml
from kubernetes_asyncio import client

from app.kube.leadertimings import LeaderTimings
from app.runtime.jsonlog import configure_logging
from demo.narration import (
    POLICY_KINDS,
    ROLLBACK,
    ROLLBACK_TITLE,
    ROOT,
    DemoFailed,
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
from kubesim.clock import FakeClock
from kubesim.sim import Simulator
from kubesim.testing import running_sim
from reconciler.execution import ExecutionConfig
from reconciler.main import Options, build_service
from reconciler.service import ServiceConfig, run_cluster
from webhook.local import running_local_webhook, webhook_configuration

CRD_DIR = ROOT / "manifests" / "crds"
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
            story = Story(api, out)
            await _cluster(story, sim, start)
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
                    await _policies(story, sim, start)
                    await in_place(story)
                    await blocked(story)
                    await admission(story, lambda _before: sim.settle())
                    await _fallback(story, sim, service)
                    await _rollback(story, sim, service)
                    await report(story, sim.kubeconfig_path)
                    await savings(story, sim.kubeconfig_path, clock.now())
                finally:
                    stop.set()
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(task, 10)
    story.step("Done: kubesim, the webhook and the reconciler are stopped.")
    return 0


async def _true(value: bool) -> bool:
    return value


async def _cluster(story: Story, sim: Simulator, start: datetime) -> None:
    story.step("A cluster (kubesim) with a storefront whose pods ask for more than they use")
    extensions = client.ApiextensionsV1Api(story.api)
    for path in sorted(CRD_DIR.glob("rightsizing.kubex.ai_*.yaml")):
        await extensions.create_custom_resource_definition(yaml.safe_load(path.read_text()))
    await sim.add_namespace("kerf-system")
    await sim.add_node("node-a", cpu="8", memory="16Gi")
    for doc in documents(start):
        if doc["kind"] not in POLICY_KINDS:
            await story.create(doc)
    await sim.settle()
    await story.show_pods("web", "api", "checkout", "search", "cart")


async def _policies(story: Story, sim: Simulator, start: datetime) -> None:
    story.step(
        "Policies applied: web by a StaticPolicy, api by recommendations, checkout and search by StaticPolicies"
    )
    # The node defers in-place resizes of one search pod, as a busy node would.
    search = (await story.pods("search"))[0]["metadata"]["name"]
    sim.kubelet.resize_verdicts[("shop", search)] = ("Deferred", "the node is busy")
    docs = documents(start)
    await create_all(story, [doc for doc in docs if doc["kind"] in POLICY_KINDS])


async def _fallback(story: Story, sim: Simulator, service: Any) -> None:
    name = await deferred_pod(story)
    story.say(
        "  ... 11 minutes later (apply.fallbackAfter is 10m; the demo moves the simulated clock)"
    )
    await sim.advance(11 * 60)
    await asyncio.sleep(0.5)  # the webhook renews its Lease at the new time first
    service.enqueue_all()
    await replaced(story, name)


async def _rollback(story: Story, sim: Simulator, service: Any) -> None:
    story.step(ROLLBACK_TITLE)
    await create_all(story, documents(sim.clock.now(), ROLLBACK))
    start = sim.clock.now()
    watch = RollbackWatch(story)
    await watch.begin()
    for _ in range(60):
        elapsed = (sim.clock.now() - start).total_seconds()
        if await watch.observe(stamp(elapsed)) == "failedPermanent":
            break
        await sim.advance(30)
        await asyncio.sleep(0.2)
        service.enqueue_all()
        await story.until(lambda: _true(service.queue.idle), "the reconciler to settle")
    if watch.mode != "failedPermanent":
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
