"""An eviction's Event told exactly once when its replica dies, or loses the leader Lease,
between the eviction and the status write after it (issue 15 part 6): the eviction is
recorded in the status first (`pendingEviction`), and whoever finds the record tells its
Events if the pod went. The same gap after an in-place resize: the values on the pod tell
the successor, once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from app.model.apitime import micro_time
from kubesim.faults import FaultRule
from tests.integration.reconciler.harness import (
    Kerf,
    RunningReconciler,
    create,
    deployment,
    idle,
    requests_of,
    running_kerf,
    static_policy,
    status_of,
    wait_for,
)

EVICT_ONLY = {"inPlaceResize": {"enabled": False}, "podEviction": {"enabled": True}}
TARGET = {"cpu": "250m", "memory": "256Mi"}
EVICTION = dict(verbs={"create"}, resource="pods", subresource="eviction")
EVICTION_WRITE = dict(verbs={"create"}, subresource="eviction")


def policy() -> dict[str, Any]:
    return static_policy("web", "web", TARGET, guardrails={"cooldown": "0s"})


async def kerf_events(kerf: Kerf) -> list[dict[str, Any]]:
    return [
        e for e in await kerf.events() if e.get("reportingController", "").startswith("rightsizing")
    ]


async def start_web(kerf: Kerf) -> list[dict[str, Any]]:
    await client.AppsV1Api(kerf.api).create_namespaced_deployment(
        "shop", deployment("web", replicas=2)
    )
    await kerf.settle()
    return await kerf.pods("web")


def settled(kerf: Kerf, reasons: list[str]) -> Any:
    """Both pods run the target, the status has nothing left to tell or to settle, and the
    kerf Events are exactly `reasons` (in any order)."""

    async def check() -> bool:
        pods = await kerf.pods("web")
        status = await status_of(kerf)
        told = sorted(e["reason"] for e in await kerf_events(kerf))
        return (
            len(pods) == 2
            and all(requests_of(p) == TARGET for p in pods)
            and status.get("phase") == "Applied"
            and not status.get("pendingEvents")
            and "pendingEviction" not in status
            and told == sorted(reasons)
        )

    return check


def evicted_under_way(kerf: Kerf, before: list[dict[str, Any]]) -> Any:
    """A check: one of `before`'s pods is being evicted, and the status records it."""
    uids = {p["metadata"]["uid"] for p in before}

    async def check() -> dict[str, Any] | None:
        live = {p["metadata"]["uid"] for p in await kerf.pods("web")}
        intent = (await status_of(kerf)).get("pendingEviction")
        return intent if intent and uids - live else None

    return check


async def finish(kerf: Kerf, replica: RunningReconciler, reasons: list[str]) -> None:
    check = settled(kerf, reasons)
    await wait_for(kerf, check, f"the Events {reasons}, each once")
    await wait_for(kerf, idle(replica), "the reconciler to settle")
    assert await check()  # nothing told twice after it settled either


async def test_a_replica_killed_between_the_eviction_and_its_status_write(
    tmp_path: Path,
) -> None:
    async with running_kerf(tmp_path, strategy_spec=EVICT_ONLY) as kerf:
        before = await start_web(kerf)
        # The eviction goes in; its answer never reaches the first replica.
        release = kerf.sim.faults.hold_answers(**EVICTION)
        first = await kerf.start_reconciler(identity="first")
        await create(kerf, "staticpolicies", policy())
        intent = await wait_for(kerf, evicted_under_way(kerf, before), "the first eviction")
        await first.kill()
        release.set()
        assert first.service.metrics.evictions.labels("evicted")._value.get() == 0
        second = await kerf.start_reconciler(identity="second")
        await finish(kerf, second, ["Evicted", "Evicted"])
        told = {e["metadata"]["name"]: e for e in await kerf_events(kerf)}
        (recorded,) = intent["events"]
        event = told[recorded["name"]]  # the successor told the first replica's eviction
        assert intent["podName"] in event["note"]
        assert event["eventTime"] == recorded["eventTime"]  # when it happened
        status = await status_of(kerf)
        assert status["lastApplied"]["method"] == "evict"


async def test_a_replica_that_loses_the_lease_between_the_eviction_and_its_status_write(
    tmp_path: Path,
) -> None:
    async with running_kerf(tmp_path, strategy_spec=EVICT_ONLY) as kerf:
        before = await start_web(kerf)
        release = kerf.sim.faults.hold_answers(**EVICTION)
        first = await kerf.start_reconciler(identity="first")
        await create(kerf, "staticpolicies", policy())
        await wait_for(kerf, evicted_under_way(kerf, before), "the first eviction")
        # Another replica takes the Lease while the first waits for the answer.
        leases = client.CoordinationV1Api(kerf.api)
        lease = await leases.read_namespaced_lease("kerf-reconciler", "kerf-system")
        lease.spec.holder_identity = "second"
        lease.spec.renew_time = micro_time(datetime.now(UTC))
        await leases.replace_namespaced_lease("kerf-reconciler", "kerf-system", lease)
        second = await kerf.start_reconciler(identity="second")
        metrics = first.service.metrics

        async def stepped_down() -> bool:
            return metrics.leader._value.get() == 0

        await wait_for(kerf, stepped_down, "the first replica to see it lost the Lease")
        release.set()
        # The first write after the eviction: its Event, told before the status.
        withheld = metrics.writes_withheld.labels("events", "")

        async def fenced() -> bool:
            return withheld._value.get() >= 1

        await wait_for(kerf, fenced, "the first replica's next write to be withheld")
        await finish(kerf, second, ["Evicted", "Evicted"])
        assert metrics.evictions.labels("evicted")._value.get() == 1


async def test_an_eviction_whose_answer_is_lost_is_told_once(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, strategy_spec=EVICT_ONLY) as kerf:
        await start_web(kerf)
        kerf.sim.faults.after_commit(times=1, **EVICTION)
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", policy())
        await finish(kerf, replica, ["Evicted", "Evicted"])
        codes = replica.service.metrics.api_calls
        assert codes.labels("create", "pods/eviction", "500")._value.get() == 1


def held_eviction_refusal(kerf: Any) -> tuple[asyncio.Event, FaultRule]:
    """The next eviction is refused (500) before it is carried out, and its answer is held
    until the returned event is set: (that event, the rule)."""
    release = asyncio.Event()
    rule = kerf.sim.faults.add(
        FaultRule(
            status=500,
            times=1,
            verbs=frozenset({"create"}),
            subresource="eviction",
            release=release,
        )
    )
    return release, rule


async def an_eviction_left_refused(kerf: Kerf) -> dict[str, Any]:
    """The first replica records an eviction, which is refused before it is carried out,
    and is killed before it hears so (it makes that one attempt and no other): the
    record it leaves."""
    release, rule = held_eviction_refusal(kerf)
    first = await kerf.start_reconciler(identity="first")
    await create(kerf, "staticpolicies", policy())

    async def refused() -> dict[str, Any] | None:
        intent = (await status_of(kerf)).get("pendingEviction")
        return intent if intent and rule.times == 0 else None

    intent = await wait_for(kerf, refused, "an eviction recorded, then asked for")
    await first.kill()
    release.set()
    return dict(intent)


async def test_an_eviction_that_never_went_out_is_dropped_untold(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, strategy_spec=EVICT_ONLY) as kerf:
        before = await start_web(kerf)
        intent = await an_eviction_left_refused(kerf)
        assert intent["podUid"] in {p["metadata"]["uid"] for p in before}
        second = await kerf.start_reconciler(identity="second")
        await finish(kerf, second, ["Evicted", "Evicted"])
        names = {e["metadata"]["name"] for e in await kerf_events(kerf)}
        assert intent["events"][0]["name"] not in names  # that eviction is not told


async def test_a_replica_killed_between_a_resize_and_its_status_write(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await start_web(kerf)
        release = kerf.sim.faults.hold_answers(
            verbs={"patch"}, resource="pods", subresource="resize"
        )
        first = await kerf.start_reconciler(identity="first")
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))

        async def resized() -> bool:
            return any(requests_of(p) == TARGET for p in await kerf.pods("web"))

        await wait_for(kerf, resized, "the first resize to go in")
        await first.kill()
        release.set()
        assert not (await status_of(kerf)).get("lastApplied")
        second = await kerf.start_reconciler(identity="second")
        await finish(kerf, second, ["Resized"])


async def test_an_eviction_lost_while_the_pods_watch_lags_evicts_each_pod_once(
    tmp_path: Path,
) -> None:
    # The eviction goes in and its answer is lost; the pods' watch then lags behind it, so
    # the passes that follow still see the evicted pod running, and not its replacement.
    async with running_kerf(tmp_path, strategy_spec=EVICT_ONLY) as kerf:
        await start_web(kerf)
        kerf.sim.writes.enabled = True
        lag = kerf.sim.faults.lose_answer_and_lag_watches("pods", **EVICTION_WRITE)
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", policy())

        async def lost() -> bool:
            return lag.started

        await wait_for(kerf, lost, "an eviction carried out, its answer lost")
        passes = replica.service.passes

        async def passed_over_the_stale_view() -> bool:
            return replica.service.passes >= passes + 3

        await wait_for(kerf, passed_over_the_stale_view, "passes over the view behind")
        lag.release()
        await finish(kerf, replica, ["Evicted", "Evicted"])
        evicted = [
            w.name
            for w in kerf.sim.writes.entries
            if w.subresource == "eviction" and w.status < 300
        ]
        assert len(evicted) == len(set(evicted)) == 2


async def test_an_eviction_recorded_but_not_asked_for_is_not_told_when_its_pod_goes(
    tmp_path: Path,
) -> None:
    # The record of the eviction goes in but its answer is lost, so the replica never asks
    # for the eviction; then someone else deletes that pod. Gone, it looks evicted, but the
    # replica that recorded it knows better.
    async with running_kerf(tmp_path, strategy_spec=EVICT_ONLY) as kerf:
        await start_web(kerf)
        kerf.sim.writes.enabled = True
        release = kerf.sim.faults.hold_answers(
            verbs={"patch"}, resource="rightsizingrecommendations", subresource="status", status=504
        )
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", policy())

        async def recorded() -> dict[str, Any] | None:
            return (await status_of(kerf)).get("pendingEviction")

        intent = await wait_for(kerf, recorded, "an eviction recorded, its answer held")
        await client.CoreV1Api(kerf.api).delete_namespaced_pod(intent["podName"], "shop")
        release.set()

        async def done() -> bool:
            pods = await kerf.pods("web")
            status = await status_of(kerf)
            return (
                len(pods) == 2
                and all(requests_of(p) == TARGET for p in pods)
                and status.get("phase") == "Applied"
                and "pendingEviction" not in status
            )

        await wait_for(kerf, done, "both pods at the target")
        await wait_for(kerf, idle(replica), "the reconciler to settle")
        told = [e for e in await kerf_events(kerf) if e["reason"] == "Evicted"]
        assert intent["events"][0]["name"] not in {e["metadata"]["name"] for e in told}
        assert not [e for e in told if intent["podName"] in e["note"]]
        evicted = [
            w.name
            for w in kerf.sim.writes.entries
            if w.subresource == "eviction" and w.status < 300
        ]
        assert len(told) == len(evicted)


async def test_a_successor_drops_an_eviction_record_whose_pod_someone_else_deletes(
    tmp_path: Path,
) -> None:
    # The first replica records the eviction, which is not carried out, and dies before it
    # hears so; someone else deletes the pod, which a finalizer holds terminating. The
    # successor finds the record and the pod going, without the mark an eviction leaves.
    async with running_kerf(tmp_path, strategy_spec=EVICT_ONLY) as kerf:
        await start_web(kerf)
        intent = await an_eviction_left_refused(kerf)
        core = client.CoreV1Api(kerf.api)
        name = intent["podName"]
        await core.patch_namespaced_pod(name, "shop", {"metadata": {"finalizers": ["test/hold"]}})
        await core.delete_namespaced_pod(name, "shop")
        second = await kerf.start_reconciler(identity="second")

        async def dropped() -> bool:
            return "pendingEviction" not in await status_of(kerf)

        await wait_for(kerf, dropped, "the record dropped")
        await core.patch_namespaced_pod(name, "shop", {"metadata": {"finalizers": None}})
        await finish(kerf, second, ["Evicted"])  # the other pod's, by the successor
        names = {e["metadata"]["name"] for e in await kerf_events(kerf)}
        assert intent["events"][0]["name"] not in names
