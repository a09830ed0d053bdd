"""Rollback monitoring end to end (SPEC §8, seed rollback-policies.txt): kubesim's usage
model makes a bad downsize OOM-kill its pods; the real reconciler monitors, rolls back,
backs off, retries and gives up — in place and by eviction — with the real webhook sizing
replacement pods."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from kubernetes_asyncio import client

from app.model.annotations import PAUSE_UNTIL, ROLLBACK_STATE
from app.model.workloads import parse_time
from kubesim.usage import USAGE
from tests.cluster import GROUP, VERSION, custom
from tests.integration.reconciler.harness import (
    MERGE_PATCH,
    Kerf,
    RunningReconciler,
    create,
    quiet,
    running_kerf,
    static_policy,
    status_of,
    wait_for,
)

#: the longest files start first (tests/conftest.py)
pytestmark = pytest.mark.early
MANIFEST = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
EVICT_ONLY = {"inPlaceResize": {"enabled": False}, "podEviction": {"enabled": True}}


def deployment(replicas: int = 2, memory_use: str = "300Mi") -> dict[str, Any]:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        USAGE: orjson.dumps({"app": {"cpu": "50m", "memory": memory_use}}).decode()
                    },
                },
                "spec": {
                    "containers": [{"name": "app", "image": "shop/web:1.4", "resources": MANIFEST}]
                },
            },
        },
    }


def rollback_policy(
    target: str = "manifest", threshold: int = 50, attempts: int = 2, reopen: bool = True
) -> dict[str, Any]:
    return {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "RollbackPolicy",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "monitoringPeriod": "5m",
            "rollbackTarget": target,
            "adoptionThresholdPercent": threshold,
            "backoff": {"timePeriod": "1m", "multiplyByTurn": 2, "maxAttempts": attempts},
            "enableMonitoringReopen": reopen,
        },
    }


def downsize(memory_limit: str = "256Mi") -> dict[str, Any]:
    """Memory limit 512Mi -> `memory_limit` (the app uses 300Mi)."""
    return static_policy(
        "web",
        "web",
        {"memory": "200Mi"},
        limits={"memory": memory_limit},
        guardrails={"cooldown": "1m", "allowSingleReplicaDisruption": True},
    )


async def state_of(kerf: Kerf) -> dict[str, Any]:
    web = await client.AppsV1Api(kerf.api).read_namespaced_deployment("web", "shop")
    text = (web.metadata.annotations or {}).get(ROLLBACK_STATE)
    return orjson.loads(text) if text else {}


async def drive(
    kerf: Kerf, replica: RunningReconciler, mode: str, *, step_s: float = 30, steps: int = 40
) -> dict[str, Any]:
    """Move the simulated clock on in steps (the reconciler looks at everything after each)
    until the rollback state reaches `mode` ("never": just run the steps)."""
    for _ in range(steps):
        state = await state_of(kerf)
        if state.get("mode") == mode:
            return state
        await kerf.sim.advance(step_s)
        await quiet(kerf, replica)
    if mode == "never":
        return await state_of(kerf)
    raise AssertionError(f"rollback state never reached {mode}: {await state_of(kerf)}")


async def limits_of(kerf: Kerf) -> list[str]:
    return [
        p["spec"]["containers"][0]["resources"]["limits"]["memory"] for p in await kerf.pods("web")
    ]


async def reasons(kerf: Kerf) -> list[str]:
    """Event reasons in the order they were recorded."""
    events = sorted(await kerf.events(), key=lambda e: int(e["metadata"]["resourceVersion"]))
    return [e["reason"] for e in events]


async def start(kerf: Kerf, replicas: int = 2, memory_use: str = "300Mi") -> RunningReconciler:
    await client.AppsV1Api(kerf.api).create_namespaced_deployment(
        "shop", deployment(replicas, memory_use)
    )
    await kerf.settle()
    return await kerf.start_reconciler()


async def a_change_that_succeeds(
    kerf: Kerf, reopen: bool = True
) -> tuple[RunningReconciler, dict[str, Any]]:
    """A downsize the app's usage fits, monitored to `monitoringSucceeded` (so a
    `lastSuccessful` rollback has a state to restore)."""
    replica = await start(kerf, memory_use="100Mi")
    await create(kerf, "rollbackpolicies", rollback_policy(target="lastSuccessful", reopen=reopen))
    await create(kerf, "staticpolicies", downsize())
    await drive(kerf, replica, "monitoring", step_s=1)
    return replica, await drive(kerf, replica, "monitoringSucceeded")


@pytest.mark.parametrize("strategy", [None, EVICT_ONLY], ids=["in-place", "eviction"])
async def test_a_healthy_change_is_monitored_and_succeeds(
    tmp_path: Path, strategy: dict[str, Any] | None
) -> None:
    async with running_kerf(tmp_path, strategy_spec=strategy) as kerf:
        replica, state = await a_change_that_succeeds(kerf)
        assert state["lastSuccessfulState"]["containers"]["app"]["limits"]["memory"] == "256Mi"
        assert await limits_of(kerf) == ["256Mi", "256Mi"]
        found = await reasons(kerf)
        assert "RollbackMonitoringStarted" in found and "RollbackMonitoringSucceeded" in found


@pytest.mark.parametrize("strategy", [None, EVICT_ONLY], ids=["in-place", "eviction"])
async def test_an_oom_killing_downsize_rolls_back_backs_off_and_fails_permanently(
    tmp_path: Path, strategy: dict[str, Any] | None
) -> None:
    async with running_kerf(tmp_path, strategy_spec=strategy) as kerf:
        replica = await start(kerf)
        await create(kerf, "rollbackpolicies", rollback_policy(attempts=2))
        await create(kerf, "staticpolicies", downsize())
        await drive(kerf, replica, "monitoring", step_s=1)
        state = await drive(kerf, replica, "failedPermanent", step_s=20, steps=80)
        assert (state["turn"], state["failureReason"]) == (2, "oomKilled")
        record = await kerf.recommendation("deployment-web")
        assert record["status"]["phase"] == "Failed"
        # What `kubectl get rsrec` shows: why it failed, not the last decision's reason.
        assert record["status"]["summary"]["reason"] == "RolledBack OOMKilled"
        assert record["status"]["lastRollback"]["resources"] == ["memory"]
        # The manifest's values are back, and stay: the failed fingerprint is not retried.
        assert await limits_of(kerf) == ["512Mi", "512Mi"]
        found = [r for r in await reasons(kerf) if r.startswith("Rollback")]
        assert found == [
            "RollbackMonitoringStarted",
            "RollbackRollingBackStarted",
            "RollbackBackingOff",
            "RollbackMonitoringStarted",
            "RollbackRollingBackStarted",
            "RollbackBackingOff",
            "RollbackFailedPermanent",
        ]
        await drive(kerf, replica, "never", steps=5)
        assert await limits_of(kerf) == ["512Mi", "512Mi"]  # still: never retried
        await replica.service.write_policy_status()

        async def counted() -> dict[str, Any] | None:
            policy = await custom(kerf.api).get_namespaced_custom_object(
                GROUP, VERSION, "shop", "rollbackpolicies", "web"
            )
            status = policy.get("status") or {}
            return status if status.get("failedPermanent") == 1 else None

        status = await wait_for(kerf, counted, "the RollbackPolicy's counters")
        assert (status["monitoring"], status["rolledBack"]) == (0, 0)


@pytest.mark.parametrize("strategy", [None, EVICT_ONLY], ids=["in-place", "eviction"])
async def test_last_successful_missing_fails_permanently(
    tmp_path: Path, strategy: dict[str, Any] | None
) -> None:
    async with running_kerf(tmp_path, strategy_spec=strategy) as kerf:
        replica = await start(kerf)
        await create(kerf, "rollbackpolicies", rollback_policy(target="lastSuccessful"))
        await create(kerf, "staticpolicies", downsize())
        state = await drive(kerf, replica, "failedPermanent")
        assert state["failureReason"] == "rollbackRecommendationUnavailable"


@pytest.mark.parametrize("strategy", [None, EVICT_ONLY], ids=["in-place", "eviction"])
@pytest.mark.parametrize(("threshold", "mode"), [(20, "monitoringSucceeded"), (100, "backingOff")])
async def test_adoption_threshold_over_five_replicas(
    tmp_path: Path, strategy: dict[str, Any] | None, threshold: int, mode: str
) -> None:
    async with running_kerf(
        tmp_path, node_cpu="8", node_memory="16Gi", strategy_spec=strategy
    ) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment(5, memory_use="100Mi")
        )
        await client.PolicyV1Api(kerf.api).create_namespaced_pod_disruption_budget(
            "shop",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
            },
        )
        await kerf.settle()
        # One pod keeps its old values: in place, the node defers its resize for good; by
        # eviction, the pod is paused (it is never evicted).
        first = (await kerf.pods("web"))[0]["metadata"]["name"]
        if strategy is None:
            kerf.sim.kubelet.resize_verdicts[("shop", first)] = ("Deferred", "busy")
        else:
            await kerf.core.patch_namespaced_pod(
                first, "shop", {"metadata": {"annotations": {PAUSE_UNTIL: "infinite"}}}
            )
        replica = await kerf.start_reconciler()
        await create(kerf, "rollbackpolicies", rollback_policy(threshold=threshold))
        policy = downsize()
        policy["spec"]["guardrails"]["apply"] = {"fallbackAfter": "1h"}
        await create(kerf, "staticpolicies", policy)
        await drive(kerf, replica, "monitoring", step_s=1)
        state = await drive(kerf, replica, mode, step_s=10)
        if threshold == 100:  # 4 of 5 adopted: not enough, rolled back
            assert state["failureReason"] == "adoptionThresholdNotMet"
            assert "4 of 5 pod(s)" in state["failureMessage"]
            assert "adoption threshold of 100%" in state["failureMessage"]
        else:  # 4 of 5 adopted: at least 20 %
            assert "failureReason" not in state
        if strategy is not None and threshold == 20:
            # Four pods replaced one at a time under the PDB, the paused one kept.
            assert first in [p["metadata"]["name"] for p in await kerf.pods("web")]
            assert sorted(await limits_of(kerf)) == ["256Mi"] * 4 + ["512Mi"]


@pytest.mark.parametrize("strategy", [None, EVICT_ONLY], ids=["in-place", "eviction"])
async def test_a_restarted_reconciler_resumes_monitoring(
    tmp_path: Path, strategy: dict[str, Any] | None
) -> None:
    async with running_kerf(tmp_path, strategy_spec=strategy) as kerf:
        first = await start(kerf)
        await create(kerf, "rollbackpolicies", rollback_policy(attempts=2))
        await create(kerf, "staticpolicies", downsize())
        started = await drive(kerf, first, "monitoring", step_s=1)
        await first.kill()
        second = await kerf.start_reconciler(identity="second")
        await wait_for(kerf, _leading(second), "the second replica to lead")
        backing = await drive(kerf, second, "backingOff", step_s=10)
        # The window the first replica opened, resumed: it ended (and the rollback began)
        # at the first look after it was due (one clock step), not a period after the restart.
        due, began = parse_time(started["expiryAt"]), parse_time(backing["rollbackStartedAt"])
        assert due is not None and began is not None
        assert due <= began < due + timedelta(seconds=10)
        assert backing["failureReason"] == "oomKilled"
        await second.shutdown()
        third = await kerf.start_reconciler(identity="third")
        await wait_for(kerf, _leading(third), "the third replica to lead")
        await kerf.settle()
        assert (await state_of(kerf))["expiryAt"] == backing["expiryAt"]  # backoff resumed
        for _ in range(20):
            state = await drive(kerf, third, "never", step_s=30, steps=1)
            if state["turn"] == 2:
                break
        assert state["turn"] == 2


def _leading(replica: RunningReconciler) -> Any:
    async def check() -> bool:
        return replica.service.leading and replica.service.view.synced

    return check


@pytest.mark.parametrize("strategy", [None, EVICT_ONLY], ids=["in-place", "eviction"])
@pytest.mark.parametrize(("reopen", "mode"), [(True, "monitoring"), (False, "monitoringSucceeded")])
async def test_a_replacement_pod_reopens_a_succeeded_turn_only_when_enabled(
    tmp_path: Path, strategy: dict[str, Any] | None, reopen: bool, mode: str
) -> None:
    async with running_kerf(tmp_path, strategy_spec=strategy) as kerf:
        replica, succeeded = await a_change_that_succeeds(kerf, reopen)
        # A newer replacement pod, admitted with the same recommendation and resources.
        await kerf.sim.advance(60)
        first = (await kerf.pods("web"))[0]["metadata"]["name"]
        await kerf.core.delete_namespaced_pod(first, "shop", grace_period_seconds=0)
        await quiet(kerf, replica)
        state = await drive(kerf, replica, "never", step_s=1, steps=3)
        assert state["mode"] == mode
        if reopen:
            assert state["startedAt"] != succeeded.get("startedAt")
        assert await limits_of(kerf) == ["256Mi", "256Mi"]


async def update_policy(kerf: Kerf, plural: str, name: str, spec: dict[str, Any]) -> None:
    """Merge-patch a kerf custom object's spec and wait until the webhook's view has the
    new version (pods created next are admitted with it)."""
    patched = await custom(kerf.api).patch_namespaced_custom_object(
        GROUP, VERSION, "shop", plural, name, {"spec": spec}, _content_type=MERGE_PATCH
    )
    version = patched["metadata"]["resourceVersion"]
    assert kerf.webhook is not None
    view = kerf.webhook.view

    async def seen() -> bool:
        kinds = {"staticpolicies": "StaticPolicy", "rollbackpolicies": "RollbackPolicy"}
        obj = view.kerf_object(kinds[plural], "shop", name)
        return obj is not None and obj.metadata.resource_version == version

    await wait_for(kerf, seen, f"the webhook to see {plural}/{name} {version}")


async def scale(kerf: Kerf, replicas: int) -> None:
    await client.AppsV1Api(kerf.api).patch_namespaced_deployment_scale(
        "web", "shop", {"spec": {"replicas": replicas}}
    )
    await kerf.settle()


def resources_of(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["spec"]["containers"][0]["resources"]


@pytest.mark.parametrize("strategy", [None, EVICT_ONLY], ids=["in-place", "eviction"])
async def test_an_unschedulable_change_rolls_back_to_the_last_successful_state(
    tmp_path: Path, strategy: dict[str, Any] | None
) -> None:
    async with running_kerf(tmp_path, strategy_spec=strategy) as kerf:
        replica, _ = await a_change_that_succeeds(kerf)
        # The second change asks more CPU than the node has left (within its allocatable,
        # else it would be Infeasible and never applied): the running pods keep their
        # values (node capacity), the pod a scale-up adds is sized with it and stays Pending.
        more_cpu = {"resources": {"containers": {"app": {"requests": {"cpu": "3900m"}}}}}
        await update_policy(kerf, "staticpolicies", "web", more_cpu)
        await scale(kerf, 3)
        pending = [p for p in await kerf.pods("web") if p["status"].get("phase") == "Pending"]
        assert [resources_of(p)["requests"]["cpu"] for p in pending] == ["3900m"]
        await drive(kerf, replica, "monitoring", step_s=1)
        # The Pending pod cannot be resized: it is replaced, and its replacement admitted
        # with the restored values runs; the rollback ends as soon as every pod has them,
        # long before its deadline (one monitoring period).
        backing = await drive(kerf, replica, "backingOff", step_s=10, steps=60)
        assert backing["failureReason"] == "unschedulable"
        restored_in = parse_time(backing["startedAt"]) - parse_time(backing["rollbackStartedAt"])
        assert restored_in < timedelta(minutes=5)  # restored, not given up at the deadline
        pods = await kerf.pods("web")
        assert [p["status"]["phase"] for p in pods] == ["Running"] * 3
        assert [resources_of(p) for p in pods] == [
            {"requests": {"cpu": "100m", "memory": "200Mi"}, "limits": {"memory": "256Mi"}}
        ] * 3
        found = await kerf.events()
        evicted = [e["note"] for e in found if e["reason"] == "Evicted"]
        assert any(pending[0]["metadata"]["name"] in n and "restored" in n for n in evicted)
        backed = next(e["note"] for e in found if e["reason"] == "RollbackBackingOff")
        assert "restored; backing off" in backed
        rolled_back = await status_of(kerf)
        assert (rolled_back["phase"], rolled_back["summary"]["reason"]) == (
            "RolledBack",
            "Unschedulable",
        )


def filler(memory: str) -> dict[str, Any]:
    """A Deployment kerf does not size that takes `memory` of the node it lands on."""
    labels = {"app": "filler"}
    container = {
        "name": "app",
        "image": "shop/filler:1",
        "resources": {"requests": {"memory": memory}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "filler", "namespace": "shop", "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


@pytest.mark.parametrize("strategy", [None, EVICT_ONLY], ids=["in-place", "eviction"])
async def test_a_restore_that_does_not_fit_its_node_moves_the_pod(
    tmp_path: Path, strategy: dict[str, Any] | None
) -> None:
    async with running_kerf(tmp_path, node_memory="2Gi", strategy_spec=strategy) as kerf:
        replica = await start(kerf)
        await create(kerf, "rollbackpolicies", rollback_policy())
        policy = downsize()
        policy["spec"]["resources"]["containers"]["app"]["requests"]["memory"] = "128Mi"
        await create(kerf, "staticpolicies", policy)
        await drive(kerf, replica, "monitoring", step_s=1)
        # The memory the downsize freed on node-a is taken (64Mi left); a new node has room.
        await client.AppsV1Api(kerf.api).create_namespaced_deployment("shop", filler("1728Mi"))
        await kerf.settle()
        assert [p["spec"]["nodeName"] for p in await kerf.pods("filler")] == ["node-a"]
        await kerf.sim.add_node("node-b", cpu="4", memory="2Gi")
        # An OOM-looping app is unready: that must not hold back the evictions that fix it.
        for pod in await kerf.pods("web"):
            kerf.sim.kubelet.set_ready("shop", pod["metadata"]["name"], "app", False)
        await kerf.settle()
        # The restore raises memory back to 256Mi: node-a has no room for it, so each pod is
        # replaced (scheduled where it fits) rather than resized into a deferral.
        backing = await drive(kerf, replica, "backingOff", step_s=10, steps=60)
        assert backing["failureReason"] == "oomKilled"
        restored_in = parse_time(backing["startedAt"]) - parse_time(backing["rollbackStartedAt"])
        assert restored_in < timedelta(minutes=5)  # restored, not given up at the deadline
        pods = await kerf.pods("web")
        assert [p["status"]["phase"] for p in pods] == ["Running"] * 2
        assert [resources_of(p)["requests"]["memory"] for p in pods] == ["256Mi"] * 2
        assert "node-b" in {p["spec"]["nodeName"] for p in pods}
        found = await kerf.events()
        assert "ResizeDeferred" not in {e["reason"] for e in found}
        assert "restored; backing off" in next(
            e["note"] for e in found if e["reason"] == "RollbackBackingOff"
        )
