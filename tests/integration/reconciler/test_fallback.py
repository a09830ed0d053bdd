"""When an in-place resize cannot be made (SPEC §7): node capacity filters increases,
Deferred past fallbackAfter and Infeasible fall back to eviction, a RestartContainer
resize with restarts forbidden is evicted or blocked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from kubesim.faults import FaultRule
from tests.integration.reconciler.harness import (
    Kerf,
    create,
    deployment,
    idle,
    requests_of,
    running_kerf,
    static_policy,
    status_of,
    wait_for,
)

TARGET = {"cpu": "250m", "memory": "256Mi"}


async def start(kerf: Kerf, **options: Any) -> list[dict[str, Any]]:
    await client.AppsV1Api(kerf.api).create_namespaced_deployment(
        "shop", deployment("web", **options)
    )
    await kerf.settle()
    return await kerf.pods("web")


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions") or [] if c["type"] == kind), None)


async def test_an_increase_that_does_not_fit_the_node_is_filtered(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, node_cpu="1") as kerf:
        before = await start(kerf)
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", {"cpu": "900m"}))

        async def blocked() -> dict[str, Any] | None:
            status = await status_of(kerf)
            return status if status.get("reason") == "InsufficientNodeCapacity" else None

        status = await wait_for(kerf, blocked, "the increase to be filtered")
        assert status["phase"] == "Blocked"
        pods = await kerf.pods("web")
        assert [p["metadata"]["uid"] for p in pods] == [p["metadata"]["uid"] for p in before]
        assert all(requests_of(p)["cpu"] == "100m" for p in pods)
        assert replica.service.metrics.evictions.labels("evicted")._value.get() == 0


async def test_deferred_falls_back_to_eviction_after_fallback_after(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        (pod,) = await start(kerf, replicas=1)
        name = pod["metadata"]["name"]
        kerf.sim.kubelet.resize_verdicts[("shop", name)] = ("Deferred", "node is busy")
        replica = await kerf.start_reconciler()
        policy = static_policy(
            "web",
            "web",
            TARGET,
            guardrails={"allowSingleReplicaDisruption": True, "apply": {"fallbackAfter": "10m"}},
        )
        await create(kerf, "staticpolicies", policy)

        async def deferred() -> bool:
            pods = await kerf.pods("web")
            found = condition(pods[0], "PodResizePending") if pods else None
            return bool(found and found["reason"] == "Deferred")

        await wait_for(kerf, deferred, "the resize to be Deferred")
        await kerf.sim.advance(9 * 60)
        replica.service.enqueue_all()
        await kerf.settle()
        assert [p["metadata"]["name"] for p in await kerf.pods("web")] == [name]
        await kerf.sim.advance(2 * 60)
        replica.service.enqueue_all()

        async def replaced() -> list[dict[str, Any]] | None:
            pods = await kerf.pods("web")
            ok = len(pods) == 1 and pods[0]["metadata"]["name"] != name
            return pods if ok and requests_of(pods[0]) == TARGET else None

        await wait_for(kerf, replaced, "the Deferred pod evicted and replaced sized")
        metrics = replica.service.metrics
        assert metrics.fallbacks.labels("Deferred", "evicted")._value.get() == 1

        async def fallback_event() -> bool:
            return "ResizeFallback" in [e["reason"] for e in await kerf.events()]

        await wait_for(kerf, fallback_event, "a ResizeFallback event")


async def test_infeasible_falls_back_to_eviction(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        pods = await start(kerf)
        names = [p["metadata"]["name"] for p in pods]
        for name in names:
            kerf.sim.kubelet.resize_verdicts[("shop", name)] = ("Infeasible", "too big")
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))

        async def replaced() -> bool:
            pods = await kerf.pods("web")
            return (
                len(pods) == 2
                and not {p["metadata"]["name"] for p in pods} & set(names)
                and all(requests_of(p) == TARGET for p in pods)
            )

        await wait_for(kerf, replaced, "both Infeasible pods evicted and replaced")
        assert replica.service.metrics.fallbacks.labels("Infeasible", "evicted")._value.get() == 2


RESTART_MEMORY = [
    {"resourceName": "cpu", "restartPolicy": "NotRequired"},
    {"resourceName": "memory", "restartPolicy": "RestartContainer"},
]


async def test_a_restarting_resize_with_restarts_forbidden_is_evicted(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        before = await start(kerf, resize_policy=RESTART_MEMORY)
        await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))

        async def replaced() -> bool:
            pods = await kerf.pods("web")
            uids = {p["metadata"]["uid"] for p in pods}
            return (
                len(pods) == 2
                and not uids & {p["metadata"]["uid"] for p in before}
                and all(requests_of(p) == TARGET for p in pods)
            )

        await wait_for(kerf, replaced, "evictions instead of restarting resizes")
        # Never restarted in place: the containers of the new pods never restarted.
        for pod in await kerf.pods("web"):
            assert pod["status"]["containerStatuses"][0]["restartCount"] == 0


def with_sidecar(manifest: dict[str, Any], resize_policy: list[dict[str, str]]) -> dict[str, Any]:
    """The Deployment with a native sidecar `proxy` (an init container that keeps running)."""
    sidecar = {
        "name": "proxy",
        "image": "shop/proxy:2.1",
        "restartPolicy": "Always",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "resizePolicy": resize_policy,
    }
    manifest["spec"]["template"]["spec"]["initContainers"] = [sidecar]
    return manifest


def sidecar_of(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["spec"]["initContainers"][0]


async def test_a_resize_that_restarts_a_sidecar_with_restarts_forbidden_is_evicted(
    tmp_path: Path,
) -> None:
    # A sidecar's resizePolicy counts like an app container's: its memory resize would
    # restart it, which the default strategy forbids, so the pods are replaced instead.
    async with running_kerf(tmp_path) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", with_sidecar(deployment("web"), RESTART_MEMORY)
        )
        await kerf.settle()
        before = await kerf.pods("web")
        await kerf.start_reconciler()
        policy = static_policy("web", "web", {})
        policy["spec"]["resources"]["containers"] = {"proxy": {"requests": {"memory": "96Mi"}}}
        await create(kerf, "staticpolicies", policy)

        async def replaced() -> bool:
            pods = await kerf.pods("web")
            uids = {p["metadata"]["uid"] for p in pods}
            return (
                len(pods) == 2
                and not uids & {p["metadata"]["uid"] for p in before}
                and all(sidecar_of(p)["resources"]["requests"]["memory"] == "96Mi" for p in pods)
            )

        await wait_for(kerf, replaced, "evictions instead of resizes that restart the sidecar")
        for pod in await kerf.pods("web"):
            assert [s["restartCount"] for s in pod["status"]["initContainerStatuses"]] == [0]


async def test_a_restarting_resize_without_eviction_is_blocked(tmp_path: Path) -> None:
    spec = {"inPlaceResize": {"enabled": True}, "podEviction": {"enabled": False}}
    async with running_kerf(tmp_path, strategy_spec=spec) as kerf:
        before = await start(kerf, resize_policy=RESTART_MEMORY)
        await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))

        async def blocked() -> dict[str, Any] | None:
            status = await status_of(kerf)
            return status if status.get("reason") == "NoCommonMethod" else None

        status = await wait_for(kerf, blocked, "NoCommonMethod")
        assert status["phase"] == "Blocked"
        pods = await kerf.pods("web")
        assert [p["metadata"]["uid"] for p in pods] == [p["metadata"]["uid"] for p in before]
        assert all(requests_of(p)["memory"] == "128Mi" for p in pods)


async def test_a_resize_the_api_rejects_is_counted_and_falls_back(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        before = await start(kerf)
        kerf.sim.faults.add(
            FaultRule(status=422, verbs=frozenset({"patch"}), resource="pods", subresource="resize")
        )
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))

        async def replaced() -> bool:
            pods = await kerf.pods("web")
            uids = {p["metadata"]["uid"] for p in pods}
            return (
                len(pods) == 2
                and not uids & {p["metadata"]["uid"] for p in before}
                and all(requests_of(p) == TARGET for p in pods)
            )

        await wait_for(kerf, replaced, "rejected resizes to fall back to eviction")
        metrics = replica.service.metrics
        assert metrics.resizes.labels("rejected")._value.get() == 2
        assert metrics.fallbacks.labels("ResizeRejected", "evicted")._value.get() == 2
        assert metrics.api_calls.labels("patch", "pods/resize", "422")._value.get() == 2


async def test_a_rejected_resize_is_never_sent_again_while_its_fallback_is_blocked(
    tmp_path: Path,
) -> None:
    spec = {"inPlaceResize": {"enabled": True}, "podEviction": {"enabled": False}}
    async with running_kerf(tmp_path, strategy_spec=spec) as kerf:
        before = await start(kerf)
        kerf.sim.faults.add(
            FaultRule(status=422, verbs=frozenset({"patch"}), resource="pods", subresource="resize")
        )
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))

        async def blocked() -> dict[str, Any] | None:
            status = await status_of(kerf)
            return status if status.get("reason") == "ResizeRejected" else None

        status = await wait_for(kerf, blocked, "the rejected resize's fallback to be blocked")
        conditions = {c["type"]: c for c in status["conditions"]}
        assert "eviction is not allowed" in conditions["Blocked"]["message"]
        assert "422" in conditions["Blocked"]["message"]
        for _ in range(3):  # more passes over the same proposal send nothing new
            replica.service.enqueue_all()
            await wait_for(kerf, idle(replica), "the passes to finish")
        metrics = replica.service.metrics
        assert metrics.api_calls.labels("patch", "pods/resize", "422")._value.get() == 1
        assert metrics.evictions.labels("evicted")._value.get() == 0
        pods = await kerf.pods("web")
        assert [p["metadata"]["uid"] for p in pods] == [p["metadata"]["uid"] for p in before]


async def test_a_resize_answered_429_is_retried_in_place_never_evicted(tmp_path: Path) -> None:
    # 429 means "not now" (issue 15 part 6: seen to evict the pod): the pass fails, the
    # queue backs off, the same resize goes in later; no pod is replaced.
    async with running_kerf(tmp_path) as kerf:
        before = await start(kerf)
        kerf.sim.faults.add(
            FaultRule(
                status=429,
                times=3,
                verbs=frozenset({"patch"}),
                resource="pods",
                subresource="resize",
            )
        )
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))

        async def resized() -> bool:
            pods = await kerf.pods("web")
            return len(pods) == 2 and all(requests_of(p) == TARGET for p in pods)

        await wait_for(kerf, resized, "the resizes to go in after the 429s")
        metrics = replica.service.metrics
        assert metrics.api_calls.labels("patch", "pods/resize", "429")._value.get() == 3
        assert metrics.pass_failures.labels("429")._value.get() == 3
        assert metrics.evictions.labels("evicted")._value.get() == 0
        pods = await kerf.pods("web")
        assert [p["metadata"]["uid"] for p in pods] == [p["metadata"]["uid"] for p in before]
