"""Pod decisions (SPEC §6, seed guardrails.txt): plan checks, their order, blocked vs
skipped, rollback restores, the admission subset."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from app.decide import decide_pod
from app.model.annotations import PAUSE_UNTIL, ROLLBACK_STATE
from app.model.crd import LastApplied
from app.model.horizon import Horizon
from app.policy.plans import plan_for
from app.policy.rollback import RollbackState, encode_state
from tests.app import builders as b

#: every check here only reads the decision (tests/app/conftest.py)
pytestmark = pytest.mark.usefixtures("checks_only_read")

NOW = b.NOW
ENV = "shop"


def proactive_objects(*rows: dict[str, Any], policy: Any = None, **base: Any) -> list[Any]:
    return [*b.base_objects(**base), policy or b.proactive(), b.configmap(*(rows or (b.row(),)))]


def static_objects(
    containers: dict | None = None, *, policy_kw: dict | None = None, **base: Any
) -> list[Any]:
    return [*b.base_objects(**base), b.static(containers=containers, **(policy_kw or {}))]


FREEZE_OPEN = {
    "scheduling": {"exclusionWindows": [{"name": "lunch", "start": "11:00", "end": "13:00"}]}
}
INCLUSION_CLOSED = {
    "scheduling": {"inclusionWindows": [{"name": "night", "start": "02:00", "end": "04:00"}]}
}


def with_strategy(objs: list[Any], **spec: Any) -> list[Any]:
    """Replace the default strategy."""
    return [o for o in objs if getattr(o, "kind", None) != "AutomationStrategy"] + [
        b.strategy(**spec)
    ]


def cooling() -> Any:
    return b.recommendation(applied_at=NOW - timedelta(hours=1))


# ------------------------------------------------------------------ basics


def test_running_apply_with_step_limit_and_method() -> None:
    v = b.view(*static_objects({"app": {"requests": {"cpu": "100m"}}}))
    d = b.decide(v, b.pod(containers={"app": {"requests": {"cpu": "1"}, "limits": {}}}))
    assert (d.outcome, d.reason, d.method) == ("apply", None, "inPlace")
    assert d.values == {"app": {"requests": {"cpu": "500m"}}}


def test_unmanaged_and_no_policy_are_skipped() -> None:
    v = b.view(*b.base_objects())
    bare = b.pod()
    bare["metadata"]["ownerReferences"] = []
    assert (b.decide(v, bare).outcome, b.decide(v, bare).reason) == ("skipped", "Unmanaged")
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("skipped", "NoMatchingPolicy")


def test_all_within_tolerance_is_skipped_not_blocked() -> None:
    v = b.view(*static_objects({"app": {"requests": {"cpu": "390m", "memory": "500Mi"}}}))
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("skipped", "NoSignificantChange")
    assert b.final(d) == b.APP_RES


def test_audit_is_skipped() -> None:
    v = b.view(*static_objects(policy_kw={"mode": "audit"}))
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("skipped", "Audit")
    assert b.final(d) == b.APP_RES


# ------------------------------------------------------------------ refusals in a plan


def test_throttled_drops_cpu_only() -> None:
    v = b.view(*proactive_objects(b.row(throttling=0.25)))
    d = b.decide(v, b.pod())
    assert d.outcome == "apply"
    assert b.reasons(d) == {"app.requests.cpu": "Throttled"}
    assert b.final(d)["requests"] == {"cpu": "400m", "memory": "256Mi"}


def test_throttled_below_ratio_is_not_refused() -> None:
    v = b.view(*proactive_objects(b.row(throttling=0.24)))
    assert b.final(b.decide(v, b.pod()))["requests"] == {"cpu": "250m", "memory": "256Mi"}


def test_throttled_only_change_is_blocked() -> None:
    v = b.view(*proactive_objects(b.row(requests={"cpu": "250m"}, throttling=0.5)))
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("blocked", "Throttled")


def test_oom_killed_since_last_change_refuses_memory_decreases() -> None:
    objs = [
        *static_objects(
            {"app": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "768Mi"}}}
        ),
        b.recommendation(applied_at=NOW - timedelta(days=3)),
    ]
    oom = b.pod(statuses=[b.oom_status(finished=NOW - timedelta(hours=1))])
    d = b.decide(b.view(*objs), oom)
    assert d.outcome == "apply"
    assert b.reasons(d) == {"app.requests.memory": "OOMKilled", "app.limits.memory": "OOMKilled"}
    assert b.final(d)["requests"] == {"cpu": "250m", "memory": "512Mi"}
    # An OOM kill before the last change does not count.
    old = b.pod(statuses=[b.oom_status(finished=NOW - timedelta(days=4))])
    assert b.reasons(b.decide(b.view(*objs), old)) == {}


def test_oom_killed_sibling_pod_counts_at_admission() -> None:
    objs = [*static_objects(), b.pod("web-7d4b9-old", statuses=[b.oom_status()])]
    d = b.decide(b.view(*objs), b.pod("web-7d4b9-new", phase="Pending"), "admission")
    assert b.reasons(d) == {"app.requests.memory": "OOMKilled"}


@pytest.mark.parametrize(
    "extra",
    [
        {"args": ["-Xmx1g"]},
        {"command": ["java", "-XX:MaxHeapSize=1024m", "-jar", "app.jar"]},
        {"env": [{"name": "JAVA_TOOL_OPTIONS", "value": "-Xms256m -Xmx1G"}]},
        {"env": [{"name": "JDK_JAVA_OPTIONS", "value": "-Xmx1024m"}]},
    ],
)
def test_jvm_fixed_heap_floor(extra: dict[str, Any]) -> None:
    res = {"requests": {"cpu": "400m", "memory": "2Gi"}, "limits": {"memory": "2Gi"}}
    v = b.view(
        *static_objects({"app": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1279Mi"}}})
    )
    d = b.decide(v, b.pod(containers={"app": res}, extra={"app": extra}))
    assert (d.outcome, d.reason) == ("blocked", "JVMFixedHeap")
    assert b.reasons(d) == {
        "app.requests.memory": "JVMFixedHeap",
        "app.limits.memory": "JVMFixedHeap",
    }


def test_jvm_heap_floor_allows_heap_times_1_25() -> None:
    res = {"requests": {"memory": "2Gi"}, "limits": {"memory": "2Gi"}}
    v = b.view(*static_objects({"app": {"requests": {"memory": "1280Mi"}}}))
    d = b.decide(v, b.pod(containers={"app": res}, extra={"app": {"args": ["-Xmx1g"]}}))
    assert d.values["app"]["requests"] == {"memory": "1280Mi"}


def test_minimums_raise_a_request_in_a_plan() -> None:
    res = {"requests": {"cpu": "15m", "memory": "40Mi"}, "limits": {}}
    v = b.view(*static_objects({"app": {"requests": {"cpu": "1m", "memory": "1Mi"}}}))
    d = b.decide(v, b.pod(containers={"app": res}))
    assert d.values == {"app": {"requests": {"cpu": "10m", "memory": "32Mi"}}}


# ------------------------------------------------------------------ plan checks


def test_requests_exceed_limits_blocks_without_clamping() -> None:
    v = b.view(*static_objects({"app": {"requests": {"cpu": "2", "memory": "256Mi"}}}))
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("blocked", "RequestsExceedLimits")
    assert b.final(d) == b.APP_RES  # nothing clamped, nothing applied
    assert d.values == {}


def test_requests_exceed_limits_also_on_admission() -> None:
    v = b.view(*static_objects({"app": {"requests": {"cpu": "2"}}}))
    assert b.decide(v, b.pod(), "admission").reason == "RequestsExceedLimits"


def test_hpa_coupled_drops_only_that_resource() -> None:
    v = b.view(*static_objects(), b.hpa(resource="cpu"))
    d = b.decide(v, b.pod())
    assert d.outcome == "apply"
    assert b.reasons(d) == {"app.requests.cpu": "HPACoupled"}
    assert d.values == {
        "app": {
            "requests": {"cpu": "400m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        }
    }


def test_hpa_coupled_blocks_when_nothing_is_left() -> None:
    v = b.view(
        *static_objects(),
        b.hpa(resource="cpu"),
        b.hpa("web", "memory") | {"metadata": {"name": "web-hpa-mem", "namespace": ENV}},
    )
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("blocked", "HPACoupled")


def test_hpa_average_value_is_not_coupled() -> None:
    v = b.view(*static_objects(), b.hpa(resource="cpu", target_type="AverageValue"))
    assert b.reasons(b.decide(v, b.pod())) == {}


def test_cooldown_after_a_change() -> None:
    v = b.view(*static_objects(), cooling())
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("blocked", "Cooldown")
    assert d.next_allowed_at == NOW + timedelta(hours=23)
    later = b.decide(v, b.pod(), now=NOW + timedelta(hours=23))
    assert later.outcome == "apply"


def test_a_change_about_to_be_recorded_is_decided_as_the_status_will_read() -> None:
    # No record yet: the change is allowed. With the change this pass is about to record
    # (`recorded`), the next one waits out its cooldown, as the pass after it would find;
    # the view is not touched, so a decision without it is as before.
    v = b.view(*static_objects())
    assert b.decide(v, b.pod()).outcome == "apply"
    recorded = LastApplied(at=NOW - timedelta(hours=1), method="inPlace")
    d = decide_pod(v, b.pod(), now=NOW, path="running", recorded=recorded)
    assert (d.outcome, d.reason) == ("blocked", "Cooldown")
    assert d.next_allowed_at == NOW + timedelta(hours=23)
    assert b.decide(v, b.pod()).outcome == "apply"


def test_cooldown_lets_the_rollout_of_the_last_applied_proposal_go_on() -> None:
    objs = static_objects({"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}})
    # The first pod got the proposal an hour ago; lastApplied records it, spelt differently.
    applied = b.recommendation(
        applied_at=NOW - timedelta(hours=1),
        last_applied={"app": {"requests": {"cpu": "0.25", "memory": "268435456"}}},
    )
    v = b.view(*objs, applied)
    second = b.decide(v, b.pod("web-7d4b9-bbbbb"))
    assert (second.outcome, second.reason) == ("apply", None)
    assert second.values["app"]["requests"] == {"cpu": "250m", "memory": "256Mi"}
    # The first pod already has the values: nothing left to do, and no cooldown either.
    done = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": b.APP_RES["limits"]}
    first = b.decide(v, b.pod(containers={"app": done}))
    assert (first.outcome, first.reason) == ("skipped", "NoSignificantChange")


def test_cooldown_stops_a_new_proposal_during_a_rollout() -> None:
    # The policy now asks for less CPU than was applied: the new value waits, while the
    # memory the change already made goes on to the next pod.
    objs = static_objects({"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}})
    applied = b.recommendation(
        applied_at=NOW - timedelta(hours=1),
        last_applied={"app": {"requests": {"cpu": "300m", "memory": "256Mi"}}},
    )
    d = b.decide(b.view(*objs, applied), b.pod())
    assert d.outcome == "apply"
    assert d.values["app"]["requests"] == {"cpu": "400m", "memory": "256Mi"}
    assert b.reasons(d) == {"app.requests.cpu": "Cooldown"}
    # Nothing of the change made left in the plan: the pod waits.
    new_only = static_objects({"app": {"requests": {"cpu": "250m"}}})
    d = b.decide(b.view(*new_only, applied), b.pod())
    assert (d.outcome, d.reason) == ("blocked", "Cooldown")
    # The first pod got only part of the proposal (say the node had no room for the
    # rest): the next pod gets that part too, and the value the change did not name waits.
    partial = {
        "requests": {"cpu": "300m", "memory": "512Mi"},
        "limits": b.APP_RES["limits"],
    }
    on = b.view(
        *objs,
        b.recommendation(
            applied_at=NOW - timedelta(hours=1),
            last_applied={"app": {"requests": {"cpu": "250m"}}},
        ),
    )
    next_pod = b.decide(on, b.pod(containers={"app": partial}))
    assert next_pod.outcome == "apply"
    assert next_pod.values["app"]["requests"] == {"cpu": "250m", "memory": "512Mi"}
    assert b.reasons(next_pod) == {"app.requests.memory": "Cooldown"}
    same_memory = {**partial, "requests": {"cpu": "300m", "memory": "256Mi"}}
    assert b.decide(on, b.pod(containers={"app": same_memory})).outcome == "apply"


def test_cooldown_holds_the_whole_pod_when_the_rollout_s_part_alone_breaks_a_limit() -> None:
    # The change made raised the request to 2 under a limit it also raised; this pod's plan
    # names a new limit too: the request alone would sit above the old limit of 1.
    objs = static_objects(
        {"app": {"requests": {"cpu": "2", "memory": "256Mi"}, "limits": {"cpu": "3"}}}
    )
    applied = b.recommendation(
        applied_at=NOW - timedelta(hours=1),
        last_applied={"app": {"requests": {"cpu": "2", "memory": "256Mi"}}},
    )
    d = b.decide(b.view(*objs, applied), b.pod())
    assert (d.outcome, d.reason) == ("blocked", "Cooldown")


def test_cooldown_from_policy_guardrails() -> None:
    v = b.view(*static_objects(policy_kw={"guardrails": {"cooldown": "30m"}}), cooling())
    assert b.decide(v, b.pod()).outcome == "apply"


def test_cooldown_after_rollback_blocks_decreases_of_that_resource() -> None:
    rec = b.recommendation(
        applied_at=NOW - timedelta(days=5),
        rollback_at=NOW - timedelta(hours=2),
        rollback_resources=["cpu"],
    )
    v = b.view(*static_objects({"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}}), rec)
    d = b.decide(v, b.pod())
    assert d.outcome == "apply"
    assert b.reasons(d) == {"app.requests.cpu": "Cooldown"}
    assert d.values == {
        "app": {
            "requests": {"cpu": "400m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        }
    }
    # Increases of the rolled-back resource are fine.
    up = b.view(*static_objects({"app": {"requests": {"cpu": "600m"}}}), rec)
    assert b.decide(up, b.pod()).values["app"]["requests"] == {"cpu": "600m", "memory": "512Mi"}
    # After the cooldown since the rollback, decreases go on.
    assert b.reasons(b.decide(v, b.pod(), now=NOW + timedelta(hours=23))) == {}


def test_single_replica_unsafe_when_the_method_evicts() -> None:
    objs = with_strategy(static_objects(replicas=1), inPlaceResize={"enabled": False})
    d = b.decide(b.view(*objs), b.pod())
    assert (d.outcome, d.reason) == ("blocked", "SingleReplicaUnsafe")
    allowed = with_strategy(
        static_objects(
            replicas=1, policy_kw={"guardrails": {"allowSingleReplicaDisruption": True}}
        ),
        inPlaceResize={"enabled": False},
    )
    d = b.decide(b.view(*allowed), b.pod())
    assert (d.outcome, d.method) == ("apply", "evict")


def test_single_replica_in_place_without_restart_is_safe() -> None:
    d = b.decide(b.view(*static_objects(replicas=1)), b.pod())
    assert (d.outcome, d.method) == ("apply", "inPlace")


def test_single_replica_in_place_with_restart_policy_is_unsafe() -> None:
    # RestartContainer resize policy and a strategy that forbids restarts → evict → unsafe.
    extra = {
        "app": {"resizePolicy": [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]}
    }
    d = b.decide(b.view(*static_objects(replicas=1)), b.pod(extra=extra))
    assert (d.outcome, d.reason) == ("blocked", "SingleReplicaUnsafe")


def test_single_replica_in_place_restart_allowed_by_the_strategy_is_still_unsafe() -> None:
    # The strategy lets in-place resizes restart containers, so the method stays inPlace —
    # but restarting the only replica's container disrupts it all the same.
    extra = {
        "app": {"resizePolicy": [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]}
    }
    objs = with_strategy(
        static_objects(replicas=1), inPlaceResize={"enabled": True, "containerRestart": True}
    )
    d = b.decide(b.view(*objs), b.pod(extra=extra))
    assert (d.outcome, d.reason) == ("blocked", "SingleReplicaUnsafe")
    d = b.decide(
        b.view(
            *with_strategy(
                static_objects(replicas=3),
                inPlaceResize={"enabled": True, "containerRestart": True},
            )
        ),
        b.pod(extra=extra),
    )
    assert (d.outcome, d.method) == ("apply", "inPlace")


def test_no_common_method() -> None:
    objs = [
        *b.base_objects(),
        b.global_config(multiPolicyContainerRightsizingEnabled=True),
        b.strategy("inplace-only", podEviction={"enabled": False}),
        b.strategy("evict-only", inPlaceResize={"enabled": False}),
        b.static("cpu-pol", {"app": {"requests": {"cpu": "300m"}}}, strategy="inplace-only"),
        b.static("mem-pol", {"app": {"requests": {"memory": "300Mi"}}}, strategy="evict-only"),
    ]
    d = b.decide(b.view(*objs), b.pod())
    assert (d.outcome, d.reason) == ("blocked", "NoCommonMethod")
    # Admission has no method to agree on.
    assert b.decide(b.view(*objs), b.pod(), "admission").outcome == "apply"


def test_node_capacity_filters_increases_never_decreases() -> None:
    objs = [
        *static_objects(
            {"app": {"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"cpu": "2"}}}
        ),
        b.node("node-a", cpu="1", memory="16Gi"),
        b.node("node-b", cpu="4"),  # a node that can hold the 2-CPU limit: not Infeasible
    ]
    p = b.pod(node="node-a")
    d = b.decide(b.view(*objs, p), p)
    assert d.outcome == "apply"
    assert b.reasons(d) == {"app.requests.cpu": "InsufficientNodeCapacity"}
    assert b.final(d)["requests"] == {"cpu": "400m", "memory": "256Mi"}
    assert b.final(d)["limits"] == {"cpu": "2", "memory": "1Gi"}


def test_node_capacity_increase_that_fits_is_kept() -> None:
    # 1 CPU allocatable − 10 % headroom = 900m; 400m used → room 500m; +400m fits.
    objs = [*static_objects({"app": {"requests": {"cpu": "800m"}}}), b.node(cpu="1")]
    p = b.pod(node="node-a")
    assert b.decide(b.view(*objs, p), p).values["app"]["requests"]["cpu"] == "800m"


def test_node_capacity_counts_the_sidecars_of_the_pods_on_the_node() -> None:
    # 1 CPU allocatable − 10 % headroom = 900m; this pod's 400m and the other pod's 10m app
    # container and 390m sidecar leave 100m: the +400m increase does not fit.
    objs = [*static_objects({"app": {"requests": {"cpu": "800m"}}}), b.node(cpu="1")]
    p = b.pod(node="node-a")
    other = b.pod(
        "other-7d4b9-a",
        workload="other",
        node="node-a",
        containers={"app": {"requests": {"cpu": "10m"}}},
    )
    other["spec"]["initContainers"] = [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "390m"}}}
    ]
    d = b.decide(b.view(*objs, p, other), p)
    assert (d.outcome, d.reason) == ("blocked", "InsufficientNodeCapacity")


def test_node_capacity_only_increase_is_blocked_and_admission_ignores_it() -> None:
    objs = [*static_objects({"app": {"requests": {"cpu": "1"}}}), b.node(cpu="1")]
    p = b.pod(node="node-a")
    d = b.decide(b.view(*objs, p), p)
    assert (d.outcome, d.reason) == ("blocked", "InsufficientNodeCapacity")
    assert b.decide(b.view(*objs, p), p, "admission").outcome == "apply"


def test_maintenance_window_blocks_whole_plan_until_next_allowed_time() -> None:
    objs = with_strategy(static_objects(), **INCLUSION_CLOSED)
    d = b.decide(b.view(*objs), b.pod())
    assert (d.outcome, d.reason) == ("blocked", "MaintenanceWindow")
    assert d.next_allowed_at == datetime.fromisoformat("2026-12-02T02:00:00+00:00")
    assert b.decide(b.view(*objs), b.pod(), now=d.next_allowed_at).outcome == "apply"


def test_freeze_window_blocks_with_next_allowed_time() -> None:
    objs = with_strategy(static_objects(), **FREEZE_OPEN)
    d = b.decide(b.view(*objs), b.pod())
    assert (d.outcome, d.reason) == ("blocked", "FreezeWindow")
    assert d.next_allowed_at == datetime.fromisoformat("2026-12-01T13:00:00+00:00")


@pytest.mark.parametrize(
    ("spec", "changes_at"),
    [(FREEZE_OPEN, "2026-12-01T13:00:00+00:00"), (INCLUSION_CLOSED, "2026-12-02T02:00:00+00:00")],
)
def test_a_window_decision_holds_until_a_window_opens_or_closes(
    spec: dict[str, Any], changes_at: str
) -> None:
    """The reconciler looks again when the decision's span ends: for windows, at the next
    instant one opens or closes, not at once (a pinned span) nor a steady horizon later."""
    clock = Horizon(b.NOW)
    b.decide(b.view(*with_strategy(static_objects(), **spec)), b.pod(), now=clock)  # type: ignore[arg-type]
    assert clock.next_change() == datetime.fromisoformat(changes_at)
    assert clock.holds(b.NOW) and not clock.holds(datetime.fromisoformat(changes_at))


# ------------------------------------------------------------------ recommendation quality


def test_stale_recommendation() -> None:
    stale = b.row(analyzed_at=NOW - timedelta(days=6))
    d = b.decide(b.view(*proactive_objects(stale)), b.pod())
    assert (d.outcome, d.reason) == ("blocked", "StaleRecommendation")
    ok = proactive_objects(stale, policy=b.proactive(max_age_days=10))
    assert b.decide(b.view(*ok), b.pod()).outcome == "apply"


def test_learning_period() -> None:
    young = b.row(coverage_hours=100)
    d = b.decide(b.view(*proactive_objects(young)), b.pod())
    assert (d.outcome, d.reason) == ("blocked", "LearningPeriod")
    ok = proactive_objects(young, policy=b.proactive(guardrails={"learningPeriod": "72h"}))
    assert b.decide(b.view(*ok), b.pod()).outcome == "apply"


def test_low_confidence_uses_the_lowest_container() -> None:
    two = {"app": b.APP_RES, "side": b.APP_RES}
    rows = (b.row("app", confidence=0.95), b.row("side", confidence=0.6))
    d = b.decide(b.view(*proactive_objects(*rows, containers=two)), b.pod(containers=two))
    assert (d.outcome, d.reason) == ("blocked", "LowConfidence")
    ok = proactive_objects(
        *rows, containers=two, policy=b.proactive(guardrails={"minConfidence": "0.5"})
    )
    assert b.decide(b.view(*ok), b.pod(containers=two)).outcome == "apply"


def test_hub_unreachable_blocks_proactive_only() -> None:
    v = b.view(*proactive_objects())
    b.break_recommendations(v)
    assert b.decide(v, b.pod()).reason == "HubUnreachable"
    s = b.view(*static_objects())
    b.break_recommendations(s)
    assert b.decide(s, b.pod()).outcome == "apply"


# ------------------------------------------------------------------ order of checks


def _pause() -> dict[str, str]:
    return {PAUSE_UNTIL: "infinite"}


@pytest.mark.parametrize(
    ("name", "objs", "pod_kw", "path", "expected"),
    [
        (
            "audit before paused",
            static_objects(policy_kw={"mode": "audit"}),
            {"annotations": _pause()},
            "running",
            ("skipped", "Audit"),
        ),
        (
            "automation disabled before paused",
            [*static_objects(), b.global_config(automationEnabled=False)],
            {"annotations": _pause()},
            "running",
            ("skipped", "AutomationDisabled"),
        ),
        (
            "hub unreachable before paused",
            None,
            {"annotations": _pause()},
            "running",
            ("blocked", "HubUnreachable"),
        ),
        (
            "paused before protected namespace",
            [*static_objects(), b.global_config(protectedNamespacePatterns=["sh*"])],
            {"annotations": _pause()},
            "running",
            ("blocked", "Paused"),
        ),
        (
            "protected before stale",
            [
                *proactive_objects(b.row(analyzed_at=NOW - timedelta(days=9))),
                b.global_config(protectedNamespacePatterns=["shop"]),
            ],
            {},
            "running",
            ("skipped", "ProtectedNamespace"),
        ),
        (
            "stale before HPA",
            [
                *proactive_objects(b.row(analyzed_at=NOW - timedelta(days=9))),
                b.hpa("web", "cpu"),
                b.hpa("web", "memory") | {"metadata": {"name": "m", "namespace": ENV}},
            ],
            {},
            "running",
            ("blocked", "StaleRecommendation"),
        ),
        (
            "HPA before learning period",
            [
                *proactive_objects(b.row(coverage_hours=1)),
                b.hpa("web", "cpu"),
                b.hpa("web", "memory") | {"metadata": {"name": "m", "namespace": ENV}},
            ],
            {},
            "running",
            ("blocked", "HPACoupled"),
        ),
        (
            "learning period before low confidence",
            proactive_objects(b.row(coverage_hours=1, confidence=0.1)),
            {},
            "running",
            ("blocked", "LearningPeriod"),
        ),
        (
            "paused before low confidence",
            proactive_objects(b.row(confidence=0.1)),
            {"annotations": _pause()},
            "running",
            ("blocked", "Paused"),
        ),
        (
            "low confidence before freeze window",
            with_strategy(proactive_objects(b.row(confidence=0.1)), **FREEZE_OPEN),
            {},
            "running",
            ("blocked", "LowConfidence"),
        ),
        (
            "freeze window before cooldown",
            [*with_strategy(static_objects(), **FREEZE_OPEN), cooling()],
            {},
            "running",
            ("blocked", "FreezeWindow"),
        ),
        (
            "per-value refusal before cooldown",
            [*proactive_objects(b.row(requests={"cpu": "200m"}, throttling=0.9)), cooling()],
            {},
            "running",
            ("blocked", "Throttled"),
        ),
        (
            "requests exceed limits before cooldown",
            [*static_objects({"app": {"requests": {"cpu": "2"}}}), cooling()],
            {},
            "running",
            ("blocked", "RequestsExceedLimits"),
        ),
        (
            "cooldown before single replica",
            [
                *with_strategy(static_objects(replicas=1), inPlaceResize={"enabled": False}),
                cooling(),
            ],
            {},
            "running",
            ("blocked", "Cooldown"),
        ),
        (
            "single replica before maintenance window",
            with_strategy(
                static_objects(replicas=1), inPlaceResize={"enabled": False}, **INCLUSION_CLOSED
            ),
            {},
            "running",
            ("blocked", "SingleReplicaUnsafe"),
        ),
        (
            "node capacity before maintenance window",
            [
                *with_strategy(
                    static_objects({"app": {"requests": {"cpu": "1"}}}), **INCLUSION_CLOSED
                ),
                b.node(cpu="1"),
            ],
            {"node": "node-a"},
            "running",
            ("blocked", "InsufficientNodeCapacity"),
        ),
    ],
)
def test_check_order_first_match_decides(
    name: str, objs: list[Any] | None, pod_kw: dict[str, Any], path: str, expected: tuple[str, str]
) -> None:
    p = b.pod(**pod_kw)
    if objs is None:
        v = b.view(*proactive_objects(), p)
        b.break_recommendations(v)
    else:
        v = b.view(*objs, p)
    d = b.decide(v, p, path)
    assert (d.outcome, d.reason) == expected, name


def test_admission_never_evaluates_windows_cooldown_single_replica_or_capacity() -> None:
    objs = [
        *with_strategy(
            static_objects({"app": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}, replicas=1),
            inPlaceResize={"enabled": False},
            scheduling={**FREEZE_OPEN["scheduling"], **INCLUSION_CLOSED["scheduling"]},
        ),
        cooling(),
        b.node(cpu="1"),
        b.node("node-b", cpu="4"),  # the 2-CPU limit fits a node: not Infeasible
        b.recommendation(
            applied_at=NOW - timedelta(minutes=1), rollback_at=NOW - timedelta(minutes=1)
        ),
    ]
    p = b.pod(node="node-a")
    running = b.decide(b.view(*objs, p), p, "running")
    assert running.outcome == "blocked"
    d = b.decide(b.view(*objs, p), p, "admission")
    assert (d.outcome, d.method) == ("apply", "admission")
    assert d.values["app"]["requests"] == {"cpu": "1", "memory": "512Mi"}


# ------------------------------------------------------------------ rollback restores


def restoring_objects(*extra: Any, mode: str = "rollingBack") -> list[Any]:
    state = encode_state(RollbackState(mode=mode, turn=1, started_at=NOW - timedelta(hours=1)))
    return [
        b.namespace(),
        b.strategy(**FREEZE_OPEN),
        b.deployment(annotations={ROLLBACK_STATE: state}, replicas=1),
        b.static(
            containers={"app": {"requests": {"cpu": "100m", "memory": "128Mi"}}}, mode="audit"
        ),
        b.rollback_policy(target="manifest"),
        b.hpa("web", "cpu"),
        cooling(),
        b.global_config(automationEnabled=False, protectedNamespacePatterns=["shop"]),
        *extra,
    ]


CHANGED = {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


@pytest.mark.parametrize("mode", ["rollingBack", "backingOff"])
def test_rollback_restore_is_exempt_from_every_check_but_paused(mode: str) -> None:
    p = b.pod(containers={"app": CHANGED})
    d = b.decide(b.view(*restoring_objects(mode=mode)), p)
    assert (d.outcome, d.reason) == ("apply", None)
    assert b.final(d) == b.APP_RES  # the manifest values, no 5 %/50 % rules
    assert {s.policy_kind for s in d.selected} == {"RollbackPolicy"}
    assert {s.annotation_key for s in d.selected} == {
        "rollbackpolicy.rightsizing.kubex.ai/desired-resource-requests",
        "rollbackpolicy.rightsizing.kubex.ai/desired-resource-limits",
    }


def test_a_restore_the_pod_already_runs_is_no_change() -> None:
    # Once restored, deciding again must not restore it again (an action every pass).
    p = b.pod()  # the manifest's values, which the restore targets
    d = b.decide(b.view(*restoring_objects(), p), p)
    assert (d.outcome, d.reason) == ("skipped", "NoSignificantChange")
    assert d.changed == ()


@pytest.mark.parametrize(("node_cpu", "method"), [("2", "inPlace"), ("300m", "evict")])
def test_a_restore_the_node_has_no_room_for_evicts_the_pod(node_cpu: str, method: str) -> None:
    # The restore raises the CPU request 200m -> 400m. Node capacity is no guardrail a
    # restore is exempt from: what the node cannot hold is done by eviction, never filtered.
    p = b.pod(containers={"app": CHANGED}, node="node-a")
    d = b.decide(b.view(*restoring_objects(b.node(cpu=node_cpu)), p), p)
    assert (d.outcome, d.method) == ("apply", method)
    assert b.final(d) == b.APP_RES


def test_rollback_restore_stops_only_at_pause() -> None:
    p = b.pod(containers={"app": CHANGED}, annotations={PAUSE_UNTIL: "infinite"})
    d = b.decide(b.view(*restoring_objects()), p)
    assert (d.outcome, d.reason) == ("blocked", "Paused")


def test_restore_keys_win_at_priority_130_over_heavier_policies() -> None:
    p = b.pod(containers={"app": CHANGED})
    v = b.view(
        *restoring_objects(b.static("heavy", {"app": {"requests": {"cpu": "150m"}}}, weight=1000))
    )
    cands = [
        c
        for c in plan_for(v, v.workload(b.view(*restoring_objects()).owner_of(p))).candidates
        if c.field == "requests" and c.resource == "cpu"
    ]
    assert {c.kind: c.priority for c in cands}["RollbackPolicy"] == 130
    d = b.decide(v, p)
    assert b.final(d)["requests"]["cpu"] == "400m"


def test_idle_rollback_state_publishes_no_restore() -> None:
    v = b.view(*restoring_objects(mode="monitoring"))
    d = b.decide(v, b.pod(containers={"app": CHANGED}))
    assert "RollbackPolicy" not in {s.policy_kind for s in d.selected}


def test_rollback_restore_goes_on_beside_an_audit_mode_policy() -> None:
    # The restore covers requests only; an audit-mode policy proposes a limit. The audit
    # proposal is left, the restore is applied.
    state = encode_state(
        RollbackState(
            mode="rollingBack",
            last_successful_state={
                "app": {"requests": {"cpu": "400m", "memory": "512Mi"}, "limits": {}}
            },
        )
    )
    objs = [
        b.namespace(),
        b.strategy(),
        b.deployment(annotations={ROLLBACK_STATE: state}),
        b.static(
            containers={"app": {"requests": {"cpu": "100m"}, "limits": {"memory": "900Mi"}}},
            mode="audit",
        ),
        b.rollback_policy(target="lastSuccessful"),
    ]
    d = b.decide(b.view(*objs), b.pod(containers={"app": CHANGED}))
    assert (d.outcome, d.reason) == ("apply", None)
    assert b.final(d) == b.APP_RES
    assert b.reasons(d) == {"app.limits.memory": "Audit"}


def test_a_guardrail_that_drops_the_only_real_change_is_the_reason() -> None:
    """CPU changes and memory repeats the pod's: HPACoupled drops the CPU, and what is
    left changes nothing. The reason is the HPA, not the tolerance."""
    same_memory = {"app": {"requests": {"cpu": "250m", "memory": "512Mi"}}}
    v = b.view(*static_objects(same_memory), b.hpa(resource="cpu"))
    for path in ("running", "admission"):
        d = b.decide(v, b.pod(), path)
        assert (d.outcome, d.reason) == ("blocked", "HPACoupled"), path
        assert "app.requests.cpu" in d.message
    # Without the HPA the CPU change goes on; with a memory HPA, nothing real is dropped.
    v.delete("HorizontalPodAutoscaler", b.NS, "web-hpa")
    assert b.decide(v, b.pod()).outcome == "apply"
    v.apply(b.hpa(resource="memory"))
    assert b.decide(v, b.pod()).outcome == "apply"
    only_memory = b.view(*static_objects(same_memory), b.hpa(resource="cpu"))
    only_memory.apply(b.static(containers={"app": {"requests": {"memory": "512Mi"}}}))
    d = b.decide(only_memory, b.pod())
    assert (d.outcome, d.reason) == ("skipped", "NoSignificantChange")
