"""The checks of SPEC §6 as one table, in their order (`CHECKS`).

A pod's decision runs those of its path and the first that holds decides (a check that
hits only regular actions lets rollback restores go on); `pod_gate`, audit's proposal and
the fallback of a resize that cannot finish read the same table, so the order is written
once. Each check is a function from the decision so far (`Context`, which it only reads)
to a `Result`: pass, block with a reason, or the values that stand. `run_checks` applies
the results in order; it is the only writer of the decision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.decide.audit import Step, check_audit
from app.decide.bounds import (
    LIMIT_RANGE_VIOLATION,
    RESOURCE_QUOTA_EXCEEDED,
    filter_limit_ranges,
    filter_quotas,
)
from app.decide.capacity import INFEASIBLE, check_feasible, filter_node_capacity
from app.decide.context import (
    PASS,
    Action,
    Block,
    Context,
    FallbackCase,
    Path,
    Result,
    apply,
    block,
    final_resources,
)
from app.decide.method import choose_method, fallback_method, resize_restarts
from app.decide.plan_facts import strategy_facts_of
from app.decide.pod_facts import is_protected, paused_by
from app.decide.quality import (
    check_hpa,
    check_learning_period,
    check_low_confidence,
    check_stale,
    check_vpa,
)
from app.decide.value_rules import check_value_rules, validate_plan
from app.model.annotations import PAUSE_UNTIL
from app.model.durations import format_duration
from app.model.horizon import Horizon
from app.model.kube_types import PodDict
from app.model.windows import freeze_verdict, maintenance_verdict, next_change
from app.model.workloads import Resources, Workload
from app.policy.guardrails import (
    COOLDOWN,
    JVM_FIXED_HEAP,
    NO_SIGNIFICANT_CHANGE,
    OOM_KILLED,
    THROTTLED,
)
from app.policy.plans import guardrails
from app.store.inputs import (
    AUTOSCALERS,
    BOUNDS,
    KERF,
    NAMESPACE,
    NODE_USAGE,
    NODES,
    OOM_EVIDENCE,
    PODS,
    RECORD,
    SOURCES,
    WORKLOAD,
    Input,
)
from app.store.view import ClusterView

HUB_UNREACHABLE = "HubUnreachable"
BOTH: frozenset[Path] = frozenset({"admission", "running"})
RUNNING: frozenset[Path] = frozenset({"running"})

#: A check on the pod alone (no plan): the message when it holds, else None.
Gate = Callable[[ClusterView, PodDict, Workload, datetime | Horizon], str | None]
#: A check of the fallback of a failed resize: (reason, message) when it holds, else None.
FallbackCheck = Callable[[FallbackCase], tuple[str, str] | None]


@dataclass(frozen=True, slots=True)
class Check:
    """One stage of the order: the reasons it gives, the check a decision runs and the
    paths it runs on, and its forms for the pod gate and the fallback where it has them."""

    #: the reasons it can give, in the order it tries them
    reasons: tuple[str, ...]
    #: what the check decides: pass, a block, or the actions that stand after it
    decide: Step
    #: the inputs it reads beyond the pod and the plan facts (`app.store.inputs`): what ends the
    #: admission memo, the reconciler's quiet pass and queues a workload derive from these
    reads: tuple[Input, ...]
    paths: frozenset[Path] = BOTH
    gate: Gate | None = None
    fallback: FallbackCheck | None = None
    #: sets the values of the change (the per-value rules): audit's proposal runs these
    sets_values: bool = False
    #: reads the windows and methods of the strategies behind the change
    #: (`Context.strategy_facts`): the runner fixes them, from the actions standing, before
    #: the first check that does, so the windows and the method follow the same strategies
    strategies: bool = False


def _automation_disabled(
    view: ClusterView, pod: PodDict, workload: Workload, now: datetime | Horizon
) -> str | None:
    """AutomationDisabled's pod-level form."""
    if view.global_config.automation_enabled:
        return None
    return "GlobalConfiguration.automationEnabled is false"


def _paused(
    view: ClusterView, pod: PodDict, workload: Workload, now: datetime | Horizon
) -> str | None:
    """Paused's pod-level form: a pause-until on the pod, its workload or namespace."""
    pause = paused_by(view, pod, workload, now)
    if pause is None:
        return None
    message = f"paused by the {pause.source} annotation {PAUSE_UNTIL}"
    return f"{message}: {pause.reason}" if pause.reason else message


def _protected(
    view: ClusterView, pod: PodDict, workload: Workload, now: datetime | Horizon
) -> str | None:
    """ProtectedNamespace's pod-level form."""
    if not is_protected(workload, view):
        return None
    return f"namespace {workload.namespace} is protected"


# AutomationDisabled and ProtectedNamespace are configured exclusions: kerf was told to
# leave the pod alone and nothing intervened, so they are skipped, not blocked.


def _check_automation(ctx: Context) -> Result:
    if ctx.regular() and (
        message := _automation_disabled(ctx.view, ctx.pod, ctx.workload, ctx.clock)
    ):
        return block("AutomationDisabled", message, None, "skipped")
    return PASS


def _check_protected(ctx: Context) -> Result:
    if ctx.regular() and (message := _protected(ctx.view, ctx.pod, ctx.workload, ctx.clock)):
        return block("ProtectedNamespace", message, None, "skipped")
    return PASS


def _check_paused(ctx: Context) -> Result:
    """Paused holds rollback restores too: it is the one check they are not exempt from.
    A strategy's `safetyChecks.enablePauseUntilAnnotationCheck: false` lets its changes
    through."""
    if not ctx.check_on("enable_pause_until_annotation_check"):
        return PASS
    message = _paused(ctx.view, ctx.pod, ctx.workload, ctx.clock)
    return block("Paused", message, restores=True) if message else PASS


def _fallback_paused(case: FallbackCase) -> tuple[str, str] | None:
    message = _paused(case.view, case.pod, case.workload, case.now)
    return ("Paused", message) if message else None


def _check_hub(ctx: Context) -> Result:
    """HubUnreachable (proactive values only): a ConfigMap that feeds the workload did
    not load."""
    unreachable = ctx.plan.sources.unreachable
    if unreachable and any(a.item.proactive for a in ctx.regular()):
        return block(HUB_UNREACHABLE, "; ".join(unreachable))
    return PASS


def _check_freeze(ctx: Context) -> Result:
    """FreezeWindow: an exclusion window of the strategies behind the change is open."""
    strategies = ctx.strategy_facts
    assert strategies is not None, "the runner fixes the strategies before the value rules"
    exclusion = strategies.exclusion
    if not (exclusion and ctx.regular()):
        return PASS
    clock = ctx.clock
    # Window states, and so the verdict, stay as they are until one opens or closes.
    clock.until(next_change([*exclusion, *strategies.inclusion], clock.now))
    # The next allowed time also waits for an inclusion window, if there are any.
    verdict = freeze_verdict(exclusion, clock.now, inclusion_windows=strategies.inclusion)
    if verdict.allowed:
        return PASS
    return block(
        "FreezeWindow", f"exclusion window {verdict.window} is open", verdict.next_allowed_at
    )


def _check_maintenance(ctx: Context) -> Result:
    """MaintenanceWindow: inclusion windows exist and none is open; the whole plan waits
    for the earliest next allowed time."""
    strategies = ctx.strategy_facts
    assert strategies is not None, "the runner fixes the strategies before the value rules"
    if not (strategies.inclusion and ctx.regular()):
        return PASS
    clock = ctx.clock
    clock.until(next_change([*strategies.inclusion, *strategies.exclusion], clock.now))
    verdict = maintenance_verdict(strategies.inclusion, strategies.exclusion, clock.now)
    if verdict.allowed:
        return PASS
    return block("MaintenanceWindow", "no inclusion window is open", verdict.next_allowed_at)


def _check_cooldown(ctx: Context) -> Result:
    """Cooldown since the workload's last change stops a new proposal; the rollout of the
    proposal last applied goes on, one pod after another (SPEC §6). A pod's plan that
    holds both goes on with the change already made and drops the rest: a workload whose
    first pod got only part of a change (the node had no room for the rest) does not keep
    its other pods at the old values for a whole cooldown."""
    last_at = ctx.facts.last_applied_at
    regular = ctx.regular()
    if last_at is None or not regular:
        return PASS
    continuing = [a for a in regular if _continues_rollout(ctx, a)]
    if len(continuing) == len(regular):
        return PASS
    cooldown = (
        max(ctx.settings(p).cooldown for p in ctx.policies()) if ctx.policies() else timedelta(0)
    )
    if not ctx.clock.before(last_at + cooldown):
        return PASS
    if continuing:
        standing = [a for a in ctx.actions if a.item.restore or a in continuing]
        if _requests_within_limits(final_resources(ctx.current, standing)):
            dropped = tuple((a.target, COOLDOWN) for a in regular if a not in continuing)
            return Result(standing, dropped)
    approved = ctx.facts.last_proposal
    change = f"the change approved as proposal {approved}" if approved else "the last change"
    return block(
        COOLDOWN,
        f"cooldown {format_duration(cooldown)} of {change}, made at {last_at.isoformat()}",
        last_at + cooldown,
    )


def _continues_rollout(ctx: Context, action: Action) -> bool:
    """The action sets the value `lastApplied.containers` records: it is one more step of
    the change already made, not a new proposal."""
    target = action.target
    return ctx.facts.applied.get((target.container, target.field, target.resource)) == (
        action.desired
    )


def _requests_within_limits(final: dict[str, Resources]) -> bool:
    """No request of these resources is above its limit."""
    for resources in final.values():
        for resource, request in resources["requests"].items():
            limit = resources["limits"].get(resource)
            if limit is not None and request > limit:
                return False
    return True


def _check_single_replica(ctx: Context) -> Result:
    """SingleReplicaUnsafe: the method would restart or evict a lone replica, and not
    every policy allows that."""
    if ctx.workload.replicas != 1 or not ctx.regular():
        return PASS
    method = ctx.method
    restarts = method == "evict" or (method == "inPlace" and resize_restarts(ctx))
    if restarts and not all(
        ctx.settings(p).allow_single_replica_disruption for p in ctx.policies()
    ):
        return block("SingleReplicaUnsafe", f"one replica and method {method} would disrupt it")
    return PASS


def _fallback_single_replica(case: FallbackCase) -> tuple[str, str] | None:
    view = case.view
    if case.workload.replicas == 1 and not all(
        guardrails(view, p).allow_single_replica_disruption for p in case.facts.policies
    ):
        return (
            "SingleReplicaUnsafe",
            f"in-place resize failed ({case.cause}); one replica, no eviction",
        )
    return None


#: SPEC §6's order. Infeasible comes first: a value no node can hold is wrong whatever the
#: mode. The method (SPEC §7) is chosen once the plan is valid, since SingleReplicaUnsafe
#: depends on it. The namespace's LimitRanges and quotas judge the values once they are
#: final, on both paths: the API server judges both. The admission path never evaluates windows, the method, cooldown,
#: single-replica safety or node capacity.
def _check_audit(ctx: Context) -> Result:
    """Audit: its proposal is what the checks that set values leave (`_SETS_VALUES`)."""
    return check_audit(ctx, _SETS_VALUES)


CHECKS: tuple[Check, ...] = (
    Check((INFEASIBLE,), check_feasible, (NODES,)),
    Check(("Audit",), _check_audit, (RECORD, KERF)),
    Check(("AutomationDisabled",), _check_automation, (KERF,), gate=_automation_disabled),
    Check((HUB_UNREACHABLE,), _check_hub, (SOURCES,)),
    Check(
        ("Paused",),
        _check_paused,
        (WORKLOAD, NAMESPACE, KERF),
        gate=_paused,
        fallback=_fallback_paused,
    ),
    Check(("ProtectedNamespace",), _check_protected, (KERF,), gate=_protected),
    Check(("StaleRecommendation",), check_stale, (SOURCES,)),
    Check(("HPACoupled",), check_hpa, (AUTOSCALERS, KERF)),
    Check(("VPACoupled",), check_vpa, (AUTOSCALERS, KERF)),
    Check(("LearningPeriod",), check_learning_period, (SOURCES, KERF)),
    Check(("LowConfidence",), check_low_confidence, (SOURCES, KERF)),
    Check(("FreezeWindow",), _check_freeze, (KERF,), RUNNING, strategies=True),
    # A decrease within a rollback's cooldown is refused here too, as Cooldown.
    Check(
        (THROTTLED, OOM_KILLED, JVM_FIXED_HEAP, NO_SIGNIFICANT_CHANGE),
        check_value_rules,
        (KERF, RECORD, SOURCES, OOM_EVIDENCE, PODS),
        sets_values=True,
    ),
    Check(("RequestsExceedLimits", "GpuActionConflict"), validate_plan, ()),
    Check((LIMIT_RANGE_VIOLATION,), filter_limit_ranges, (BOUNDS,)),
    Check((RESOURCE_QUOTA_EXCEEDED,), filter_quotas, (BOUNDS,)),
    Check(
        ("NoCommonMethod",),
        choose_method,
        (KERF, PODS, NODES, NODE_USAGE),
        RUNNING,
        fallback=fallback_method,
        strategies=True,
    ),
    Check((COOLDOWN,), _check_cooldown, (RECORD, KERF), RUNNING),
    Check(
        ("SingleReplicaUnsafe",),
        _check_single_replica,
        (WORKLOAD, KERF),
        RUNNING,
        fallback=_fallback_single_replica,
    ),
    Check(("InsufficientNodeCapacity",), filter_node_capacity, (KERF, NODES, NODE_USAGE), RUNNING),
    Check(("MaintenanceWindow",), _check_maintenance, (KERF,), RUNNING, strategies=True),
)
#: The checks `pod_gate` reads, by reason; those of the fallback of a failed resize; those
#: of each decision path.
GATES: tuple[tuple[str, Gate], ...] = tuple(
    (c.reasons[0], c.gate) for c in CHECKS if c.gate is not None
)
FALLBACK_CHECKS: tuple[FallbackCheck, ...] = tuple(
    c.fallback for c in CHECKS if c.fallback is not None
)
#: The checks audit's proposal runs: those after Audit that set values, in order.
_SETS_VALUES: tuple[Step, ...] = tuple(c.decide for c in CHECKS if c.sets_values)


_BY_PATH: dict[Path, tuple[Check, ...]] = {
    path: tuple(c for c in CHECKS if path in c.paths) for path in BOTH
}


def run_checks(ctx: Context, start: Result) -> Block | None:
    """The decision's actions as `start` gives them, then the checks of its path in the
    order of `CHECKS`, each result applied before the next check reads the decision;
    returns the block that stopped the plan, or None. With the view's `check_reads` on,
    each check may read only the inputs it declares."""
    held = apply(ctx, start)
    if held is not None:
        return held
    view = ctx.view
    checking = view.check_reads
    try:
        for check in _BY_PATH[ctx.path]:
            if check.strategies and ctx.strategy_facts is None:
                ctx.strategy_facts = strategy_facts_of(ctx.facts, ctx.strategies())
            if checking:
                view.reading = (check.reasons[0], check.reads)
            held = apply(ctx, check.decide(ctx))
            if held is not None:
                return held
    finally:
        if checking:
            view.reading = None
    return None


def pod_gate(
    view: ClusterView, pod: PodDict, workload: Workload, now: datetime | Horizon
) -> str | None:
    """The first check with a pod-level form that holds for a pod: AutomationDisabled,
    Paused or ProtectedNamespace (they also gate the args of a ContainerArgsPolicy at
    admission)."""
    for reason, gate in GATES:
        if gate(view, pod, workload, now) is not None:
            return reason
    return None
