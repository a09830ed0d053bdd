"""Running it for real: leader fail-over and graceful hand-over, a replica killed in the
middle of a change, API faults, and a steady cluster that costs no write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from kubesim.faults import FaultRule
from reconciler.metrics import ReconcilerMetrics
from tests.integration.reconciler.harness import (
    Kerf,
    RunningReconciler,
    create,
    deployment,
    quiet,
    requests_of,
    resync,
    running_kerf,
    static_policy,
    wait_for,
)

TARGET = {"cpu": "250m", "memory": "256Mi"}
WRITES = {"patch", "create", "update"}


def count(metrics: ReconcilerMetrics, *, verbs: set[str], exclude: str = "leases") -> float:
    """API calls the replica made with these verbs (all resources but `exclude`)."""
    total = 0.0
    for metric in metrics.api_calls.collect():
        for sample in metric.samples:
            labels = sample.labels
            if (
                sample.name.endswith("_total")
                and labels["verb"] in verbs
                and labels["resource"] != exclude
            ):
                total += sample.value
    return total


def resizes(replica: RunningReconciler) -> float:
    return replica.service.metrics.resizes.labels("requested")._value.get()


async def converged(kerf: Kerf) -> bool:
    pods = await kerf.pods("web")
    record = await kerf.recommendation("deployment-web")
    phase = ((record or {}).get("status") or {}).get("phase")
    return len(pods) == 2 and all(requests_of(p) == TARGET for p in pods) and phase == "Applied"


async def start_web(kerf: Kerf) -> None:
    await client.AppsV1Api(kerf.api).create_namespaced_deployment(
        "shop", deployment("web", replicas=2)
    )
    await kerf.settle()


async def leader_of(kerf: Kerf, replicas: list[RunningReconciler]) -> RunningReconciler:
    async def leading() -> list[RunningReconciler]:
        return [r for r in replicas if r.service.leading]

    found = await wait_for(kerf, leading, "a leader")
    assert len(found) == 1
    return found[0]


async def test_a_follower_takes_over_when_the_leader_dies(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await start_web(kerf)
        a = await kerf.start_reconciler(identity="a")
        b = await kerf.start_reconciler(identity="b")
        leader = await leader_of(kerf, [a, b])
        follower = b if leader is a else a
        await wait_for(kerf, _synced(follower), "the follower's view to be warm")
        await leader.kill()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))
        # Lease duration 2 s here (10 s by default): the follower takes over after it.
        await wait_for(kerf, lambda: converged(kerf), "the follower to apply the change")
        assert follower.service.leading
        assert resizes(follower) == 2


async def test_a_graceful_stop_hands_over_at_once(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await start_web(kerf)
        a = await kerf.start_reconciler(identity="a")
        b = await kerf.start_reconciler(identity="b")
        leader = await leader_of(kerf, [a, b])
        follower = b if leader is a else a
        assert await leader.shutdown() == 0
        lease = await client.CoordinationV1Api(kerf.api).read_namespaced_lease(
            "kerf-reconciler", "kerf-system"
        )
        assert lease.spec.holder_identity in ("", None, "a" if follower is a else "b")
        await wait_for(kerf, _leading(follower), "the follower to lead", timeout_s=5)


def _synced(replica: RunningReconciler) -> Any:
    async def check() -> bool:
        return replica.service.view.synced

    return check


def _leading(replica: RunningReconciler) -> Any:
    async def check() -> bool:
        return replica.service.leading

    return check


async def test_a_replica_killed_mid_change_neither_repeats_nor_forgets(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await start_web(kerf)
        # Status writes fail: the first replica resizes, then cannot record it.
        fault = kerf.sim.faults.add(
            FaultRule(status=500, verbs=frozenset({"patch"}), subresource="status")
        )
        first = await kerf.start_reconciler(identity="first")
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))

        async def one_resized() -> bool:
            return resizes(first) >= 1

        await wait_for(kerf, one_resized, "a resize by the first replica")
        await first.kill()
        kerf.sim.faults.remove(fault)
        second = await kerf.start_reconciler(identity="second")
        await wait_for(kerf, lambda: converged(kerf), "the second replica to finish", 15)
        # Every pod resized exactly once over both replicas; the change is recorded.
        assert resizes(first) + resizes(second) == 2
        record = await kerf.recommendation("deployment-web")
        assert record["status"]["lastApplied"]["method"] == "inPlace"
        assert record["status"]["lastApplied"]["containers"]["app"]["requests"] == TARGET


async def test_api_faults_lose_and_double_nothing(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await start_web(kerf)
        # The test's own write goes in before the faults; the reconciler meets them all.
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))
        faults = kerf.sim.faults
        faults.add(FaultRule(status=500, fraction=0.3, verbs=frozenset({"patch", "create"})))
        # A change costs only a few writes, so 30 % may miss them all: one resize and one
        # event's create fail for certain.
        faults.add(FaultRule(status=500, times=1, verbs=frozenset({"patch"}), subresource="resize"))
        faults.add(FaultRule(status=500, times=1, verbs=frozenset({"create"}), resource="events"))
        faults.conflict(times=2, resource="pods")
        faults.gone(times=3)
        faults.slow(0.05, verbs={"list", "get"}, times=20)
        replica = await kerf.start_reconciler()
        faults.drop_watches()
        await wait_for(kerf, lambda: converged(kerf), "convergence despite faults", 20)
        assert resizes(replica) == 2
        assert replica.service.metrics.evictions.labels("evicted")._value.get() == 0
        codes = {
            s.labels["code"]
            for m in replica.service.metrics.api_calls.collect()
            for s in m.samples
            if s.name.endswith("_total")
        }
        assert "500" in codes  # the faults were met, not dodged


async def test_a_steady_cluster_makes_no_write_on_resync(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await start_web(kerf)
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))
        await wait_for(kerf, lambda: converged(kerf), "convergence")
        await quiet(kerf, replica)  # follow-ups of the last change
        metrics = replica.service.metrics
        writes = count(metrics, verbs=WRITES)
        passes = replica.service.passes
        for _ in range(3):
            await resync(kerf, replica)
        assert replica.service.passes >= passes + 3
        assert count(metrics, verbs=WRITES) == writes
        # Nothing changed: the resyncs did not decide again ...
        assert metrics.unchanged_passes._value.get() >= 3
        decided = sum(
            s.value
            for m in metrics.decisions.collect()
            for s in m.samples
            if s.name.endswith("_total")
        )
        # ... until the horizon passed: then a full pass decides, and still writes nothing.
        await kerf.sim.advance(11 * 60)
        await resync(kerf, replica)
        after = sum(
            s.value
            for m in metrics.decisions.collect()
            for s in m.samples
            if s.name.endswith("_total")
        )
        assert after == decided + 2  # both pods decided again
        assert count(metrics, verbs=WRITES) == writes
