"""Audit mode: the proposal an approval would apply, and the approval itself."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import timedelta

from app.decide.context import PASS, Action, Context, Result, apply, final_resources, stop
from app.decide.results import AuditProposal, describe_resources, format_resources
from app.decide.value_rules import change_tolerance
from app.model.annotations import APPROVE, dumps
from app.model.workloads import Resources
from app.policy.schedule import Schedule, ValueGoal, schedule

#: a check of `CHECKS` as a decision runs it
Step = Callable[[Context], Result]


def _audit_proposal(ctx: Context, steps: Sequence[Step]) -> AuditProposal | None:
    """The proposal of an audited pod: the regular actions through the checks of `CHECKS`
    that set values (the per-value rules: the decrease step of maxChangePercent, the
    minimums, the refusals, the tolerance), in its order, on a decision of their own,
    since guardrails apply to an approved change as to any other. None when those checks
    leave nothing to change."""
    regular = ctx.regular()
    target = final_resources(ctx.current, regular)
    trial = Context(
        ctx.view,
        ctx.pod,
        ctx.workload,
        ctx.plan,
        ctx.facts,
        ctx.clock,
        ctx.path,
        ctx.containers,
        ctx.current,
    )
    apply(trial, Result(regular))
    for check in steps:
        if apply(trial, check(trial)) is not None:
            return None
    step = final_resources(ctx.current, trial.actions)
    changed = sorted({a.target.container for a in trial.actions})
    body = sorted(
        (a.target.container, a.target.field, a.target.resource, a.desired) for a in trial.actions
    )
    goal = sorted(
        (a.target.container, a.target.field, a.target.resource, a.desired) for a in regular
    )
    return AuditProposal(
        hashlib.sha256(dumps([body, goal]).encode()).hexdigest()[:12],
        {c: step[c] for c in changed},
        {c: target[c] for c in changed},
        _target_id(ctx, target),
        _schedule(ctx, regular, trial.actions),
    )


def _target_id(ctx: Context, target: dict[str, Resources]) -> str:
    """The same for every step toward one target (every container's values once all the
    steps are made), and new after a rollback: an approval of the whole way ends there."""
    rollback = ctx.facts.last_rollback
    since = rollback[0].isoformat() if rollback else ""
    return hashlib.sha256(dumps([sorted(target.items()), since]).encode()).hexdigest()[:12]


def _schedule(ctx: Context, regular: list[Action], step: list[Action]) -> Schedule:
    """The steps left from the pod's values to the policies' (the values this step
    changes), the first a cooldown after the workload's last change."""
    tolerance = ctx.view.global_config.tolerance_percent
    goals = {a.target: a.desired for a in regular}
    cooldown = max((ctx.settings(p).cooldown for p in ctx.policies()), default=timedelta(0))
    return schedule(
        (
            ValueGoal(
                a.target.field,
                a.target.resource,
                a.current,
                goals[a.target],
                a.item.settings,
                change_tolerance(tolerance, a),
            )
            for a in step
        ),
        last_change=ctx.facts.last_applied_at,
        cooldown=cooldown,
    )


def _audit_message(ctx: Context, proposal: AuditProposal | None) -> str:
    if proposal is None:
        return "audit mode: the guardrails leave nothing to propose, nothing changes"
    step = {c: format_resources(r) for c, r in proposal.step.items()}
    target = {c: format_resources(r) for c, r in proposal.target.items()}
    text = f"audit mode: proposal {proposal.id} would set {describe_resources(step)}"
    if step != target:
        steps = proposal.schedule.steps if proposal.schedule else 0
        text += f" (a guardrail step, the first of {steps}; target {describe_resources(target)})"
    ref = ctx.workload.ref
    return (
        text + f"; approve it with `kerf approve {ref.kind.lower()}/{ref.name} -n "
        f"{ref.namespace}` ({APPROVE}={proposal.id}), nothing changes until then"
    )


def _approved(ctx: Context, proposal: AuditProposal) -> bool:
    """`approve=<proposal id>` on the RightsizingRecommendation applies that proposal once;
    `approve-target=<target id>` every step toward that target (the cooldown still keeps
    them apart)."""
    facts = ctx.facts
    if facts.approve_target == proposal.target_id:
        return True
    approved = facts.approve
    return approved is not None and approved == proposal.id and approved != facts.approved_proposal


def check_audit(ctx: Context, steps: Sequence[Step]) -> Result:
    """Audit (mode): the change waits for an approval of its proposal (what `steps`, the
    checks that set values, leave); the approved proposal goes on, through the checks that
    follow like any change."""
    if not (ctx.regular() and ctx.audit()):
        return PASS
    proposal = _audit_proposal(ctx, steps)
    if proposal is not None and _approved(ctx, proposal):
        return Result(proposal=proposal, approved=True)
    held = stop("Audit", _audit_message(ctx, proposal), None, "skipped")
    return Result(proposal=proposal, block=held)
