"""The selected values through their strategy's enablement: the actions a decision starts with."""

from __future__ import annotations

from app.decide.context import Action, Context, Result, stop
from app.decide.qos_pairs import GUARANTEED_QOS, add_pair, may_pin, pinned_items
from app.model.quantities import GPU_FRACTION
from app.policy.enablement import apply_switches
from app.policy.selection import Target

#: A KAI `gpu-fraction` for a pod without one: kerf converts no workload to KAI
#: (`enablement.overrideScheduler`), whatever `setFromUnspecified` says.
NOT_KAI = "NotScheduledByKai"


def build_actions(ctx: Context) -> Result:
    """Selected values through their strategy's enablement (restores are exempt); the
    values of a Guaranteed container's request/limit pair go through it together."""
    missing: list[str] = []
    baseline = ctx.baseline
    actions: list[Action] = []
    dropped: list[tuple[Target, str]] = []
    pairs = pinned_items(ctx) if may_pin(ctx) else None
    for item in ctx.facts.items:
        target, candidate = item.target, item.candidate
        current = baseline[target.container][target.field].get(target.resource)
        if item.restore:
            actions.append(Action(item, current, candidate.amount))
            continue
        if item.strategy is None:
            missing.append(candidate.policy.metadata.name if candidate.policy else candidate.key)
            continue
        if pairs and (target.container, target.resource) in pairs:
            continue
        if current is None and target.resource == GPU_FRACTION:
            dropped.append((target, NOT_KAI))
            continue
        enabled = apply_switches(item.switches, current=current, desired=candidate.amount)
        if enabled.value is None:
            dropped.append((target, enabled.reason or "NotEnabled"))
        else:
            actions.append(Action(item, current, enabled.value))
    if pairs:
        for by_field in pairs.values():
            add_pair(ctx, by_field, actions, dropped)
    if actions:
        return Result(actions, tuple(dropped))
    if missing:
        held = stop(
            "StrategyNotFound",
            f"automationStrategyRef of {', '.join(sorted(set(missing)))} names no strategy",
        )
    elif any(reason == GUARANTEED_QOS for _, reason in dropped):
        held = stop(
            GUARANTEED_QOS,
            "retainGuaranteedQoS: no change keeps requests equal to limits ("
            + ", ".join(f"{t.container}.{t.field}.{t.resource}: {r}" for t, r in dropped)
            + ")",
            outcome="skipped",
        )
    elif any(reason == NOT_KAI for _, reason in dropped):
        held = stop(
            NOT_KAI,
            "the pod has no gpu-fraction annotation to change: kerf converts no workload to KAI",
            outcome="skipped",
        )
    else:
        held = stop(
            "NotEnabled", "the strategies enable none of the selected values", outcome="skipped"
        )
    return Result(actions, tuple(dropped), block=held)
