"""The rollback state machine (app/policy/rollback_monitor.py): every transition, the seed's
backoff table, and restart safety."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.decide.admission import admit_pod
from app.model.annotations import POD_INFO, encode_fixed, encode_owned, fixed_key, policy_key
from app.model.crd import KerfResource, LastApplied, parse_object
from app.model.workloads import Workload
from app.policy.plans import plan_for
from app.policy.rollback import RollbackState, backoff_wait, decode_state, encode_state
from app.policy.rollback_health import Applied
from app.policy.rollback_monitor import (
    BACKING_OFF,
    FAILED_PERMANENT,
    MONITORING_STARTED,
    MONITORING_SUCCEEDED,
    ROLLING_BACK_STARTED,
    MonitorInputs,
    Step,
    applied_from_status,
    monitor_inputs,
    monitored_fingerprint,
    next_step,
    policy_counts,
    rollback_policy_for,
    step,
    summary,
)
from tests.app import builders as b

T0 = b.NOW
FP = "f1"
MANIFEST = {"app": dict(b.APP_RES)}
LOW = {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "300Mi"}}
GOOD = {"requests": {"cpu": "300m", "memory": "384Mi"}, "limits": {"cpu": "1", "memory": "768Mi"}}


def policy(
    *,
    target: str = "manifest",
    threshold: int = 80,
    reopen: bool = True,
    attempts: int = 3,
    period: str = "5m",
) -> KerfResource:
    return b.kerf(
        "RollbackPolicy",
        "rb",
        {
            "monitoringPeriod": period,
            "rollbackTarget": target,
            "adoptionThresholdPercent": threshold,
            "backoff": {"timePeriod": "1m", "multiplyByTurn": 2, "maxAttempts": attempts},
            "enableMonitoringReopen": reopen,
        },
        created=b.T0,
    )


def pod(
    name: str,
    *,
    values: dict[str, Any] | None = None,
    fingerprint: str | None = FP,
    created: datetime = T0,
    restarts: int = 0,
    last: str | None = None,
    last_at: datetime | None = None,
) -> dict[str, Any]:
    """A pod of Deployment web running `values` (LOW by default), admitted by the webhook
    with `fingerprint`."""
    values = values or LOW
    annotations = {}
    if fingerprint is not None:
        annotations[POD_INFO] = orjson.dumps(
            {"fingerprint": fingerprint, "containers": {"app": values}}
        ).decode()
    entry: dict[str, Any] = {"name": "app", "restartCount": restarts, "state": {"running": {}}}
    if last is not None:
        entry["lastState"] = {
            "terminated": {"reason": last, "finishedAt": b.ts(last_at or created)}
        }
    p = b.pod(name, containers={"app": values}, annotations=annotations, statuses=[entry])
    p["metadata"]["creationTimestamp"] = b.ts(created)
    return p


def healthy(n: int = 3, **kw: Any) -> list[dict[str, Any]]:
    return [pod(f"web-{i}", **kw) for i in range(n)]


def inputs(pods: list[dict[str, Any]], pol: KerfResource | None = None, **kw: Any) -> MonitorInputs:
    kw.setdefault("fingerprint", FP)
    kw.setdefault("replicas", 3)
    return MonitorInputs(
        policy=pol if pol is not None else policy(),  # type: ignore[arg-type]
        pods=pods,
        manifest=MANIFEST,
        **kw,
    )


def reasons(result: Step) -> list[str]:
    return [e.reason for e in result.events]


def monitoring(pol: KerfResource | None = None, **kw: Any) -> RollbackState:
    result = step(None, inputs(healthy(), pol, **kw), T0)
    assert result.state is not None and result.state.mode == "monitoring"
    return result.state


def rolled_back(**kw: Any) -> Step:
    oom = [
        pod(f"web-{i}", restarts=1, last="OOMKilled", last_at=T0 + timedelta(minutes=1))
        for i in range(3)
    ]
    return step(monitoring(**kw), inputs(oom, kw.get("pol")), T0 + timedelta(minutes=5))


# ------------------------------------------------------------------ no policy, new fingerprint


def test_without_a_rollback_policy_nothing_is_monitored_or_restored() -> None:
    result = step(None, MonitorInputs(None, FP, healthy()), T0)
    assert result == Step(None, None, False)
    kept = RollbackState(mode="backingOff", active_recommendation_fingerprint=FP)
    result = step(kept, MonitorInputs(None, FP, healthy()), T0)
    assert (result.state, result.write, result.restore, result.events) == (kept, False, None, ())


def test_a_published_but_unapplied_recommendation_waits_in_idle() -> None:
    result = step(None, inputs([pod("web-0", fingerprint=None, values=b.APP_RES)]), T0)
    assert result.state == RollbackState(mode="idle", active_recommendation_fingerprint=FP)
    assert result.write and not result.events and result.requeue_at is None


def test_no_recommendation_and_no_state_writes_nothing() -> None:
    result = step(None, inputs([], fingerprint=None), T0)
    assert (result.state, result.write) == (None, False)


def test_a_pod_admitted_with_the_fingerprint_starts_monitoring() -> None:
    result = step(None, inputs(healthy()), T0)
    state = result.state
    assert state is not None
    assert (state.mode, state.turn, state.started_at, state.expiry_at, state.cohort) == (
        "monitoring",
        1,
        T0,
        T0 + timedelta(minutes=5),
        3,
    )
    assert reasons(result) == [MONITORING_STARTED]
    assert result.requeue_at == T0 + timedelta(minutes=5)
    assert result.phase is None and result.restore is None
    assert result.annotation == encode_state(state)


def test_the_reconciler_applying_the_recommendation_starts_monitoring() -> None:
    applied = Applied(FP, T0, {"app": LOW})
    result = step(None, inputs(healthy(fingerprint=None), applied=applied), T0)
    assert result.state is not None and result.state.mode == "monitoring"


def test_applied_from_status_reads_last_applied() -> None:
    record = LastApplied.model_validate(
        {"at": b.ts(T0), "method": "inPlace", "fingerprint": FP, "containers": {"app": LOW}}
    )
    applied = applied_from_status(record)
    assert applied == Applied(FP, T0, {"app": LOW})
    assert applied_from_status(None) is None


def test_the_cohort_of_a_kind_without_replicas_is_its_live_pods() -> None:
    state = step(None, inputs(healthy(2), replicas=None), T0).state
    assert state is not None and state.cohort == 2


# ------------------------------------------------------------------ the window


def test_nothing_is_decided_before_the_window_ends() -> None:
    state = monitoring()
    oom = [pod("web-0", restarts=1, last="OOMKilled", last_at=T0 + timedelta(minutes=1))]
    result = step(state, inputs(oom), T0 + timedelta(minutes=4, seconds=59))
    assert (result.state, result.write, result.events) == (state, False, ())
    assert result.requeue_at == T0 + timedelta(minutes=5)


def test_healthy_adoption_succeeds_and_records_the_last_successful_state() -> None:
    result = step(monitoring(), inputs(healthy()), T0 + timedelta(minutes=5))
    state = result.state
    assert state is not None and state.mode == "monitoringSucceeded"
    assert state.last_successful_state == {"app": LOW}
    assert state.expiry_at == T0 + timedelta(minutes=5)
    assert reasons(result) == [MONITORING_SUCCEEDED]
    assert result.restore is None and result.requeue_at is None and result.phase is None


def test_transient_restarts_below_the_threshold_recover_within_the_window() -> None:
    flaky = healthy(2) + [pod("web-2", restarts=2, last="Error", last_at=T0 + timedelta(minutes=1))]
    result = step(monitoring(), inputs(flaky), T0 + timedelta(minutes=5))
    assert result.state is not None and result.state.mode == "monitoringSucceeded"


def test_pods_created_during_the_window_are_judged_at_its_end() -> None:
    # Admitted one second before the end, it is monitored through the same window.
    late = [pod("web-9", created=T0 + timedelta(minutes=4, seconds=59))]
    result = step(
        monitoring(threshold_pol := policy(threshold=30)),
        inputs(late, threshold_pol),
        T0 + timedelta(minutes=5),
    )
    assert result.state is not None and result.state.mode == "monitoringSucceeded"


def test_a_workload_without_any_pod_gets_another_window() -> None:
    result = step(monitoring(), inputs([]), T0 + timedelta(minutes=5))
    state = result.state
    assert state is not None and state.mode == "monitoring"
    assert state.expiry_at == T0 + timedelta(minutes=10)
    assert not result.events


@pytest.mark.parametrize(("threshold", "mode"), [(20, "monitoringSucceeded"), (100, "rollingBack")])
def test_adoption_threshold_over_five_replicas(threshold: int, mode: str) -> None:
    pol = policy(threshold=threshold)
    pods = [pod("web-0")] + [
        pod(f"web-{i}", fingerprint=None, values=b.APP_RES) for i in range(1, 5)
    ]
    state = step(None, inputs(pods, pol, replicas=5), T0).state
    result = step(state, inputs(pods, pol, replicas=5), T0 + timedelta(minutes=5))
    assert result.state is not None and result.state.mode == mode
    if mode == "rollingBack":
        assert result.state.failure_reason == "adoptionThresholdNotMet"
        assert "1 of 5 pod(s)" in (result.state.failure_message or "")
        assert "adoption threshold of 100% needs 5" in (result.state.failure_message or "")


# ------------------------------------------------------------------ rolling back


def test_an_oom_kill_rolls_back_to_the_manifest() -> None:
    result = rolled_back()
    state = result.state
    assert state is not None
    assert (state.mode, state.failure_reason, state.rollback_started_at) == (
        "rollingBack",
        "oomKilled",
        T0 + timedelta(minutes=5),
    )
    assert result.restore == MANIFEST
    assert result.phase == "RollingBack"
    assert reasons(result) == [ROLLING_BACK_STARTED]
    assert result.events[0].type == "Warning" and "oomKilled" in result.events[0].message
    assert result.last_rollback is not None
    assert result.last_rollback.at == T0 + timedelta(minutes=5)
    assert result.last_rollback.resources == ["cpu", "memory"]  # 400m vs 200m, 512Mi vs 256Mi
    assert result.last_rollback.reason == "oomKilled"
    assert result.condition is not None and result.condition.status == "True"
    assert result.requeue_at == T0 + timedelta(minutes=10)


def test_last_rollback_names_only_the_resources_the_restore_changes() -> None:
    only_memory = {
        "requests": {"cpu": "400m", "memory": "256Mi"},
        "limits": {"cpu": "1", "memory": "300Mi"},
    }
    pods = [pod("web-0", values=only_memory, restarts=1, last="OOMKilled")]
    state = step(None, inputs(pods, replicas=1), T0).state
    result = step(state, inputs(pods, replicas=1), T0 + timedelta(minutes=5))
    assert result.last_rollback is not None and result.last_rollback.resources == ["memory"]


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"state": {"waiting": {"reason": "CrashLoopBackOff"}}}, "crashLoopBackOff"),
        (
            {
                "restartCount": 3,
                "lastState": {"terminated": {"reason": "Error", "finishedAt": b.ts(T0)}},
            },
            "restarts",
        ),
    ],
)
def test_the_failure_reason_comes_from_the_pods(extra: dict[str, Any], reason: str) -> None:
    pods = healthy()
    for p in pods:
        p["status"]["containerStatuses"][0].update(extra)
    result = step(monitoring(), inputs(pods), T0 + timedelta(minutes=5))
    assert result.state is not None and result.state.failure_reason == reason


def test_an_unschedulable_target_rolls_back_to_the_last_successful_state() -> None:
    pol = policy(target="lastSuccessful")
    before = RollbackState(
        mode="monitoringSucceeded",
        active_recommendation_fingerprint="f0",
        last_successful_state={"app": GOOD},
        expiry_at=T0 - timedelta(hours=1),
    )
    pending = healthy()
    for p in pending:
        p["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
    state = step(before, inputs(pending, pol), T0).state
    assert state is not None and state.mode == "monitoring"
    result = step(state, inputs(pending, pol), T0 + timedelta(minutes=5))
    assert result.state is not None and result.state.failure_reason == "unschedulable"
    assert result.restore == {"app": GOOD}


def test_last_successful_without_a_recorded_state_fails_permanently() -> None:
    pol = policy(target="lastSuccessful")
    result = rolled_back(pol=pol)
    state = result.state
    assert state is not None
    assert (state.mode, state.failure_reason) == (
        "failedPermanent",
        "rollbackRecommendationUnavailable",
    )
    assert "oomKilled" in (state.failure_message or "")
    assert reasons(result) == [FAILED_PERMANENT]
    assert result.restore is None and result.phase == "Failed" and result.last_rollback is None


def test_rolling_back_backs_off_once_every_pod_runs_the_restored_values() -> None:
    state = rolled_back().state
    at = T0 + timedelta(minutes=6)
    half = [pod("web-0", values=b.APP_RES, fingerprint=None), pod("web-1")]
    waiting = step(state, inputs(half), at)
    assert waiting.state == state and not waiting.write
    done = step(
        state, inputs([pod(f"web-{i}", values=b.APP_RES, fingerprint=None) for i in range(3)]), at
    )
    assert done.state is not None
    assert (done.state.mode, done.state.started_at, done.state.expiry_at) == (
        "backingOff",
        at,
        at + timedelta(minutes=2),
    )
    assert reasons(done) == [BACKING_OFF] and "restored" in done.events[0].message
    assert done.restore == MANIFEST and done.phase == "RolledBack"
    assert done.requeue_at == at + timedelta(minutes=2)


def test_rolling_back_backs_off_at_its_deadline_even_when_a_pod_does_not_fit() -> None:
    state = rolled_back().state
    stuck = [pod("web-0")]
    assert step(state, inputs(stuck), T0 + timedelta(minutes=9)).state == state
    result = step(state, inputs(stuck), T0 + timedelta(minutes=10))
    assert result.state is not None and result.state.mode == "backingOff"
    assert "restore still in progress" in result.events[0].message


# ------------------------------------------------------------------ backoff and retries


@pytest.mark.parametrize(("turn", "minutes"), [(1, 2), (2, 4), (3, 6)])
def test_seed_backoff_table(turn: int, minutes: int) -> None:
    assert backoff_wait(policy(), turn) == timedelta(minutes=minutes)  # type: ignore[arg-type]


def restored_pods() -> list[dict[str, Any]]:
    return [pod(f"web-{i}", values=b.APP_RES, fingerprint=None) for i in range(3)]


def test_after_the_backoff_the_next_turn_waits_for_the_recommendation_again() -> None:
    at = T0 + timedelta(minutes=6)
    backing = step(rolled_back().state, inputs(restored_pods()), at).state
    assert step(backing, inputs(restored_pods()), at + timedelta(minutes=1)).state == backing
    result = step(backing, inputs(restored_pods()), at + timedelta(minutes=2))
    state = result.state
    assert state is not None
    assert (state.mode, state.turn, state.started_at) == ("idle", 2, at + timedelta(minutes=2))
    assert result.restore is None and not result.events
    # The old in-place-rolled-back pods keep no evidence; a re-applied pod starts turn 2.
    again = step(
        state, inputs([pod("web-5", created=at + timedelta(minutes=3))]), at + timedelta(minutes=3)
    )
    assert again.state is not None and (again.state.mode, again.state.turn) == ("monitoring", 2)
    assert reasons(again) == [MONITORING_STARTED]


def test_a_stale_reconciler_record_does_not_start_the_next_turn() -> None:
    state = RollbackState(mode="idle", turn=2, started_at=T0, active_recommendation_fingerprint=FP)
    stale = Applied(FP, T0 - timedelta(minutes=1), {"app": LOW})
    assert step(state, inputs(restored_pods(), applied=stale), T0).state == state
    fresh = Applied(FP, T0, {"app": LOW})
    assert step(state, inputs(restored_pods(), applied=fresh), T0).state.mode == "monitoring"  # type: ignore[union-attr]


def run_turns(attempts: int) -> list[tuple[str, int, datetime]]:
    """Drive a recommendation that always OOM-kills through every turn: the modes, turns
    and times the machine goes through."""
    pol = policy(attempts=attempts)
    now = T0
    state: RollbackState | None = None
    seen: list[tuple[str, int, datetime]] = []
    for _ in range(40):
        carrying = [
            pod(f"web-{i}", created=now, restarts=1, last="OOMKilled", last_at=now)
            for i in range(3)
        ]
        current = state.mode if state else "idle"
        pods = restored_pods() if current in ("rollingBack", "backingOff") else carrying
        result = step(state, inputs(pods, pol), now)
        state = result.state
        assert state is not None
        if not seen or seen[-1][:2] != (state.mode, state.turn):
            seen.append((state.mode, state.turn, now))
        if state.mode == "failedPermanent":
            return seen
        now = result.requeue_at or now
    raise AssertionError(f"never failed permanently: {seen}")


def test_turns_are_retried_until_max_attempts_then_fail_permanently() -> None:
    seen = run_turns(3)
    assert [(m, t) for m, t, _ in seen] == [
        ("monitoring", 1),
        ("rollingBack", 1),
        ("backingOff", 1),
        ("idle", 2),
        ("monitoring", 2),
        ("rollingBack", 2),
        ("backingOff", 2),
        ("idle", 3),
        ("monitoring", 3),
        ("rollingBack", 3),
        ("backingOff", 3),
        ("failedPermanent", 3),
    ]
    backoffs = [
        (seen[i + 1][2] - seen[i][2]) for i, (m, _, _) in enumerate(seen) if m == "backingOff"
    ]
    assert backoffs == [timedelta(minutes=2), timedelta(minutes=4), timedelta(minutes=6)]


def test_failed_permanent_keeps_the_restore_and_never_retries_that_fingerprint() -> None:
    final = RollbackState(
        mode="failedPermanent",
        turn=3,
        active_recommendation_fingerprint=FP,
        failure_reason="oomKilled",
    )
    result = step(final, inputs(healthy(created=T0 + timedelta(days=1))), T0 + timedelta(days=1))
    assert (result.state, result.write, result.restore) == (final, False, MANIFEST)
    assert result.phase == "Failed" and result.requeue_at is None


@pytest.mark.parametrize(
    "mode", ["failedPermanent", "backingOff", "rollingBack", "monitoringSucceeded"]
)
def test_a_new_recommendation_starts_a_fresh_turn(mode: str) -> None:
    before = RollbackState(
        mode=mode,
        turn=3,
        active_recommendation_fingerprint="old",
        expiry_at=T0 + timedelta(hours=1),
        last_successful_state={"app": GOOD},
    )
    result = step(before, inputs(restored_pods(), fingerprint="new"), T0)
    assert result.state == RollbackState(
        mode="idle",
        turn=1,
        active_recommendation_fingerprint="new",
        last_successful_state={"app": GOOD},
    )
    assert result.restore is None and result.write


# ------------------------------------------------------------------ reopen


def succeeded(reopen: bool) -> tuple[KerfResource, RollbackState]:
    pol = policy(reopen=reopen)
    state = step(monitoring(pol), inputs(healthy(), pol), T0 + timedelta(minutes=5)).state
    assert state is not None and state.mode == "monitoringSucceeded"
    return pol, state


def test_reopen_on_a_newer_replacement_pod_reopens_the_turn() -> None:
    pol, state = succeeded(reopen=True)
    later = T0 + timedelta(hours=1)
    same = healthy(2) + [pod("web-new", created=later)]
    result = step(state, inputs(same, pol), later)
    assert result.state is not None and result.state.mode == "monitoring"
    assert result.state.expiry_at == later + timedelta(minutes=5)
    assert "reopened for new pod web-new" in result.events[0].message


def test_reopen_off_ignores_newer_pods_with_the_same_recommendation() -> None:
    pol, state = succeeded(reopen=False)
    later = T0 + timedelta(hours=1)
    result = step(state, inputs(healthy(2) + [pod("web-new", created=later)], pol), later)
    assert (result.state, result.write) == (state, False)
    assert next_step(state, pol).action == "none until a new recommendation is published"  # type: ignore[arg-type]


def test_reopen_ignores_pods_that_existed_at_the_success() -> None:
    pol, state = succeeded(reopen=True)
    assert step(state, inputs(healthy(), pol), T0 + timedelta(hours=1)).state == state


# ------------------------------------------------------------------ fingerprints and policies


def test_restore_keys_are_not_part_of_the_monitored_fingerprint() -> None:
    rec = {fixed_key("StaticPolicy", "requests"): encode_fixed({"app": {"cpu": "200m"}})}
    restore = {fixed_key("RollbackPolicy", "requests"): encode_fixed({"app": {"cpu": "400m"}})}
    assert monitored_fingerprint({**rec, **restore}) == monitored_fingerprint(rec)
    assert monitored_fingerprint(restore) is None
    assert monitored_fingerprint({}) is None


def test_toggling_multi_policy_changes_the_fingerprint_and_restarts_monitoring() -> None:
    values = {"app": {"cpu": "200m"}}
    fixed = {fixed_key("StaticPolicy", "requests"): encode_fixed(values)}
    owned = {
        policy_key("StaticPolicy", "shop", "s", "requests"): encode_owned(
            kind="StaticPolicy",
            namespace="shop",
            name="s",
            generation=1,
            created_at=b.T0,
            containers=values,
        )
    }
    one, other = monitored_fingerprint(fixed), monitored_fingerprint(owned)
    assert one and other and one != other
    pol, state = succeeded(reopen=False)
    result = step(
        state, inputs(healthy(fingerprint=other), pol, fingerprint=other), T0 + timedelta(hours=1)
    )
    assert result.state is not None and result.state.mode == "monitoring"
    assert result.state.active_recommendation_fingerprint == other


def workload(
    kind: str = "Deployment", namespace: str = b.NS, labels: dict[str, str] | None = None
) -> Workload:
    return Workload(kind=kind, namespace=namespace, name="web", labels=labels or {"app": "web"})


def test_rollback_policy_choice_weight_then_age() -> None:
    old = b.rollback_policy("old", created=b.T0)
    new_heavy = b.rollback_policy("heavy", weight=10, created=b.T0 + timedelta(days=1))
    newer = b.rollback_policy("newer", created=b.T0 + timedelta(days=2))
    assert rollback_policy_for(workload(), [newer, old]) is old
    assert rollback_policy_for(workload(), [newer, old, new_heavy]) is new_heavy


def test_rollback_policy_scope_namespace_and_default_types() -> None:
    other_ns = b.rollback_policy("elsewhere", namespace="other")
    assert rollback_policy_for(workload(), [other_ns]) is None
    cluster = b.rollback_policy(
        "c",
        kind="ClusterRollbackPolicy",
        scope={"namespaceSelector": {"operator": "In", "values": ["sh*"]}},
    )
    assert rollback_policy_for(workload(), [cluster]) is cluster
    assert rollback_policy_for(workload(namespace="prod"), [cluster]) is None
    assert rollback_policy_for(workload(kind="StrimziPodSet"), [b.rollback_policy()]) is None
    labelled = b.rollback_policy("l", scope={"labelSelector": {"matchLabels": {"tier": "api"}}})
    assert rollback_policy_for(workload(), [labelled]) is None
    assert rollback_policy_for(workload(labels={"tier": "api"}), [labelled]) is labelled
    assert rollback_policy_for(workload(), [b.static()]) is None


# ------------------------------------------------------------------ presentation


def test_summary_names_the_state_the_failure_and_the_next_step() -> None:
    state = rolled_back().state
    body = summary(state, policy())  # type: ignore[arg-type]
    assert body["mode"] == "rollingBack" and body["failureReason"] == "oomKilled"
    assert body["nextStep"].startswith("back off once every pod runs the restored values")
    assert body["nextStepAt"] == b.ts(T0 + timedelta(minutes=10))
    assert body["policy"] == {"kind": "RollbackPolicy", "namespace": b.NS, "name": "rb"}
    assert summary(None, None)["nextStep"].startswith("none: no rollback policy")


def test_policy_counts() -> None:
    states = [
        RollbackState(mode=m)
        for m in ("monitoring", "rollingBack", "backingOff", "failedPermanent", "idle")
    ]
    assert policy_counts(states) == {"monitoring": 1, "rolledBack": 2, "failedPermanent": 1}


# ------------------------------------------------------------------ restart safety


def scenario_pods(kind: int, now: datetime) -> list[dict[str, Any]]:
    if kind == 0:
        return healthy(created=now)
    if kind == 1:
        return [
            pod(f"web-{i}", created=now, restarts=1, last="OOMKilled", last_at=now)
            for i in range(3)
        ]
    if kind == 2:
        return restored_pods()
    return []


@settings(max_examples=60, deadline=None)
@given(
    moves=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 600), st.sampled_from([FP, FP, FP, "f2"])),
        min_size=1,
        max_size=25,
    ),
    reopen=st.booleans(),
    target=st.sampled_from(["manifest", "lastSuccessful"]),
)
def test_a_restarted_reconciler_resumes_identically(
    moves: list[tuple[int, int, str]], reopen: bool, target: str
) -> None:
    """Stepping the decoded annotation gives exactly what stepping the in-memory state
    gives, at every point of any run; and the machine never leaves the known modes."""
    pol = policy(reopen=reopen, target=target)
    now = T0
    state: RollbackState | None = None
    for kind, seconds, fingerprint in moves:
        now += timedelta(seconds=seconds)
        given_inputs = inputs(scenario_pods(kind, now), pol, fingerprint=fingerprint)
        live = step(state, given_inputs, now)
        if state is not None:
            resumed = step(decode_state(encode_state(state)), given_inputs, now)
            assert resumed == live
        state = live.state
        if state is not None:
            assert decode_state(live.annotation or "") == state
            assert state.restoring == (live.restore is not None) or state.mode == "failedPermanent"


# ------------------------------------------------------------------ through the view


def admitted(v: Any, name: str) -> dict[str, Any]:
    """A new pod of web as the webhook leaves it: resources and annotations patched."""
    fresh = b.pod(name, statuses=[{"name": "app", "restartCount": 0, "state": {"running": {}}}])
    result = admit_pod(v, fresh, b.NS, T0)
    assert result.outcome == "apply", result.message
    fresh["metadata"]["annotations"].update(result.annotations)
    fresh["spec"]["containers"][0]["resources"] = result.resources["app"]
    fresh["metadata"]["creationTimestamp"] = b.ts(T0)
    return fresh


def test_a_pod_the_webhook_admitted_starts_monitoring_through_the_view() -> None:
    guard = {"rollback": {"restarts": 2}}
    objects = [*b.base_objects(replicas=1), b.static(guardrails=guard), b.rollback_policy()]
    v = b.view(*objects)
    workload = next(iter(v.workloads()))
    v.apply(admitted(v, "web-7d4b9-new"))
    given_inputs = monitor_inputs(v, workload)
    assert given_inputs.policy is not None and given_inputs.policy.metadata.name == "rb"
    assert given_inputs.fingerprint == plan_for(v, workload).fingerprint
    assert given_inputs.thresholds.restarts == 2
    assert given_inputs.replicas == 1 and given_inputs.manifest == {"app": b.APP_RES}
    result = step(None, given_inputs, T0)
    assert result.state is not None and result.state.mode == "monitoring"
    # While the restore is published the fingerprint the machine watches stays the same.
    rolling = encode_state(
        RollbackState(
            mode="rollingBack", active_recommendation_fingerprint=given_inputs.fingerprint
        )
    )
    v.apply(b.deployment(replicas=1, annotations={"rightsizing.kubex.ai/rollback-state": rolling}))
    restoring = next(iter(v.workloads()))
    assert plan_for(v, restoring).fingerprint != given_inputs.fingerprint
    assert monitor_inputs(v, restoring).fingerprint == given_inputs.fingerprint


def test_the_last_rollback_a_step_returns_blocks_decreases_until_the_cooldown() -> None:
    """What the integrator writes as status.lastRollback is what the Cooldown rule reads."""
    result = rolled_back()
    assert result.last_rollback is not None
    written = result.last_rollback.model_dump(by_alias=True, mode="json", exclude_none=True)
    record = b.recommendation(applied_at=T0 - timedelta(days=3))
    doc = record.model_dump(by_alias=True, mode="json", exclude_none=True)
    doc["status"]["lastRollback"] = written
    lower = {"app": {"requests": {"cpu": "300m", "memory": "400Mi"}}}
    objects = [*b.base_objects(replicas=2), b.static(containers=lower), parse_object(doc)]
    for at, outcome in [(T0 + timedelta(hours=1), "blocked"), (T0 + timedelta(days=2), "apply")]:
        decision = b.decide(b.view(*objects), b.pod(), now=at)
        assert decision.outcome == outcome, decision.message
        if outcome == "blocked":
            assert decision.reason == "Cooldown"


# ------------------------------------------------- a kill as the change is sent (SPEC §8)


def _resized_in_place(name: str, uid: str, **kw: Any) -> dict[str, Any]:
    """A pod that ran before the change (created ten minutes before it) and was resized."""
    p = pod(name, fingerprint=None, created=T0 - timedelta(minutes=10), **kw)
    p["metadata"]["uid"] = uid
    return p


@pytest.mark.parametrize("method", ["inPlace", "evict"])
def test_a_kill_between_the_change_and_the_pass_that_sees_it_counts(method: str) -> None:
    """The change is sent at 0.9 s; a pod is OOM-killed at 0.95 s (the API writes 0 s); the
    pass that opens monitoring runs at 1.4 s. The window opened when the change was sent,
    and the pod's restarts beyond its count at that moment are the change's."""
    sent = T0.replace(microsecond=900_000)
    killed = T0.replace(microsecond=0)
    if method == "inPlace":
        pods = [_resized_in_place(f"web-{i}", f"u{i}", restarts=2 + (i == 0)) for i in range(3)]
        pods[0] = _resized_in_place("web-0", "u0", restarts=3, last="OOMKilled", last_at=killed)
    else:  # replacements admitted in the second the change was sent
        pods = [pod(f"web-{i}", fingerprint=None, created=killed) for i in range(3)]
        pods[0] = pod("web-0", fingerprint=None, created=killed, restarts=1, last="OOMKilled")
    baseline = {f"u{i}": {"app": 2} for i in range(3)} if method == "inPlace" else {}
    applied = Applied(FP, sent.replace(microsecond=0), {"app": LOW}, baseline)
    opened = step(None, inputs(pods, applied=applied), sent + timedelta(seconds=0.5))
    assert opened.state is not None and opened.state.mode == "monitoring"
    assert opened.state.started_at == applied.at  # when the change was sent
    ended = step(opened.state, inputs(pods, applied=applied), applied.at + timedelta(minutes=5))
    assert ended.state is not None and ended.state.mode == "rollingBack"
    assert ended.state.failure_reason == "oomKilled"


def test_restarts_up_to_the_baseline_are_not_the_changes() -> None:
    """A pod that had restarted (and been OOM-killed) before the change was sent, and not
    since, is healthy, whatever second its last termination was stamped with."""
    before = T0.replace(microsecond=0)
    pods = [
        _resized_in_place(f"web-{i}", f"u{i}", restarts=5, last="OOMKilled", last_at=before)
        for i in range(3)
    ]
    applied = Applied(FP, T0, {"app": LOW}, {f"u{i}": {"app": 5} for i in range(3)})
    opened = step(None, inputs(pods, applied=applied), T0)
    assert opened.state is not None
    ended = step(opened.state, inputs(pods, applied=applied), T0 + timedelta(minutes=5))
    assert ended.state is not None and ended.state.mode == "monitoringSucceeded"
