"""The checks of SPEC §6 in their order; the first that holds decides."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from app.annotations import PAUSE_UNTIL
from app.decide.audit import _approved, _audit_message, _audit_proposal
from app.decide.capacity import _check_feasible, _filter_node_capacity
from app.decide.context import _Action, _block_regular, _Context, _Stop
from app.decide.method import _method, _restarts_container, _strategy_facts
from app.decide.pod_facts import hpa_coupled_resources, is_protected, paused_by
from app.decide.value_rules import _apply_value_rules, _validate_plan
from app.durations import format_duration
from app.guardrails import (
    COOLDOWN,
)
from app.horizon import Horizon
from app.view import ClusterView
from app.windows import freeze_verdict, maintenance_verdict
from app.workloads import Workload

HUB_UNREACHABLE = "HubUnreachable"


def _run_checks(ctx: _Context) -> str | None:
    """The checks in the order of SPEC §6; returns the method."""
    view, clock, running = ctx.view, ctx.clock, ctx.running
    config = view.global_config
    # Infeasible: a value no node can hold is wrong whatever the mode, so it comes first
    _check_feasible(ctx)
    # Audit (mode)
    if ctx.regular() and ctx.audit():
        ctx.proposal = _audit_proposal(ctx)
        if ctx.proposal is not None and _approved(ctx, ctx.proposal.id):
            ctx.approved_id = ctx.proposal.id
        else:
            _block_regular(ctx, "Audit", _audit_message(ctx.proposal), None, "skipped")
    # AutomationDisabled and ProtectedNamespace are configured exclusions: kerf was told to
    # leave the pod alone and nothing intervened, so they are skipped, not blocked.
    if ctx.regular() and not config.automation_enabled:
        _block_regular(
            ctx,
            "AutomationDisabled",
            "GlobalConfiguration.automationEnabled is false",
            None,
            "skipped",
        )
    # HubUnreachable (proactive only): a ConfigMap that feeds this workload did not load
    unreachable = ctx.plan.sources.unreachable
    if unreachable and any(a.item.proactive for a in ctx.regular()):
        _block_regular(ctx, HUB_UNREACHABLE, "; ".join(unreachable))
    # Paused (applies to restores too)
    paused = paused_by(view, ctx.pod, ctx.workload, clock)
    if paused:
        raise _Stop("blocked", "Paused", f"paused by the {paused} annotation {PAUSE_UNTIL}")
    # ProtectedNamespace
    if ctx.regular() and is_protected(ctx.workload.namespace, view):
        _block_regular(
            ctx,
            "ProtectedNamespace",
            f"namespace {ctx.workload.namespace} is protected",
            None,
            "skipped",
        )
    _check_recommendation_quality(ctx)
    # FreezeWindow (the strategies are those of the actions standing before the value rules)
    strategies = _strategy_facts(ctx, ctx.strategies())
    exclusion = strategies.exclusion
    if running and exclusion and ctx.regular():
        # The next allowed time also waits for an inclusion window, if there are any.
        clock.pin()  # windows read the clock in ways a span does not describe
        verdict = freeze_verdict(exclusion, clock.now, inclusion_windows=strategies.inclusion)
        if not verdict.allowed:
            _block_regular(
                ctx,
                "FreezeWindow",
                f"exclusion window {verdict.window} is open",
                verdict.next_allowed_at,
            )
    _apply_value_rules(ctx)
    _validate_plan(ctx)
    method = _method(ctx, strategies) if running else "admission"
    if running and ctx.regular():
        _check_cooldown(ctx)
        _check_single_replica(ctx, method)
        _filter_node_capacity(ctx)
        inclusion = strategies.inclusion
        if inclusion:
            clock.pin()
        verdict = maintenance_verdict(inclusion, exclusion, clock.now) if inclusion else None
        if verdict is not None and not verdict.allowed:
            _block_regular(
                ctx, "MaintenanceWindow", "no inclusion window is open", verdict.next_allowed_at
            )
    return method


def pod_gate(
    view: ClusterView, pod: Mapping[str, Any], workload: Workload, now: datetime | Horizon
) -> str | None:
    """The first of AutomationDisabled, Paused, ProtectedNamespace that holds for a pod
    (these also gate the args of a ContainerArgsPolicy at admission)."""
    if not view.global_config.automation_enabled:
        return "AutomationDisabled"
    if paused_by(view, pod, workload, now):
        return "Paused"
    if is_protected(workload.namespace, view):
        return "ProtectedNamespace"
    return None


def _proactive(ctx: _Context) -> list[_Action]:
    """The regular actions whose values come from a proactive policy."""
    if not ctx.facts.any_proactive:
        return []
    return [a for a in ctx.regular() if a.item.proactive]


def _check_recommendation_quality(ctx: _Context) -> None:
    """StaleRecommendation, HPACoupled, LearningPeriod, LowConfidence."""
    for action in _proactive(ctx):
        item = action.item
        row = item.row
        if row is None:
            continue
        max_age = item.max_age_days
        limit = item.max_age if item.max_age is not None else timedelta(days=max_age)
        if ctx.clock.elapsed_over(row.analyzed_at, limit):
            _block_regular(
                ctx,
                "StaleRecommendation",
                f"container {row.container}: analysis of {row.analyzed_at.isoformat()} is older than {max_age} days",
            )
            return
    coupled = hpa_coupled_resources(ctx.view.hpas_for(ctx.workload))
    if coupled:
        kept = [a for a in ctx.actions if a.item.restore or a.target.resource not in coupled]
        ctx.dropped.extend((a.target, "HPACoupled") for a in ctx.actions if a not in kept)
        ctx.replace_actions(kept)
        if not ctx.actions:
            raise _Stop(
                "blocked",
                "HPACoupled",
                f"an HPA scales on {', '.join(sorted(coupled))} utilization",
            )
    proactive = _proactive(ctx)
    for action in proactive:
        settings = action.item.settings
        row = action.item.row
        if row is None:
            continue
        coverage = action.item.coverage
        if coverage is None:
            coverage = timedelta(hours=row.coverage_hours)
        if coverage < settings.learning_period:
            _block_regular(
                ctx,
                "LearningPeriod",
                f"container {row.container}: {row.coverage_hours:g}h of data, {format_duration(settings.learning_period)} needed",
            )
            return
    score = ctx.facts.lowest_confidence
    if proactive and score is not None:
        threshold = max(a.item.settings.min_confidence for a in proactive)
        if score < threshold:
            _block_regular(ctx, "LowConfidence", f"confidence {score:g} is below {threshold:g}")


def _check_cooldown(ctx: _Context) -> None:
    """Cooldown since the workload's last change stops a new proposal; the rollout of the
    proposal last applied goes on, one pod after another (SPEC §6)."""
    last_at = ctx.facts.last_applied_at
    if last_at is None or _continues_rollout(ctx):
        return
    cooldown = (
        max(ctx.settings(p).cooldown for p in ctx.policies()) if ctx.policies() else timedelta(0)
    )
    if ctx.clock.before(last_at + cooldown):
        approved = ctx.facts.last_proposal
        change = f"the change approved as proposal {approved}" if approved else "the last change"
        _block_regular(
            ctx,
            COOLDOWN,
            f"cooldown {format_duration(cooldown)} of {change}, made at {last_at.isoformat()}",
            last_at + cooldown,
        )


def _continues_rollout(ctx: _Context) -> bool:
    """Every value the pod's plan sets is the one `lastApplied.containers` records: the
    pod is one more step of the change already made, not a new proposal."""
    applied = ctx.facts.applied
    regular = ctx.regular()
    return bool(regular) and all(
        applied.get((a.target.container, a.target.field, a.target.resource)) == a.desired
        for a in regular
    )


def _check_single_replica(ctx: _Context, method: str | None) -> None:
    if ctx.workload.replicas != 1:
        return
    restarts = method == "evict" or (method == "inPlace" and _restarts_container(ctx))
    if restarts and not all(
        ctx.settings(p).allow_single_replica_disruption for p in ctx.policies()
    ):
        _block_regular(
            ctx, "SingleReplicaUnsafe", f"one replica and method {method} would disrupt it"
        )
