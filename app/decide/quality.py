"""The quality of proactive values and the autoscalers that own values: StaleRecommendation,
HPACoupled, VPACoupled, LearningPeriod and LowConfidence, one check each (their order is
`CHECKS`'s, SPEC §6)."""

from __future__ import annotations

from datetime import timedelta

from app.decide.context import PASS, Action, Context, Result, block, stop
from app.decide.pod_facts import hpa_coupled_resources, vpa_held_targets
from app.model.durations import format_duration


def _proactive(ctx: Context) -> list[Action]:
    """The regular actions whose values come from a proactive policy."""
    if not ctx.facts.any_proactive:
        return []
    return [a for a in ctx.regular() if a.item.proactive]


def check_stale(ctx: Context) -> Result:
    """StaleRecommendation: a row's analysis is older than its policy's maxAnalysisAgeDays."""
    for action in _proactive(ctx):
        item = action.item
        row = item.row
        if row is None:
            continue
        max_age = item.max_age_days
        limit = item.max_age if item.max_age is not None else timedelta(days=max_age)
        if ctx.clock.elapsed_over(row.analyzed_at, limit):
            return block(
                "StaleRecommendation",
                f"container {row.container}: analysis of {row.analyzed_at.isoformat()} is older than {max_age} days",
            )
    return PASS


def check_hpa(ctx: Context) -> Result:
    """HPACoupled: the resources an HPA scales on by utilization are dropped, and the
    change is blocked when nothing is left."""
    coupled = hpa_coupled_resources(ctx.view.autoscalers("HorizontalPodAutoscaler", ctx.workload))
    if not (coupled and ctx.check_on("enable_hpa_filter")):
        return PASS
    kept = [a for a in ctx.actions if a.item.restore or a.target.resource not in coupled]
    dropped = tuple((a.target, "HPACoupled") for a in ctx.actions if a not in kept)
    if kept:
        return Result(kept, dropped)
    message = f"an HPA scales on {', '.join(sorted(coupled))} utilization"
    return Result(kept, dropped, block=stop("HPACoupled", message))


def check_learning_period(ctx: Context) -> Result:
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
            return block(
                "LearningPeriod",
                f"container {row.container}: {row.coverage_hours:g}h of data, {format_duration(settings.learning_period)} needed",
            )
    return PASS


def check_low_confidence(ctx: Context) -> Result:
    """LowConfidence: the lowest confidence of the rows is below the policies' minimum."""
    proactive = _proactive(ctx)
    score = ctx.facts.lowest_confidence
    if proactive and score is not None:
        threshold = max(a.item.settings.min_confidence for a in proactive)
        if score < threshold:
            return block("LowConfidence", f"confidence {score:g} is below {threshold:g}")
    return PASS


def _key(action: Action) -> tuple[str, str, str]:
    return (action.target.container, action.target.field, action.target.resource)


def check_vpa(ctx: Context) -> Result:
    """VPACoupled: the values a VerticalPodAutoscaler of the workload holds are dropped,
    and the change is blocked when nothing is left (two controllers setting the same
    requests undo each other). `enableVpaFilter` is off only when every strategy behind
    the change turns it off; `blockResizeOnVpaControlledResources` counts for a strategy
    that keeps `enableVpaFilter` on, and is on when any such strategy turns it on."""
    vpas = ctx.view.autoscalers("VerticalPodAutoscaler", ctx.workload)
    if not vpas or not ctx.check_on("enable_vpa_filter"):
        return PASS
    declared = any(
        s.safety_checks.enable_vpa_filter
        and s.safety_checks.block_resize_on_vpa_controlled_resources
        for s in ctx.strategies()
    )
    containers = {a.target.container for a in ctx.actions}
    held = vpa_held_targets(vpas, containers, declared=declared)
    if not held:
        return PASS
    # A Guaranteed container's pair changes together: a held request holds its limit.
    kept = [
        a
        for a in ctx.actions
        if a.item.restore
        or not (_key(a) in held or (a.partner is not None and _key(a.partner) in held))
    ]
    gone = [a for a in ctx.actions if a not in kept]
    dropped = tuple((a.target, "VPACoupled") for a in gone)
    if not (gone and not kept):
        return Result(kept, dropped)
    by_vpa: dict[str, list[str]] = {}
    for a in gone:
        name = held.get(_key(a)) or held[_key(a.partner or a)]
        by_vpa.setdefault(name, []).append(
            f"{a.target.container} {a.target.resource} {a.target.field}"
        )
    message = "; ".join(
        f"VerticalPodAutoscaler {name} sets {', '.join(sorted(values))}"
        for name, values in sorted(by_vpa.items())
    )
    return Result(kept, dropped, block=stop("VPACoupled", message))
