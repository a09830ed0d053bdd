"""What a RightsizingRecommendation shows: the summed values current → target, a reason true
for the phase, and `kerf status`'s line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.model.annotations import APPROVE, APPROVE_TARGET
from app.model.quantities import parse_resource
from app.policy.record_summary import (
    approval,
    change,
    next_action,
    per_container,
    phase_reason,
    status_line,
    summary_of,
    target_values,
    totals,
)

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
CURRENT = {
    "app": {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
    "sidecar": {"requests": {"cpu": "100m", "memory": "64Mi"}},
}
SELECTED = [
    {
        "container": "app",
        "field": "requests",
        "resource": "cpu",
        "value": "250m",
        "policyKind": "ProactivePolicy",
        "policyNamespace": "shop",
        "policyName": "web",
    },
    {
        "container": "app",
        "field": "limits",
        "resource": "memory",
        "value": "512Mi",
        "policyKind": "ClusterStaticPolicy",
        "policyNamespace": "",
        "policyName": "limits",
    },
]


def test_values_are_summed_over_the_containers_current_to_target() -> None:
    target = target_values(CURRENT, SELECTED)
    assert target["app"] == {
        "requests": {"cpu": "250m", "memory": "512Mi"},
        "limits": {"memory": "512Mi"},
    }
    assert totals(CURRENT, target) == {
        "cpu": "1100m→350m",
        "memory": "576Mi",
        "memoryLimit": "1Gi→512Mi",
    }


def test_the_summary_names_the_policies_and_a_proposal_target_wins() -> None:
    status = {
        "current": CURRENT,
        "selected": SELECTED,
        "proposal": {"target": {"app": {"requests": {"cpu": "300m"}}}},
    }
    assert summary_of(status, "shop") == {
        "cpu": "1100m→400m",
        "memory": "576Mi",
        "memoryLimit": "1Gi→512Mi",
        "policy": "ProactivePolicy/web,ClusterStaticPolicy/limits",
    }


def test_a_value_that_is_not_set_shows_a_dash() -> None:
    assert change("cpu", None, "250m") == "-→250m"
    assert change("cpu", "1", "1000m") == "1"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8000), st.integers(1, 8000)), min_size=1, max_size=4))
def test_the_sums_are_the_containers_sums(pairs: list[tuple[int, int]]) -> None:
    current = {f"c{i}": {"requests": {"cpu": f"{a}m"}} for i, (a, _) in enumerate(pairs)}
    target = {f"c{i}": {"requests": {"cpu": f"{b}m"}} for i, (_, b) in enumerate(pairs)}
    before, _, after = totals(current, target)["cpu"].partition("→")
    assert parse_resource("cpu", before) == sum(a for a, _ in pairs)
    assert parse_resource("cpu", after or before) == sum(b for _, b in pairs)


@pytest.mark.parametrize(
    ("phase", "kwargs", "shown"),
    [
        ("Failed", {"rollback_failure": "oomKilled"}, "RolledBack OOMKilled"),
        (
            "Failed",
            {"rollback_failure": "rollbackRecommendationUnavailable"},
            "RollbackRecommendationUnavailable",
        ),
        ("RolledBack", {"rollback_failure": "crashLoopBackOff"}, "CrashLoopBackOff"),
        ("RollingBack", {"rollback_failure": "adoptionThresholdNotMet"}, "AdoptionThresholdNotMet"),
        ("Applied", {"reason": "NoSignificantChange", "applied_method": "inPlace"}, "Resized"),
        ("Applied", {"reason": "Audit", "applied_method": "evict"}, "Evicted"),
        ("Applied", {"reason": "Audit", "proposed": True}, "Audit"),
        ("Applied", {"outcome": "blocked", "reason": "Cooldown"}, "Cooldown"),
        ("Pending", {"outcome": "apply"}, "InProgress"),
        ("Pending", {"outcome": "pending", "reason": "NoRunningPods"}, "NoRunningPods"),
        ("Blocked", {"outcome": "blocked", "reason": "LowConfidence"}, "LowConfidence"),
        ("Skipped", {"reason": "NoSignificantChange"}, "NoSignificantChange"),
    ],
)
def test_the_reason_is_true_for_the_phase(phase: str, kwargs: dict, shown: str) -> None:
    kwargs = {"outcome": "skipped", "reason": None, **kwargs}
    assert phase_reason(phase, **kwargs) == shown


def record(status: dict, annotations: dict | None = None) -> dict:
    return {
        "metadata": {
            "name": "deployment-web",
            "namespace": "shop",
            "annotations": annotations or {},
        },
        "spec": {"targetRef": {"kind": "Deployment", "name": "web"}},
        "status": {"workload": "Deployment/web", "current": CURRENT, **status},
    }


PROPOSAL = {
    "id": "p1",
    "targetId": "t1",
    "containers": {"app": {"requests": {"cpu": "500m"}}},
    "target": {"app": {"requests": {"cpu": "250m"}}},
    "steps": 2,
    "cooldown": "24h0m0s",
}


def test_a_proposal_awaits_approval_until_it_or_its_target_is_approved() -> None:
    assert approval(record({})) is None
    assert approval(record({"proposal": PROPOSAL})) == "awaiting"
    assert approval(record({"proposal": PROPOSAL}, {APPROVE: "p1"})) == "step"
    used = record({"proposal": PROPOSAL, "approvedProposal": "p1"}, {APPROVE: "p1"})
    assert approval(used) == "awaiting"
    assert approval(record({"proposal": PROPOSAL}, {APPROVE_TARGET: "t1"})) == "target"
    assert approval(record({"proposal": PROPOSAL}, {APPROVE_TARGET: "t0"})) == "awaiting"


def test_the_next_action_says_what_and_when() -> None:
    later = NOW + timedelta(hours=5)
    waiting = record(
        {"phase": "Proposed", "proposal": {**PROPOSAL, "nextAt": "2026-12-06T17:00:00Z"}}
    )
    assert next_action(waiting, NOW) == (
        "approve: kerf approve deployment/web -n shop "
        "(step at 2026-12-06T17:00:00Z (in 5h), then 1 more a cooldown (24h0m0s) apart)"
    )
    held = record(
        {"phase": "Applied", "proposal": PROPOSAL, "nextAllowedAt": "2026-12-06T17:00:00Z"},
        {APPROVE_TARGET: "t1"},
    )
    assert next_action(held, NOW) == (
        "approved step at 2026-12-06T17:00:00Z (in 5h), then 1 more a cooldown (24h0m0s) apart"
    )
    assert next_action(held, later) == "approved step now, then 1 more a cooldown (24h0m0s) apart"
    blocked = record({"phase": "Blocked", "reason": "LowConfidence"})
    assert next_action(blocked, NOW) == "wait until LowConfidence clears"
    rollback = record(
        {
            "phase": "RolledBack",
            "conditions": [
                {
                    "type": "Rollback",
                    "status": "True",
                    "message": "oomKilled: …; turn 1: next: retry the recommendation (turn 2) at 2026-12-06T12:04:00Z",
                }
            ],
        }
    )
    assert (
        next_action(rollback, NOW)
        == "rollback: retry the recommendation (turn 2) at 2026-12-06T12:04:00Z"
    )
    assert next_action(record({"phase": "Applied"}), NOW) == "none"


def test_a_status_line_has_kubectl_notation_and_no_python_reprs() -> None:
    line = status_line(
        record(
            {
                "phase": "Proposed",
                "reason": "Audit",
                "selected": SELECTED,
                "summary": {"reason": "Audit"},
            }
        ),
        NOW,
    )
    assert line[:4] == ["shop", "deployment/web", "Proposed", "Audit"]
    assert line[4] == (
        "app cpu 1→250m memory 512Mi, limits memory 1Gi→512Mi; sidecar cpu 100m memory 64Mi"
    )
    assert not any(c in " ".join(line) for c in "{}[]'")


def test_a_proposal_of_one_container_leaves_the_others_as_they_are() -> None:
    step = target_values(CURRENT, (), {"app": {"requests": {"cpu": "500m"}}})
    assert per_container(CURRENT, step) == [
        "app cpu 1→500m memory 512Mi, limits memory 1Gi",
        "sidecar cpu 100m memory 64Mi",
    ]
