"""The per-value rules on every action and the validation of the whole plan (SPEC §6)."""

from __future__ import annotations

from app.decide.context import PASS, Action, Context, Result, block, stop
from app.decide.plan_facts import Prepared
from app.decide.pod_facts import jvm_heap_bytes, oom_killed_since
from app.decide.qos_pairs import GUARANTEED_QOS
from app.model.quantities import format_resource
from app.policy.enablement import GPU
from app.policy.guardrails import NO_FACTS, NO_SIGNIFICANT_CHANGE, ValueContext, apply_value_rules
from app.policy.selection import Target


def check_value_rules(ctx: Context) -> Result:
    """Per-value rules on every regular action; restores pass unchanged. The actions it
    keeps are copies with the values the rules leave (the context's are not changed)."""
    tolerance = ctx.view.global_config.tolerance_percent
    facts = _ValueFacts(ctx)
    kept: list[Action] = []
    dropped: list[tuple[Target, str]] = []
    refusals: list[str] = []
    for action in copied(ctx.actions):
        t = action.target
        if action.item.restore:
            # Exempt from the rules, but a restore the pod already runs changes nothing.
            if action.desired == ctx.current[t.container][t.field].get(t.resource):
                dropped.append((t, NO_SIGNIFICANT_CHANGE))
            else:
                kept.append(action)
            continue
        if action.partner is not None:
            if t.field == "requests":  # the pair is ruled once, with its limit
                _pair_value_rules(ctx, facts, action, action.partner, kept, dropped, refusals)
            continue
        outcome = apply_value_rules(
            field=t.field,
            resource=t.resource,
            current=action.current,
            desired=action.desired,
            settings=action.item.settings,
            tolerance_percent=change_tolerance(tolerance, action),
            context=facts.context(action.item),
        )
        own = ctx.current[t.container][t.field].get(t.resource)
        if outcome.value is None and action.current is not None and action.current != own:
            # A new pod whose manifest differs from the last applied value keeps the last
            # applied value (the baseline): a rollout never undoes a step.
            if outcome.reason != NO_SIGNIFICANT_CHANGE:
                dropped.append((t, outcome.reason or ""))
            action.desired = action.current
            kept.append(action)
            continue
        if outcome.value is None:
            dropped.append((t, outcome.reason or NO_SIGNIFICANT_CHANGE))
            if outcome.reason != NO_SIGNIFICANT_CHANGE:
                refusals.append(outcome.reason or "")
            continue
        # The pod's own value is what changes; the baseline only bounds the step.
        if outcome.value == own:
            dropped.append((t, NO_SIGNIFICANT_CHANGE))
            continue
        action.desired = outcome.value
        kept.append(action)
    if kept:
        return Result(kept, tuple(dropped))
    every = [*ctx.dropped, *dropped]
    if refusals:
        reason = refusals[0]
        held = stop(reason, _refusal_message(reason, every))
    elif (coupled := _coupled_change(ctx, every)) is not None:
        # Only values the pod already has are left: what stopped the change is the
        # guardrail that dropped the real one, not the tolerance.
        held = stop(coupled, _refusal_message(coupled, every) + "; every other value is unchanged")
    else:
        held = stop(
            NO_SIGNIFICANT_CHANGE, "every change is within the tolerance", outcome="skipped"
        )
    return Result(kept, tuple(dropped), block=held)


def copied(actions: list[Action]) -> list[Action]:
    """Copies of actions, Guaranteed pairs kept paired: the value rules set the copies'
    values, so what a check read before stays as it read it."""
    copies = {id(a): Action(a.item, a.current, a.desired) for a in actions}
    for action in actions:
        if action.partner is not None and id(action.partner) in copies:
            copies[id(action)].partner = copies[id(action.partner)]
    return list(copies.values())


#: The guardrails before the value rules that drop single values and let the rest go on.
DROPPING_GUARDRAILS = frozenset({"HPACoupled", "VPACoupled"})


def _coupled_change(ctx: Context, dropped: list[tuple[Target, str]]) -> str | None:
    """The first guardrail of `DROPPING_GUARDRAILS` that dropped a value the pod does not
    already have, or None."""
    wanted = {item.target: item.candidate.amount for item in ctx.facts.items}
    for target, reason in dropped:
        if reason not in DROPPING_GUARDRAILS:
            continue
        own = ctx.current[target.container][target.field].get(target.resource)
        if wanted.get(target, own) != own:
            return reason
    return None


def _pair_value_rules(
    ctx: Context,
    facts: _ValueFacts,
    request: Action,
    limit: Action,
    kept: list[Action],
    dropped: list[tuple[Target, str]],
    refusals: list[str],
) -> None:
    """The per-value rules on a Guaranteed pair, which keeps one value for both fields.

    Each field's rules run on the pair's value; a refusal of either (Throttled, OOMKilled,
    rollback cooldown, JVM heap) refuses the pair. Otherwise the pair takes the highest
    value the two fields' rules leave (a field left unchanged counts as its current
    value): every rule that changes a value only raises it (the decrease step, the
    minimums), so that value satisfies the step limit and minimums of both fields.
    """
    tolerance = ctx.view.global_config.tolerance_percent
    pair = (request, limit)
    outcomes = [
        apply_value_rules(
            field=a.target.field,
            resource=a.target.resource,
            current=a.current,
            desired=a.desired,
            settings=a.item.settings,
            tolerance_percent=change_tolerance(tolerance, a),
            context=facts.context(a.item),
        )
        for a in pair
    ]
    t = request.target
    own = ctx.current[t.container]["requests"][t.resource]  # = the limit: the pair is pinned
    refused = [
        o.reason or "" for o in outcomes if o.value is None and o.reason != NO_SIGNIFICANT_CHANGE
    ]
    if refused:
        # A new pod keeps the last applied pair when there is one (a rollout never undoes
        # a step); otherwise the pair stays as the pod has it.
        value = request.current if request.current == limit.current else own
        dropped.extend(
            (
                a.target,
                (o.reason or "")
                if o.value is None and o.reason != NO_SIGNIFICANT_CHANGE
                else GUARANTEED_QOS,
            )
            for a, o in zip(pair, outcomes, strict=True)
        )
    else:
        value = max(
            o.value if o.value is not None else (a.current if a.current is not None else own)
            for a, o in zip(pair, outcomes, strict=True)
        )
    if value is None or value == own:
        if not refused:
            dropped.extend((a.target, NO_SIGNIFICANT_CHANGE) for a in pair)
        else:
            refusals.append(refused[0])
        return
    request.desired = limit.desired = value
    kept.extend(pair)


class _ValueFacts:
    """What the refusal rules need to know about a pod's containers, read once."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.last_change = ctx.facts.last_applied_at
        self.last_rollback = ctx.facts.last_rollback if ctx.running else None
        self._memory: dict[str, tuple[bool, int | None]] = {}

    def _memory_facts(self, container: str) -> tuple[bool, int | None]:
        found = self._memory.get(container)
        if found is None:
            ctx = self.ctx
            # A new pod has no status yet: OOM evidence comes from its siblings.
            pods = ctx.view.pods(ctx.workload.ref) if ctx.path == "admission" else [ctx.pod]
            found = (
                oom_killed_since(pods, container, self.last_change),
                jvm_heap_bytes(ctx.containers.get(container, {})),
            )
            self._memory[container] = found
        return found

    def context(self, item: Prepared) -> ValueContext:
        """The ValueContext of one target under its policy's guardrails."""
        target = item.target
        rolled_back: frozenset[str] = frozenset()
        last = self.last_rollback
        if last is not None and self.ctx.clock.before(last[0] + item.settings.cooldown):
            rolled_back = last[1]
        oom_killed, heap = (
            self._memory_facts(target.container) if target.resource == "memory" else (False, None)
        )
        if not (item.throttled or oom_killed or heap is not None or rolled_back):
            return NO_FACTS  # the common case: one shared context
        return ValueContext(
            throttled=item.throttled,
            oom_killed=oom_killed,
            jvm_heap_bytes=heap,
            rollback_cooldown=rolled_back,
        )


def change_tolerance(tolerance: int, action: Action) -> int:
    """The change below which a value stays: GlobalConfiguration's tolerancePercent, or the
    strategy's `safetyChecks.minCpuChangePercent` / `minMemoryChangePercent`, the larger."""
    strategy = action.item.strategy
    if strategy is None:
        return tolerance
    checks = strategy.safety_checks
    resource = action.target.resource
    if resource == "cpu":
        return max(tolerance, checks.min_cpu_change_percent)
    if resource == "memory":
        return max(tolerance, checks.min_memory_change_percent)
    return tolerance


def _refusal_message(reason: str, dropped: list[tuple[Target, str]]) -> str:
    parts = [f"{t.container}.{t.field}.{t.resource}" for t, r in dropped if r == reason]
    return f"{reason}: refused {', '.join(parts)}"


def validate_plan(ctx: Context) -> Result:
    """RequestsExceedLimits and GpuActionConflict over the whole plan, never clamped."""
    final = ctx.final()
    for container, resources in sorted(final.items()):
        for resource, request in sorted(resources["requests"].items()):
            limit = resources["limits"].get(resource)
            if limit is not None and request > limit:
                return block(
                    "RequestsExceedLimits",
                    f"container {container}: {resource} request "
                    f"{format_resource(resource, request)} is above its limit "
                    f"{format_resource(resource, limit)}",
                    restores=True,
                )
    gpu_actions = [a for a in ctx.actions if a.target.resource == GPU]
    if gpu_actions:
        # One policy's request and limit come under two keys (…-requests, …-limits): the
        # source is the key without its field.
        sources = {a.item.candidate.key.rsplit("-", 1)[0] for a in gpu_actions}
        unequal = [
            c
            for c in {a.target.container for a in gpu_actions}
            if final[c]["requests"].get(GPU) != final[c]["limits"].get(GPU)
        ]
        if len(sources) > 1 or unequal:
            return block(
                "GpuActionConflict",
                "selected GPU actions disagree"
                + (
                    f" (request ≠ limit in {', '.join(sorted(unequal))})"
                    if unequal
                    else " (several policies)"
                ),
                restores=True,
            )
    return PASS
