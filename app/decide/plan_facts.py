"""What a decision needs from the workload plan alone, resolved once per plan and set
of containers and kept in the plan's memo."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from app.decide.results import SelectedValue
from app.model.annotations import APPROVE, APPROVE_TARGET
from app.model.crd import (
    AutomationStrategy,
    AutomationStrategySpec,
    ClusterAutomationStrategy,
    KerfResource,
    LastApplied,
    Window,
)
from app.model.quantities import QuantityError, parse_resource
from app.model.recommendations import RecommendationRow
from app.model.workloads import Workload
from app.policy.enablement import Switches, resolve_switches
from app.policy.guardrails import GuardrailSettings
from app.policy.plans import WorkloadPlan, guardrails, read_as_plan
from app.policy.selection import Candidate, Target
from app.policy.sync import PROACTIVE_KINDS, ROLLBACK_KINDS
from app.store.view import ClusterView

#: The resources whose requests and limits make a pod's QoS class (Guaranteed when equal).
QOS_RESOURCES = ("cpu", "memory")

PARTNER_FIELD = {"requests": "limits", "limits": "requests"}


@dataclass(frozen=True, slots=True)
class Prepared:
    """What one selected target needs that depends only on the workload plan."""

    target: Target
    candidate: Candidate
    restore: bool
    strategy: AutomationStrategySpec | None
    switches: Switches | None
    settings: GuardrailSettings
    audit: bool = False
    proactive: bool = False
    #: the workload's recommendation row for the target's container
    row: RecommendationRow | None = None
    #: the row's CPU throttling ratio is at or above the policy's rollback threshold
    throttled: bool = False
    #: the policy's maxAnalysisAgeDays, and as a span (None when too long for a timedelta)
    max_age_days: int = 5
    max_age: timedelta | None = None
    #: the row's coverage as a span (None without a row or when too long for a timedelta)
    coverage: timedelta | None = None
    #: the strategy keeps a Guaranteed container's requests equal to its limits
    retain_qos: bool = False
    #: the strategy's switches for the other field of this resource (CPU and memory only):
    #: what a change of the partner value, made to keep the pair equal, may do
    partner_switches: Switches | None = None


@dataclass(frozen=True, slots=True)
class PlanFacts:
    """What a decision needs that depends only on the workload plan and the containers
    selected for: resolved once per plan and container set, kept in the plan's memo.

    Everything here derives from the workload, the kerf objects (policies, strategies,
    GlobalConfiguration, the RightsizingRecommendation) and the recommendation rows; the
    view drops the plan whenever any of them changes. Pod, node, namespace and HPA facts
    are never kept here.
    """

    selected: dict[Target, Candidate]
    #: `selected` as reported, ordered by container, field, resource
    winners: tuple[SelectedValue, ...]
    #: `winners` in their JSON form (`SelectedValue.as_dict`), shared: readers never
    #: change them
    winners_json: tuple[dict[str, str], ...]
    items: list[Prepared]
    #: the record's `approve` and `approve-target` annotations and `approvedProposal`
    #: (audit's approvals; the plan keeps what decisions read of the record, not the record)
    approve: str | None
    approve_target: str | None
    approved_proposal: str | None
    rows: Mapping[str, RecommendationRow]
    #: the lowest confidence among the rows (None when no row reports one)
    lowest_confidence: float | None
    #: `lastApplied.at` (the record's status is parsed on each read: the plan keeps only
    #: what decisions use of it, not the models)
    last_applied_at: datetime | None
    #: `lastApplied.containers` parsed: (container, field, resource) → amount
    applied: Mapping[tuple[str, str, str], int]
    #: `lastApplied.proposal`: the approved proposal the last change carried out
    last_proposal: str | None
    #: `lastRollback`: when, and the resources it rolled back (all when it names none)
    last_rollback: tuple[datetime, frozenset[str]] | None
    any_proactive: bool
    #: containers with a regular CPU or memory item whose strategy retains Guaranteed QoS
    qos_containers: tuple[str, ...]
    #: the items that can become regular actions (not restores, strategy found)
    regular_count: int
    #: the distinct policies, strategies and audit mode over all those items: what a
    #: decision whose regular actions are all of them has (the common case)
    policies: list[KerfResource]
    strategies: list[AutomationStrategySpec]
    audit: bool
    #: the windows and methods of `strategies`
    strategy_facts: StrategyFacts


def policies_of(
    items: Iterable[Prepared],
) -> tuple[list[KerfResource], list[AutomationStrategySpec], bool]:
    """The distinct policies and strategies of some regular items (in order of first
    appearance) and whether any of them is in audit mode."""
    policies: dict[int, KerfResource] = {}
    strategies: dict[int, AutomationStrategySpec] = {}
    audit = False
    for item in items:
        policy = item.candidate.policy
        if policy is not None:
            policies[id(policy)] = policy
        if item.strategy is not None:
            strategies[id(item.strategy)] = item.strategy
        audit = audit or item.audit
    return list(policies.values()), list(strategies.values()), audit


def _target_order(item: tuple[Target, Candidate]) -> tuple[str, str, str]:
    t = item[0]
    return (t.container, t.field, t.resource)


def _selected_value(target: Target, candidate: Candidate) -> SelectedValue:
    policy = candidate.policy
    return SelectedValue(
        container=target.container,
        field=target.field,
        resource=target.resource,
        value=candidate.value,
        policy_kind=candidate.kind,
        policy_namespace=(policy.metadata.namespace or "") if policy else "",
        policy_name=policy.metadata.name if policy else "",
        annotation_key=candidate.key,
    )


def _applied_amounts(last: LastApplied | None) -> dict[tuple[str, str, str], int]:
    """`lastApplied.containers` as amounts, so comparisons are semantic (`1` = `1000m`);
    a quantity that does not parse names no value (the API server would not store one)."""
    amounts: dict[tuple[str, str, str], int] = {}
    if last is None:
        return amounts
    for container, values in last.containers.items():
        for fld in ("requests", "limits"):
            for resource, quantity in getattr(values, fld).items():
                try:
                    amounts[(container, fld, resource)] = parse_resource(resource, quantity)
                except QuantityError:
                    continue
    return amounts


def facts_for(
    view: ClusterView, workload: Workload, plan: WorkloadPlan, names: tuple[str, ...]
) -> PlanFacts:
    """The plan facts for these containers, built once per plan and container set."""
    key = ("facts", names)
    found = plan.memo.get(key)
    if found is None:
        found = read_as_plan(view, lambda: _build_plan_facts(view, workload, plan, names))
        # Names come from the pod: keep facts only for the name sets the plan keeps
        # selections for (`WorkloadPlan.select_for`, which building the facts called).
        if names in plan.selections:
            plan.memo[key] = found
    return found


def as_recorded(facts: PlanFacts, last_applied: LastApplied) -> PlanFacts:
    """The facts as they read once the status records `last_applied`: a pass that is
    about to write it decides the next change as the pass after it would (its cooldown
    from that change)."""
    return replace(
        facts,
        last_applied_at=last_applied.at,
        applied=_applied_amounts(last_applied),
        last_proposal=last_applied.proposal,
    )


def _build_plan_facts(
    view: ClusterView, workload: Workload, plan: WorkloadPlan, names: tuple[str, ...]
) -> PlanFacts:
    selected = plan.select_for(names)
    rows = view.recommendations("rows", workload.ref)
    ordered = sorted(selected.items(), key=_target_order)
    items = [
        _prepare(view, target, candidate, rows.get(target.container))
        for target, candidate in ordered
    ]
    regular = [i for i in items if not i.restore and i.strategy is not None]
    policies, strategies, audit = policies_of(regular)
    record = view.recommendations("record", workload.ref)
    status = record.status if record else None
    annotations = record.metadata.annotations if record else {}
    last_applied = status.last_applied if status else None
    winners = tuple(_selected_value(target, candidate) for target, candidate in ordered)
    return PlanFacts(
        selected=selected,
        winners=winners,
        winners_json=tuple(w.as_dict() for w in winners),
        items=items,
        approve=annotations.get(APPROVE),
        approve_target=annotations.get(APPROVE_TARGET),
        approved_proposal=status.approved_proposal if status else None,
        rows=rows,
        lowest_confidence=min(scores) if (scores := _confidences(rows)) else None,
        last_applied_at=last_applied.at if last_applied else None,
        applied=_applied_amounts(last_applied),
        last_proposal=last_applied.proposal if last_applied else None,
        last_rollback=(
            (rollback.at, frozenset(rollback.resources or ("cpu", "memory")))
            if status and (rollback := status.last_rollback)
            else None
        ),
        any_proactive=any(i.proactive for i in items),
        qos_containers=tuple(
            dict.fromkeys(
                i.target.container
                for i in regular
                if i.retain_qos and i.target.resource in QOS_RESOURCES
            )
        ),
        regular_count=len(regular),
        policies=policies,
        strategies=strategies,
        audit=audit,
        strategy_facts=_strategy_facts(strategies),
    )


def _prepare(
    view: ClusterView, target: Target, candidate: Candidate, row: RecommendationRow | None
) -> Prepared:
    """Resolve what one selected target needs from its policy and its row: strategy,
    switches, guardrail settings, audit mode, the row's facts for the quality checks."""
    settings = guardrails(view, candidate.policy)
    if candidate.kind in ROLLBACK_KINDS:
        return Prepared(target, candidate, True, None, None, settings)
    spec = getattr(candidate.policy, "spec", None)
    max_age_days = getattr(getattr(spec, "safety_checks", None), "max_analysis_age_days", 5)
    strategy = strategy_for(view, candidate.policy) if candidate.policy else None
    switches = (
        resolve_switches(
            strategy.spec,
            container=target.container,
            field=target.field,
            resource=target.resource,
        )
        if strategy is not None
        else None
    )
    return Prepared(
        target,
        candidate,
        False,
        strategy.spec if strategy is not None else None,
        switches,
        settings,
        getattr(spec, "mode", "auto") == "audit",
        candidate.kind in PROACTIVE_KINDS,
        row,
        throttled=bool(
            row
            and row.cpu_throttling_ratio is not None
            and row.cpu_throttling_ratio >= settings.throttling_ratio
        ),
        max_age_days=max_age_days,
        max_age=_span(days=max_age_days),
        coverage=(
            _span(hours=row.coverage_hours)
            if row is not None and row.coverage_hours is not None
            else None
        ),
        retain_qos=strategy is not None
        and strategy.spec.retain_guaranteed_qos
        and strategy.spec.safety_checks.retain_guaranteed_qos,
        partner_switches=(
            resolve_switches(
                strategy.spec,
                container=target.container,
                field=PARTNER_FIELD[target.field],
                resource=target.resource,
            )
            if strategy is not None and target.resource in QOS_RESOURCES
            else None
        ),
    )


def _confidences(rows: Mapping[str, RecommendationRow]) -> list[float]:
    """The confidences the rows report (Kubex's rows report none)."""
    return [row.confidence for row in rows.values() if row.confidence is not None]


def _span(**amount: float) -> timedelta | None:
    """timedelta(**amount), or None when it cannot be one: the check that needs it builds
    it again then and fails there, as it always did, rather than every decision here."""
    try:
        return timedelta(**amount)
    except (OverflowError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class StrategyFacts:
    """What a set of contributing strategies decides together."""

    exclusion: list[Window]
    inclusion: list[Window]
    #: the methods every strategy allows
    methods: frozenset[str]
    #: every strategy allows an in-place resize that restarts a container
    restart_ok: bool


def strategy_facts_of(facts: PlanFacts, strategies: list[AutomationStrategySpec]) -> StrategyFacts:
    """The windows and methods of these strategies: the plan facts' own when they are the
    strategies of every regular item (the common case), else worked out afresh."""
    if strategies is facts.strategies:
        return facts.strategy_facts
    return _strategy_facts(strategies)


def _strategy_facts(strategies: list[AutomationStrategySpec]) -> StrategyFacts:
    return StrategyFacts(
        exclusion=[w for s in strategies for w in s.scheduling.exclusion_windows],
        inclusion=[w for s in strategies for w in s.scheduling.inclusion_windows],
        methods=common_methods(strategies),
        restart_ok=all(s.in_place_resize.container_restart for s in strategies),
    )


def common_methods(strategies: list[AutomationStrategySpec]) -> frozenset[str]:
    """The methods every one of these strategies allows."""
    allowed = {"inPlace", "evict"}
    for strategy in strategies:
        if not strategy.in_place_resize.enabled:
            allowed.discard("inPlace")
        if not strategy.pod_eviction.enabled:
            allowed.discard("evict")
    return frozenset(allowed)


def strategy_for(view: ClusterView, policy: KerfResource) -> AutomationStrategy | None:
    """The strategy a policy refers to (cluster policies: a cluster strategy)."""
    ref = getattr(policy.spec, "automation_strategy_ref", None)  # type: ignore[attr-defined]
    if ref is None:
        return None
    if type(policy).cluster_scoped:
        found = view.kerf_object("ClusterAutomationStrategy", "", ref.name)
        return found if isinstance(found, ClusterAutomationStrategy) else None
    found = view.kerf_object("AutomationStrategy", policy.metadata.namespace or "", ref.name)
    return found if isinstance(found, AutomationStrategy) else None
