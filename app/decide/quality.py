"""The quality of proactive values and the autoscalers that own values: StaleRecommendation,
HPACoupled, VPACoupled, LearningPeriod and LowConfidence, one check each (their order is
`CHECKS`'s, SPEC §6)."""

from __future__ import annotations

from datetime import timedelta

from app.decide.context import Action, Context, Stop, block_regular
from app.decide.pod_facts import hpa_coupled_resources, vpa_held_targets
from app.durations import format_duration


def _proactive(ctx: Context) -> list[Action]:
    """The regular actions whose values come from a proactive policy."""
    if not ctx.facts.any_proactive:
        return []
    return [a for a in ctx.regular() if a.item.proactive]


def check_stale(ctx: Context) -> None:
    """StaleRecommendation: a row's analysis is older than its policy's maxAnalysisAgeDays."""
    for action in _proactive(ctx):
        item = action.item
        row = item.row
        if row is None:
            continue
        max_age = item.max_age_days
        limit = item.max_age if item.max_age is not None else timedelta(days=max_age)
        if ctx.clock.elapsed_over(row.analyzed_at, limit):
            block_regular(
                ctx,
                "StaleRecommendation",
                f"container {row.container}: analysis of {row.analyzed_at.isoformat()} is older than {max_age} days",
            )
            return


def check_hpa(ctx: Context) -> None:
    """HPACoupled: the resources an HPA scales on by utilization are dropped, and the
    change is blocked when nothing is left."""
    coupled = hpa_coupled_resources(ctx.view.hpas_for(ctx.workload))
    if coupled and ctx.check_on("enable_hpa_filter"):
        kept = [a for a in ctx.actions if a.item.restore or a.target.resource not in coupled]
        ctx.dropped.extend((a.target, "HPACoupled") for a in ctx.actions if a not in kept)
        ctx.replace_actions(kept)
        if not ctx.actions:
            raise Stop(
                "blocked",
                "HPACoupled",
                f"an HPA scales on {', '.join(sorted(coupled))} utilization",
            )


def check_learning_period(ctx: Context) -> None:
    """LearningPeriod: a row covers less time than its policy's learning period."""
    for action in _proactive(ctx):
        settings = action.item.settings
        row = action.item.row
        if row is None or row.coverage_hours is None:
            continue  # a source that reports no coverage (Kubex's): the hub's final word
        coverage = action.item.coverage
        if coverage is None:
            coverage = timedelta(hours=row.coverage_hours)
        if coverage < settings.learning_period:
            block_regular(
                ctx,
                "LearningPeriod",
                f"container {row.container}: {row.coverage_hours:g}h of data, {format_duration(settings.learning_period)} needed",
            )
            return


def check_low_confidence(ctx: Context) -> None:
    """LowConfidence: the lowest confidence of the rows is below the policies' minimum."""
    proactive = _proactive(ctx)
    score = ctx.facts.lowest_confidence
    if proactive and score is not None:
        threshold = max(a.item.settings.min_confidence for a in proactive)
        if score < threshold:
            block_regular(ctx, "LowConfidence", f"confidence {score:g} is below {threshold:g}")


def _key(action: Action) -> tuple[str, str, str]:
    return (action.target.container, action.target.field, action.target.resource)


def check_vpa(ctx: Context) -> None:
    """VPACoupled: the values a VerticalPodAutoscaler of the workload holds are dropped,
    and the change is blocked when nothing is left (two controllers setting the same
    requests undo each other). `enableVpaFilter` is off only when every strategy behind
    the change turns it off; `blockResizeOnVpaControlledResources` counts for a strategy
    that keeps `enableVpaFilter` on, and is on when any such strategy turns it on."""
    vpas = ctx.view.vpas_for(ctx.workload)
    if not vpas or not ctx.check_on("enable_vpa_filter"):
        return
    declared = any(
        s.safety_checks.enable_vpa_filter
        and s.safety_checks.block_resize_on_vpa_controlled_resources
        for s in ctx.strategies()
    )
    containers = {a.target.container for a in ctx.actions}
    held = vpa_held_targets(vpas, containers, declared=declared)
    if not held:
        return
    # A Guaranteed container's pair changes together: a held request holds its limit.
    kept = [
        a
        for a in ctx.actions
        if a.item.restore
        or not (_key(a) in held or (a.partner is not None and _key(a.partner) in held))
    ]
    gone = [a for a in ctx.actions if a not in kept]
    ctx.dropped.extend((a.target, "VPACoupled") for a in gone)
    ctx.replace_actions(kept)
    if gone and not ctx.actions:
        by_vpa: dict[str, list[str]] = {}
        for a in gone:
            name = held.get(_key(a)) or held[_key(a.partner or a)]
            by_vpa.setdefault(name, []).append(
                f"{a.target.container} {a.target.resource} {a.target.field}"
            )
        raise Stop(
            "blocked",
            "VPACoupled",
            "; ".join(
                f"VerticalPodAutoscaler {name} sets {', '.join(sorted(values))}"
                for name, values in sorted(by_vpa.items())
            ),
        )
