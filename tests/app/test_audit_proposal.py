"""Audit mode and approve-once (SPEC §2, §7): the proposal shown for approval is the step
the guardrails allow, beside the final target; an approval applies exactly that step; the
next step is a new proposal; the cooldown after an approved change says it is that
change's."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from app.decide import PodDecision
from app.model.annotations import APPROVE, APPROVE_TARGET
from app.outcome.explain import decision_json, render_text
from tests.app import builders as b

#: every check here only reads the decision (tests/app/conftest.py)
pytestmark = pytest.mark.usefixtures("checks_only_read")

NOW = b.NOW
#: a pod far above the policy's values: a decrease the 50 % step limit splits in two
BIG = {"app": {"requests": {"cpu": "1", "memory": "1Gi"}}}
ASKED = {"app": {"requests": {"cpu": "300m", "memory": "384Mi"}}}
FIRST_STEP = {"app": {"requests": {"cpu": "500m", "memory": "512Mi"}}}


def objects(*extra: Any) -> list[Any]:
    return [*b.base_objects(), b.static(containers=ASKED, mode="audit"), *extra]


def decide(*extra: Any, containers: Any = None) -> PodDecision:
    pod = b.pod(containers=containers or BIG)
    return b.decide(b.view(*objects(*extra), pod), pod)


def shown(decision: PodDecision) -> tuple[dict[str, Any], dict[str, Any]]:
    body = decision_json(decision)["proposal"]
    return body["containers"], body["target"]


def test_the_proposal_is_the_guarded_step_beside_the_target() -> None:
    d = decide()
    assert (d.outcome, d.reason) == ("skipped", "Audit")
    step, target = shown(d)
    assert step == FIRST_STEP
    assert target == ASKED
    assert d.proposal_id is not None
    assert "cpu=500m,memory=512Mi" in d.message
    assert "target app requests cpu=300m,memory=384Mi" in d.message
    assert f"{APPROVE}={d.proposal_id}" in d.message
    text = render_text({"pods": [decision_json(d)]})
    assert f"proposal {d.proposal_id}: app requests cpu=500m,memory=512Mi" in text
    assert "target: app requests cpu=300m,memory=384Mi" in text


def test_a_proposal_no_guardrail_steps_shows_the_target_as_its_step() -> None:
    d = decide(containers={"app": {"requests": {"cpu": "400m", "memory": "512Mi"}}})
    step, target = shown(d)
    assert step == target == ASKED
    assert "guardrail step" not in d.message


def test_approving_the_shown_id_applies_exactly_the_shown_step() -> None:
    proposal = decide()
    approval = b.recommendation(annotations={APPROVE: str(proposal.proposal_id)})
    d = decide(approval)
    assert (d.outcome, d.reason, d.method) == ("apply", None, "inPlace")
    assert d.values == {"app": {"requests": FIRST_STEP["app"]["requests"]}}
    assert d.proposal_id == proposal.proposal_id


def test_an_approval_of_another_id_changes_nothing() -> None:
    d = decide(b.recommendation(annotations={APPROVE: "0123456789ab"}))
    assert (d.outcome, d.reason) == ("skipped", "Audit")


def test_the_next_step_is_a_new_proposal_and_its_approval_meets_that_changes_cooldown() -> None:
    first = decide()
    first_id = str(first.proposal_id)
    record = b.recommendation(
        last_applied=FIRST_STEP,
        applied_at=NOW - timedelta(minutes=5),
        proposal=first_id,
        annotations={APPROVE: first_id},
    )
    after = decide(record, containers=FIRST_STEP)
    assert (after.outcome, after.reason) == ("skipped", "Audit")
    assert after.proposal_id not in (None, first_id)  # approvable: not used up
    assert shown(after) == (ASKED, ASKED)  # 500m → 300m is within the 50 % step
    approved = b.recommendation(
        last_applied=FIRST_STEP,
        applied_at=NOW - timedelta(minutes=5),
        proposal=first_id,
        annotations={APPROVE: str(after.proposal_id)},
    )
    d = decide(approved, containers=FIRST_STEP)
    assert (d.outcome, d.reason) == ("blocked", "Cooldown")
    assert d.message.startswith(f"cooldown 24h0m0s of the change approved as proposal {first_id},")
    assert d.next_allowed_at == NOW - timedelta(minutes=5) + timedelta(hours=24)


def test_the_cooldown_of_a_change_not_approved_says_so() -> None:
    pod = b.pod(containers=FIRST_STEP)  # the first step runs; the next waits
    objs = [*b.base_objects(), b.static(containers=ASKED)]
    record = b.recommendation(last_applied=FIRST_STEP, applied_at=NOW - timedelta(hours=1))
    d = b.decide(b.view(*objs, record, pod), pod)
    assert (d.outcome, d.reason) == ("blocked", "Cooldown")
    assert d.message.startswith("cooldown 24h0m0s of the last change, made at ")


def test_the_target_id_is_the_same_for_every_step_toward_one_target() -> None:
    big = {"app": {"requests": {"cpu": "2", "memory": "1Gi"}}}
    first = decide(containers=big)
    assert first.proposal_schedule is not None
    # 2 → 1 → 500m → 300m (cpu); 1Gi → 512Mi → 384Mi (memory): the cpu sets the count.
    assert (first.proposal_schedule.steps, first.proposal_schedule.next_at) == (3, None)
    second = decide(containers={"app": {"requests": {"cpu": "1", "memory": "512Mi"}}})
    assert second.proposal_id != first.proposal_id
    assert second.proposal_target_id == first.proposal_target_id
    assert second.proposal_schedule is not None and second.proposal_schedule.steps == 2
    other = b.static(
        containers={"app": {"requests": {"cpu": "250m", "memory": "384Mi"}}}, mode="audit"
    )
    pod = b.pod(containers=big)
    retargeted = b.decide(b.view(*b.base_objects(), other, pod), pod)
    assert retargeted.proposal_target_id not in ("", first.proposal_target_id)


def test_approve_target_approves_each_step_and_the_cooldown_keeps_them_apart() -> None:
    first = decide()
    target = {APPROVE_TARGET: first.proposal_target_id}
    d = decide(b.recommendation(annotations=target))
    assert (d.outcome, d.method) == ("apply", "inPlace")
    assert d.values == {"app": {"requests": FIRST_STEP["app"]["requests"]}}
    # The next step, approved by the same annotation, waits for the cooldown, and is shown.
    applied_at = NOW - timedelta(minutes=5)
    record = b.recommendation(
        last_applied=FIRST_STEP, applied_at=applied_at, proposal=None, annotations=target
    )
    held = decide(record, containers=FIRST_STEP)
    assert (held.outcome, held.reason) == ("blocked", "Cooldown")
    assert held.proposal_target["app"]["requests"] == {"cpu": 300, "memory": 384 * 2**20}
    assert held.proposal_schedule is not None
    assert held.proposal_schedule.next_at == applied_at + timedelta(hours=24)
    assert held.next_allowed_at == held.proposal_schedule.next_at


def test_a_rollback_ends_an_approval_of_the_target() -> None:
    first = decide()
    target = {APPROVE_TARGET: first.proposal_target_id}
    rolled_back = b.recommendation(
        annotations=target, rollback_at=NOW - timedelta(days=3), rollback_resources=("memory",)
    )
    d = decide(rolled_back)
    assert (d.outcome, d.reason) == ("skipped", "Audit")
    assert d.proposal_target_id != first.proposal_target_id
    assert "approve it with `kerf approve deployment/web -n " in d.message
