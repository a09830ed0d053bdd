"""The decision for one pod: select, filter through enablement, guard (SPEC §5, §6, §7).

`decide_pod` is the only place a pod decision is made; the webhook (admission path),
the reconciler (running path) and `kerf explain` all call it. Checks run in the spec's
order and the first match decides; per-value rules drop single parts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from app.annotations import APPROVE, PAUSE_UNTIL, SKIP_CONTAINERS, dumps
from app.durations import format_duration
from app.enablement import GPU, Switches, apply_switches, resolve_switches
from app.feasibility import describe_largest, too_large
from app.guardrails import (
    COOLDOWN,
    NO_FACTS,
    NO_SIGNIFICANT_CHANGE,
    GuardrailSettings,
    ValueContext,
    apply_value_rules,
)
from app.horizon import Horizon
from app.models import (
    AutomationStrategySpec,
    KerfResource,
    LastApplied,
    RightsizingRecommendation,
    Window,
)
from app.owners import WorkloadRef
from app.quantities import MIB, QuantityError, format_resource, parse_resource
from app.recommendations import RecommendationRow
from app.selection import Candidate, Target
from app.sync import PROACTIVE_KINDS, ROLLBACK_KINDS
from app.view import ClusterView, WorkloadPlan
from app.windows import freeze_verdict, maintenance_verdict, next_change
from app.workloads import JAVA_OPTION_VARS, Resources, Workload, oom_terminations, parse_time

Path = Literal["admission", "running"]
IN_PLACE_RESOURCES = frozenset({"cpu", "memory"})
#: The resources whose requests and limits make a pod's QoS class (Guaranteed when equal).
QOS_RESOURCES = ("cpu", "memory")
PARTNER_FIELD = {"requests": "limits", "limits": "requests"}
#: A change dropped because it would leave a Guaranteed container's request ≠ its limit.
GUARANTEED_QOS = "GuaranteedQoS"
HUB_UNREACHABLE = "HubUnreachable"
#: A value to set is more than any node's allocatable.
INFEASIBLE = "Infeasible"
#: Every row of the workload's recommendation was invalid (SPEC §4).
INVALID_RECOMMENDATION = "InvalidRecommendation"
#: The values name only containers the pod does not have.
NO_SUCH_CONTAINER = "NoSuchContainer"
#: Reasons under which a new pod keeps its manifest as it is (not even the baseline).
UNTOUCHED = frozenset({"Paused", "ProtectedNamespace", "AutomationDisabled", "Audit"})
CPU_HEADROOM_PERCENT = 10
MEMORY_HEADROOM = 200 * MIB
_HEAP_RE = re.compile(r"(?:-Xmx|-XX:MaxHeapSize=)(\d+)([kKmMgGtT]?)\b")
_HEAP_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


@dataclass(frozen=True, slots=True)
class SelectedValue:
    """The winning policy for one target, as explain and the pod annotation show it."""

    container: str
    field: str
    resource: str
    value: str
    policy_kind: str
    policy_namespace: str
    policy_name: str
    annotation_key: str

    def as_dict(self) -> dict[str, str]:
        """The JSON form of SPEC §9."""
        return {
            "container": self.container,
            "field": self.field,
            "resource": self.resource,
            "value": self.value,
            "policyKind": self.policy_kind,
            "policyNamespace": self.policy_namespace,
            "policyName": self.policy_name,
            "annotationKey": self.annotation_key,
        }


@dataclass(frozen=True, slots=True)
class PodDecision:
    """`{outcome, reason, message, values}` for one pod, with what explain shows."""

    namespace: str
    name: str
    owner: WorkloadRef | None
    outcome: Literal["apply", "blocked", "skipped"]
    reason: str | None
    message: str
    method: str | None = None
    #: every container's resources after the decision (its current ones unless applied)
    final: Mapping[str, Resources] = field(default_factory=dict)
    changed: tuple[str, ...] = ()
    selection: Mapping[Target, Candidate] = field(default_factory=dict)
    #: the winning policy of every target, ordered by container, field, resource
    selected: tuple[SelectedValue, ...] = ()
    dropped: list[tuple[Target, str]] = field(default_factory=list)
    next_allowed_at: datetime | None = None
    fingerprint: str | None = None
    plan: WorkloadPlan | None = None
    #: audit mode: the id an approval names (an approved change carries it too)
    proposal_id: str | None = None
    #: audit mode: the containers' resources an approval would set now, the guardrails'
    #: step (maxChangePercent, the minimums, …), and those the policies ask in the end
    proposal: Mapping[str, Resources] = field(default_factory=dict)
    proposal_target: Mapping[str, Resources] = field(default_factory=dict)

    @property
    def containers(self) -> dict[str, dict[str, dict[str, str]]]:
        """The resources the pod would have after the decision, as quantities."""
        return {c: format_resources(r) for c, r in self.final.items()}

    @property
    def values(self) -> dict[str, dict[str, dict[str, str]]]:
        """The full resources of the containers the decision changes."""
        return {c: format_resources(self.final[c]) for c in self.changed}


# ---------------------------------------------------------------------- pod facts


def format_resources(resources: Resources) -> dict[str, dict[str, str]]:
    """Canonical quantity strings, empty fields left out."""
    return {
        fld: {r: format_resource(r, v) for r, v in sorted(values.items())}
        for fld, values in resources.items()
        if values
    }


def skipped_containers(pod: Mapping[str, Any], workload: Workload) -> set[str]:
    """`skip-containers`: the pod's value wins (an empty value skips none)."""
    pod_annotations = (pod.get("metadata") or {}).get("annotations") or {}
    value = pod_annotations.get(SKIP_CONTAINERS)
    if value is None:
        value = workload.annotations.get(SKIP_CONTAINERS, "")
    return {name.strip() for name in value.split(",") if name.strip()}


def _horizon(now: datetime | Horizon) -> Horizon:
    return now if isinstance(now, Horizon) else Horizon(now)


def is_paused(annotations: Mapping[str, str] | None, now: datetime | Horizon) -> bool:
    """`pause-until` is `infinite` or a time still ahead (an unreadable value pauses).
    Given a `Horizon`, the comparison with the clock narrows it."""
    value = (annotations or {}).get(PAUSE_UNTIL)
    if value is None:
        return False
    if value.strip() == "infinite":
        return True
    try:
        until = parse_time(value.strip())
    except ValueError:
        return True  # a typo must not silently resume automation
    return until is not None and _horizon(now).before(until)


def jvm_heap_bytes(container: Mapping[str, Any]) -> int | None:
    """A fixed JVM heap (-Xmx / -XX:MaxHeapSize) from command, args or JAVA_* env;
    the last occurrence wins, as in the JVM."""
    texts: list[str] = [*(container.get("command") or []), *(container.get("args") or [])]
    for env in container.get("env") or []:
        if env.get("name") in JAVA_OPTION_VARS and isinstance(env.get("value"), str):
            texts.append(env["value"])
    heap: int | None = None
    for text in texts:
        for number, unit in _HEAP_RE.findall(str(text)):
            heap = int(number) * _HEAP_UNITS[unit.lower()]
    return heap


def oom_killed_since(
    pods: Iterable[Mapping[str, Any]], container: str, since: datetime | None
) -> bool:
    """Whether a container was OOM-killed (in any of the pods) after `since`."""
    for pod in pods:
        for name, terminated in oom_terminations(pod):
            if name != container:
                continue
            finished = parse_time(terminated.get("finishedAt"))
            if since is None or finished is None or finished > since:
                return True
    return False


def hpa_coupled_resources(hpas: Iterable[Mapping[str, Any]]) -> set[str]:
    """Resources an HPA scales on by Utilization (cpu or memory)."""
    coupled: set[str] = set()
    for hpa in hpas:
        for metric in (hpa.get("spec") or {}).get("metrics") or []:
            resource = metric.get("resource") or metric.get("containerResource") or {}
            target = resource.get("target") or {}
            if target.get("type") == "Utilization" and resource.get("name") in ("cpu", "memory"):
                coupled.add(resource["name"])
        legacy = (hpa.get("spec") or {}).get("targetCPUUtilizationPercentage")
        if legacy is not None:
            coupled.add("cpu")
    return coupled


# ---------------------------------------------------------------------- the decision


@dataclass(frozen=True, slots=True)
class _Prepared:
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
class _PlanFacts:
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
    items: list[_Prepared]
    record: RightsizingRecommendation | None
    rows: Mapping[str, RecommendationRow]
    #: the lowest confidence among the rows (None without rows)
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


class _Action:
    """A prepared target with the amount the pod has and the amount to set."""

    __slots__ = ("item", "target", "current", "desired", "partner")

    def __init__(self, item: _Prepared, current: int | None, desired: int) -> None:
        self.item = item
        self.target = item.target
        self.current = current
        self.desired = desired
        #: the other field of a Guaranteed container's pair: both change together
        self.partner: _Action | None = None


class _Context:
    """One decision in progress: the pod, the plan facts and the actions still standing."""

    __slots__ = (
        "view",
        "pod",
        "workload",
        "plan",
        "facts",
        "record",
        "clock",
        "path",
        "running",
        "containers",
        "current",
        "baseline",
        "actions",
        "has_restores",
        "dropped",
        "_memo_actions",
        "_memo_len",
        "_policies",
        "_strategies",
        "_audit",
        "approved_id",
        "proposal",
    )

    def __init__(
        self,
        view: ClusterView,
        pod: Mapping[str, Any],
        workload: Workload,
        plan: WorkloadPlan,
        facts: _PlanFacts,
        clock: Horizon,
        path: Path,
        containers: dict[str, Mapping[str, Any]],
        current: dict[str, Resources],
    ) -> None:
        self.view = view
        self.pod = pod
        self.workload = workload
        self.plan = plan
        self.facts = facts
        self.record = facts.record  # the workload's RightsizingRecommendation
        #: the decision time; every check compares it through here (see app/horizon.py)
        self.clock = clock
        self.path = path
        self.running = path == "running"
        self.containers = containers
        self.current = current
        self.baseline = _baseline(facts, current, path)
        self.actions: list[_Action] = []
        self.has_restores = False
        self.dropped: list[tuple[Target, str]] = []
        self._memo_actions: list[_Action] | None = None
        self._memo_len = -1
        self._policies: list[KerfResource] = []
        self._strategies: list[AutomationStrategySpec] = []
        self._audit = False
        #: the proposal an approval let through audit mode (None otherwise)
        self.approved_id: str | None = None
        #: audit mode: the proposal as it waits for approval (None when there is none)
        self.proposal: AuditProposal | None = None

    def settings(self, policy: KerfResource | None) -> GuardrailSettings:
        return self.view.guardrails(policy)

    def regular(self) -> list[_Action]:
        if not self.has_restores:
            return self.actions
        return [a for a in self.actions if not a.item.restore]

    def replace_actions(self, actions: list[_Action]) -> None:
        self.actions = actions

    def _derive(self) -> None:
        """Policies, strategies and audit mode of the regular actions, derived again only
        when the action list was replaced."""
        if self._memo_actions is self.actions and self._memo_len == len(self.actions):
            return
        self._memo_actions, self._memo_len = self.actions, len(self.actions)
        regular = self.regular()
        facts = self.facts
        if len(regular) == facts.regular_count:
            # Every item that can be a regular action is one: the plan already knows.
            self._policies, self._strategies = facts.policies, facts.strategies
            self._audit = facts.audit
            return
        self._policies, self._strategies, self._audit = _policies_of([a.item for a in regular])

    def policies(self) -> list[KerfResource]:
        """The distinct policies behind the regular actions."""
        self._derive()
        return self._policies

    def strategies(self) -> list[AutomationStrategySpec]:
        """The strategies of those policies."""
        self._derive()
        return self._strategies

    def audit(self) -> bool:
        """Whether any of those policies is in audit mode."""
        self._derive()
        return self._audit


def _policies_of(
    items: Iterable[_Prepared],
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


class _Stop(Exception):
    """A check decided: carries the outcome."""

    def __init__(
        self,
        outcome: Literal["blocked", "skipped"],
        reason: str,
        message: str,
        next_allowed_at: datetime | None = None,
    ) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.reason = reason
        self.message = message
        self.next_allowed_at = next_allowed_at


def _block_regular(
    ctx: _Context,
    reason: str,
    message: str,
    when: datetime | None = None,
    outcome: Literal["blocked", "skipped"] = "blocked",
) -> None:
    """A check hit the regular actions: rollback restores still go on (they are exempt),
    otherwise the whole plan stops here."""
    restores = [a for a in ctx.actions if a.item.restore]
    if not restores:
        raise _Stop(outcome, reason, message, when)
    ctx.dropped.extend((a.target, reason) for a in ctx.regular())
    ctx.replace_actions(restores)


def decide_pod(
    view: ClusterView, pod: Mapping[str, Any], *, now: datetime | Horizon, path: Path
) -> PodDecision:
    """The decision for one pod on the admission path (a new pod) or the running path.
    Given a `Horizon` for `now`, it ends up holding the span of time over which the
    decision stays the same (`app/horizon.py`)."""
    with view.lock:
        return _decide_pod(view, pod, clock=_horizon(now), path=path)


def _decide_pod(
    view: ClusterView, pod: Mapping[str, Any], *, clock: Horizon, path: Path
) -> PodDecision:
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or meta.get("generateName") or "")
    containers, current, owner = view.pod_facts(pod)
    workload = workload_for(view, pod, owner)
    if workload is None:
        return PodDecision(
            namespace,
            name,
            owner,
            "skipped",
            "Unmanaged",
            "the pod has no controller owner",
            final=current,
        )
    plan = view.plan_for(workload)
    if not plan.candidates:
        outcome, reason, message = _why_no_values(plan)
        return PodDecision(
            namespace, name, owner, outcome, reason, message, final=current, plan=plan
        )

    skip = skipped_containers(pod, workload)
    names = tuple(c for c in containers if c not in skip)
    facts = _plan_facts(view, workload, plan, names)
    selected = facts.selected
    if not selected:
        absent = _absent_containers(plan, containers)
        if absent:
            return PodDecision(
                namespace,
                name,
                owner,
                "skipped",
                NO_SUCH_CONTAINER,
                f"the values are for container(s) {', '.join(absent)}, which the pod does "
                f"not have (it has {', '.join(containers) or 'none'})",
                final=current,
                plan=plan,
            )
    ctx = _Context(view, pod, workload, plan, facts, clock, path, containers, current)
    fp = plan.fingerprint
    try:
        _build_actions(ctx)
        method = _run_checks(ctx)
    except _Stop as stop:
        # At admission "current" is the baseline: a new pod of a workload whose change is
        # blocked or skipped gets the live (last applied) values, not its manifest's —
        # unless the pod is not to be touched at all.
        kept = ctx.baseline if path == "admission" and stop.reason not in UNTOUCHED else current
        proposal = ctx.proposal if stop.reason == "Audit" else None
        return PodDecision(
            namespace,
            name,
            owner,
            stop.outcome,
            stop.reason,
            stop.message,
            final=kept,
            changed=tuple(sorted(c for c in kept if kept[c] != current[c])),
            selection=selected,
            selected=facts.winners,
            dropped=ctx.dropped,
            next_allowed_at=stop.next_allowed_at,
            fingerprint=fp,
            plan=plan,
            proposal_id=proposal.id if proposal else None,
            proposal=proposal.step if proposal else {},
            proposal_target=proposal.target if proposal else {},
        )
    final = _final_resources(current, ctx.actions)
    changed = {a.target.container for a in ctx.actions}
    notes = "; ".join(
        [f"{t.container}.{t.field}.{t.resource}: {r}" for t, r in ctx.dropped]
        + [f"{INVALID_RECOMMENDATION}: {w}" for w in plan.sources.invalid]
    )
    return PodDecision(
        namespace,
        name,
        owner,
        "apply",
        None,
        f"{len(ctx.actions)} value(s) to set" + (f" (left: {notes})" if notes else ""),
        final=final,
        method=method,
        changed=tuple(sorted(changed)),
        selection=selected,
        selected=facts.winners,
        dropped=ctx.dropped,
        fingerprint=fp,
        plan=plan,
        proposal_id=ctx.approved_id,
    )


def _why_no_values(plan: WorkloadPlan) -> tuple[Literal["blocked", "skipped"], str, str]:
    """Outcome, reason and message of a workload no policy publishes values for: the
    proactive values wait for a ConfigMap that did not load, its rows were all invalid,
    or no policy matches it."""
    news = plan.sources
    if news.unreachable:
        return "blocked", HUB_UNREACHABLE, "; ".join(news.unreachable)
    if news.invalid:
        return "blocked", INVALID_RECOMMENDATION, "; ".join(news.invalid)
    return "skipped", "NoMatchingPolicy", "no policy publishes values for this workload"


def _absent_containers(plan: WorkloadPlan, containers: Mapping[str, Any]) -> list[str]:
    """The containers the plan has values for that the pod does not have, when the plan
    names none the pod has (the values were written for another pod template)."""
    named = {c.container for c in plan.candidates}
    if "*" in named or any(name in containers for name in named):
        return []
    return sorted(named)


@dataclass(frozen=True, slots=True)
class AuditProposal:
    """A change waiting for approval in audit mode: what an approval applies now (the
    guardrails' step) and what the policies ask in the end."""

    id: str
    step: dict[str, Resources]
    target: dict[str, Resources]


def _audit_proposal(ctx: _Context) -> AuditProposal | None:
    """The proposal of an audited pod: the regular actions through the per-value rules
    (the decrease step of maxChangePercent, the minimums, the refusals, the tolerance) on
    copies, since guardrails apply to an approved change as to any other. None when those
    rules leave nothing to change."""
    regular = ctx.regular()
    target = _final_resources(ctx.current, regular)
    trial = _Context(
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
    trial.actions = _copied(regular)
    try:
        _apply_value_rules(trial)
    except _Stop:
        return None
    step = _final_resources(ctx.current, trial.actions)
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
    )


def _copied(actions: list[_Action]) -> list[_Action]:
    """Copies of actions (the value rules change them), Guaranteed pairs kept paired."""
    copies = {id(a): _Action(a.item, a.current, a.desired) for a in actions}
    for action in actions:
        if action.partner is not None and id(action.partner) in copies:
            copies[id(action)].partner = copies[id(action.partner)]
    return list(copies.values())


def describe_resources(containers: Mapping[str, Mapping[str, Mapping[str, str]]]) -> str:
    """Containers' resources in one line: `app requests cpu=250m,memory=256Mi; …`."""
    parts = []
    for name, resources in sorted(containers.items()):
        for fld in ("requests", "limits"):
            values = resources.get(fld) or {}
            if values:
                parts.append(
                    f"{name} {fld} " + ",".join(f"{r}={q}" for r, q in sorted(values.items()))
                )
    return "; ".join(parts)


def _audit_message(proposal: AuditProposal | None) -> str:
    if proposal is None:
        return "audit mode: the guardrails leave nothing to propose, nothing changes"
    step = {c: format_resources(r) for c, r in proposal.step.items()}
    target = {c: format_resources(r) for c, r in proposal.target.items()}
    text = f"audit mode: proposal {proposal.id} would set {describe_resources(step)}"
    if step != target:
        text += f" (a guardrail step; target {describe_resources(target)})"
    return text + f"; approve it with {APPROVE}={proposal.id}, nothing changes until then"


def workload_for(
    view: ClusterView, pod: Mapping[str, Any], owner: WorkloadRef | None
) -> Workload | None:
    """The pod's workload; one not (yet) in the view is stood in for by the pod's labels,
    so a pod created right after its Deployment is still sized."""
    if owner is None:
        return None
    meta = pod.get("metadata") or {}
    return view.workload(owner) or Workload(
        kind=owner.kind,
        namespace=owner.namespace,
        name=owner.name,
        labels=dict(meta.get("labels") or {}),
    )


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


def _baseline(facts: _PlanFacts, current: dict[str, Resources], path: Path) -> dict[str, Resources]:
    """ "Current" for the guardrails: a running pod's spec; for a new pod the workload's
    last applied values, else the pod's manifest — so a rollout never undoes a step."""
    applied = facts.applied
    if path == "running" or not applied:
        return current
    baseline = {c: {f: dict(v) for f, v in r.items()} for c, r in current.items()}
    for (container, fld, resource), amount in applied.items():
        if container in baseline:
            baseline[container][fld][resource] = amount
    for container in facts.qos_containers:
        if is_guaranteed(current[container]):
            _keep_pairs(baseline[container], current[container], applied, container)
    return baseline


def _keep_pairs(
    baseline: Resources,
    own: Resources,
    applied: Mapping[tuple[str, str, str], int],
    container: str,
) -> None:
    """The baseline of a Guaranteed container keeps its pairs equal too: a last applied
    request or limit alone sets both; an unequal last applied pair (recorded without
    retainGuaranteedQoS) is not a baseline for it, the pod's own pair is."""
    for resource in QOS_RESOURCES:
        request = applied.get((container, "requests", resource))
        limit = applied.get((container, "limits", resource))
        if request is None and limit is None:
            continue
        if request is not None and limit is not None and request != limit:
            value = own["requests"][resource]
        else:
            value = limit if limit is not None else request
        baseline["requests"][resource] = baseline["limits"][resource] = value


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


def _plan_facts(
    view: ClusterView, workload: Workload, plan: WorkloadPlan, names: tuple[str, ...]
) -> _PlanFacts:
    """The plan facts for these containers, built once per plan and container set."""
    key = ("facts", names)
    found = plan.memo.get(key)
    if found is None:
        found = _build_plan_facts(view, workload, plan, names)
        # Names come from the pod: keep facts only for the name sets the plan keeps
        # selections for (`WorkloadPlan.select_for`, which building the facts called).
        if names in plan.selections:
            plan.memo[key] = found
    return found


def _build_plan_facts(
    view: ClusterView, workload: Workload, plan: WorkloadPlan, names: tuple[str, ...]
) -> _PlanFacts:
    selected = plan.select_for(names)
    rows = view.rows_for(workload.ref)
    ordered = sorted(selected.items(), key=_target_order)
    items = [
        _prepare(view, target, candidate, rows.get(target.container))
        for target, candidate in ordered
    ]
    regular = [i for i in items if not i.restore and i.strategy is not None]
    policies, strategies, audit = _policies_of(regular)
    record = view.recommendation_for(workload.ref)
    status = record.status if record else None
    last_applied = status.last_applied if status else None
    return _PlanFacts(
        selected=selected,
        winners=tuple(_selected_value(target, candidate) for target, candidate in ordered),
        items=items,
        record=record,
        rows=rows,
        lowest_confidence=min(row.confidence for row in rows.values()) if rows else None,
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
    )


def _prepare(
    view: ClusterView, target: Target, candidate: Candidate, row: RecommendationRow | None
) -> _Prepared:
    """Resolve what one selected target needs from its policy and its row: strategy,
    switches, guardrail settings, audit mode, the row's facts for the quality checks."""
    settings = view.guardrails(candidate.policy)
    if candidate.kind in ROLLBACK_KINDS:
        return _Prepared(target, candidate, True, None, None, settings)
    spec = getattr(candidate.policy, "spec", None)
    max_age_days = getattr(getattr(spec, "safety_checks", None), "max_analysis_age_days", 5)
    strategy = view.strategy_for(candidate.policy) if candidate.policy else None
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
    return _Prepared(
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
        coverage=_span(hours=row.coverage_hours) if row is not None else None,
        retain_qos=strategy is not None and strategy.spec.retain_guaranteed_qos,
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


def _span(**amount: float) -> timedelta | None:
    """timedelta(**amount), or None when it cannot be one: the check that needs it builds
    it again then and fails there, as it always did, rather than every decision here."""
    try:
        return timedelta(**amount)
    except (OverflowError, ValueError):
        return None


def _build_actions(ctx: _Context) -> None:
    """Selected values through their strategy's enablement (restores are exempt); the
    values of a Guaranteed container's request/limit pair go through it together."""
    missing: list[str] = []
    baseline = ctx.baseline
    actions = ctx.actions
    pairs = _pinned_items(ctx) if _may_pin(ctx) else None
    for item in ctx.facts.items:
        target, candidate = item.target, item.candidate
        current = baseline[target.container][target.field].get(target.resource)
        if item.restore:
            actions.append(_Action(item, current, candidate.amount))
            ctx.has_restores = True
            continue
        if item.strategy is None:
            missing.append(candidate.policy.metadata.name if candidate.policy else candidate.key)
            continue
        if pairs and (target.container, target.resource) in pairs:
            continue
        enabled = apply_switches(item.switches, current=current, desired=candidate.amount)
        if enabled.value is None:
            ctx.dropped.append((target, enabled.reason or "NotEnabled"))
        else:
            actions.append(_Action(item, current, enabled.value))
    if pairs:
        for by_field in pairs.values():
            _add_pair(ctx, by_field)
    if missing and not actions:
        raise _Stop(
            "blocked",
            "StrategyNotFound",
            f"automationStrategyRef of {', '.join(sorted(set(missing)))} names no strategy",
        )
    if not actions and any(reason == GUARANTEED_QOS for _, reason in ctx.dropped):
        raise _Stop(
            "skipped",
            GUARANTEED_QOS,
            "retainGuaranteedQoS: no change keeps requests equal to limits ("
            + ", ".join(f"{t.container}.{t.field}.{t.resource}: {r}" for t, r in ctx.dropped)
            + ")",
        )
    if not actions:
        raise _Stop("skipped", "NotEnabled", "the strategies enable none of the selected values")


def is_guaranteed(resources: Resources) -> bool:
    """A container's part of the Guaranteed QoS class: CPU and memory requests set and
    equal to their limits (the API server has already defaulted requests from limits)."""
    requests, limits = resources["requests"], resources["limits"]
    cpu = requests.get("cpu")
    if cpu is None or cpu != limits.get("cpu"):
        return False
    memory = requests.get("memory")
    return memory is not None and memory == limits.get("memory")


def _may_pin(ctx: _Context) -> bool:
    """A cheap first look (it runs for every decision, and most pods have no CPU limit):
    could a container whose strategy retains QoS be Guaranteed?"""
    current = ctx.current
    for container in ctx.facts.qos_containers:
        resources = current[container]
        cpu = resources["requests"].get("cpu")
        if cpu is not None and cpu == resources["limits"].get("cpu"):
            return True
    return False


def _pinned_items(ctx: _Context) -> dict[tuple[str, str], dict[str, _Prepared]]:
    """The regular items on the CPU/memory pairs of Guaranteed containers whose strategy
    retains the QoS class, by (container, resource) then field. A pair with a rollback
    restore is left to the restore (restores are exempt from every check)."""
    current = ctx.current
    guaranteed = [c for c in ctx.facts.qos_containers if is_guaranteed(current[c])]
    if not guaranteed:
        return {}  # the common case: no Guaranteed container to keep
    pairs: dict[tuple[str, str], dict[str, _Prepared]] = {}
    restored: set[tuple[str, str]] = set()
    for item in ctx.facts.items:
        target = item.target
        if target.container not in guaranteed or target.resource not in QOS_RESOURCES:
            continue
        key = (target.container, target.resource)
        if item.restore:
            restored.add(key)
        elif item.strategy is not None:
            pairs.setdefault(key, {})[target.field] = item
    return {
        key: by_field
        for key, by_field in pairs.items()
        if key not in restored and any(i.retain_qos for i in by_field.values())
    }


def _add_pair(ctx: _Context, by_field: dict[str, _Prepared]) -> None:
    """Both values of a Guaranteed container's pair, set to one value: the selected limit
    when there is one (the bound its policy allows), else the selected request. The value
    is clamped into the bounds of both fields and must be allowed by both fields'
    switches; when it cannot be, neither changes."""
    lead = by_field.get("limits") or by_field["requests"]
    container, resource = lead.target.container, lead.target.resource
    items = {fld: by_field.get(fld) or _partner_item(lead, fld) for fld in ("requests", "limits")}
    switches: dict[str, Switches] = {}
    for fld, item in items.items():
        # CPU and memory always have switches; a pair is built only under a strategy.
        assert item.switches is not None
        switches[fld] = item.switches
    floors = [sw.floor for sw in switches.values() if sw.floor is not None]
    ceilings = [sw.ceiling for sw in switches.values() if sw.ceiling is not None]
    floor, ceiling = max(floors, default=None), min(ceilings, default=None)
    if floor is not None and ceiling is not None and floor > ceiling:
        # The requests' and limits' bounds do not overlap: no equal pair fits both.
        ctx.dropped.extend((i.target, GUARANTEED_QOS) for i in items.values())
        return
    baseline = ctx.baseline[container]
    enabled = {
        fld: apply_switches(
            Switches(sw.upsize, sw.downsize, sw.set_from_unspecified, floor, ceiling),
            current=baseline[fld].get(resource),
            desired=lead.candidate.amount,
        )
        for fld, sw in switches.items()
    }
    # Both fields clamp the same value into the same bounds: they agree unless one refuses.
    value = enabled["limits"].value
    if value is None or enabled["requests"].value is None:
        ctx.dropped.extend(
            (items[fld].target, (e.reason or "NotEnabled") if e.value is None else GUARANTEED_QOS)
            for fld, e in enabled.items()
        )
        return
    request, limit = (
        _Action(items[fld], baseline[fld].get(resource), value) for fld in ("requests", "limits")
    )
    request.partner, limit.partner = limit, request
    ctx.actions.extend((request, limit))


def _partner_item(lead: _Prepared, fld: str) -> _Prepared:
    """The other field of the lead's pair, under the lead's policy and strategy."""
    target = Target(lead.target.container, fld, lead.target.resource)
    return replace(lead, target=target, switches=lead.partner_switches)


@dataclass(frozen=True, slots=True)
class _StrategyFacts:
    """What a set of contributing strategies decides together."""

    exclusion: list[Window]
    inclusion: list[Window]
    #: the methods every strategy allows
    methods: frozenset[str]
    #: every strategy allows an in-place resize that restarts a container
    restart_ok: bool


def _strategy_facts(ctx: _Context, strategies: list[AutomationStrategySpec]) -> _StrategyFacts:
    """The windows and methods of these strategies, derived once per plan and strategy set
    (strategies are kerf objects, as fixed as the plan; keyed by identity, which is safe
    because the plan's facts hold every strategy they can name)."""
    key = ("strategies", *map(id, strategies))
    found = ctx.plan.memo.get(key)
    if found is None:
        found = ctx.plan.memo[key] = _StrategyFacts(
            exclusion=[w for s in strategies for w in s.scheduling.exclusion_windows],
            inclusion=[w for s in strategies for w in s.scheduling.inclusion_windows],
            methods=_common_methods(strategies),
            restart_ok=all(s.in_place_resize.container_restart for s in strategies),
        )
    return found


def _check_feasible(ctx: _Context) -> None:
    """Block the plan when a value to set is more CPU or memory than any node's allocatable
    (a pod with it could never be scheduled or resized: Infeasible by definition). Not
    judged while the view holds no node."""
    largest = ctx.view.largest_allocatable()
    if largest is None:
        return
    over = [
        f"{a.target.container}.{a.target.field}.{a.target.resource} "
        f"{format_resource(a.target.resource, a.desired)}"
        for a in ctx.regular()
        if too_large(a.target.resource, a.desired, largest)
    ]
    if over:
        _block_regular(
            ctx,
            INFEASIBLE,
            f"{', '.join(over)} is more than any node's allocatable (the largest: "
            f"{describe_largest(largest)})",
        )


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
        # Window states, and so the verdict, stay as they are until one opens or closes.
        clock.until(next_change([*exclusion, *strategies.inclusion], clock.now))
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
            clock.until(next_change([*inclusion, *exclusion], clock.now))
        verdict = maintenance_verdict(inclusion, exclusion, clock.now) if inclusion else None
        if verdict is not None and not verdict.allowed:
            _block_regular(
                ctx, "MaintenanceWindow", "no inclusion window is open", verdict.next_allowed_at
            )
    return method


def _approved(ctx: _Context, proposal: str) -> bool:
    """`approve=<proposal id>` on the RightsizingRecommendation applies that proposal once."""
    record = ctx.record
    if record is None:
        return False
    approved = record.metadata.annotations.get(APPROVE)
    done = record.status.approved_proposal if record.status else None
    return approved is not None and approved == proposal and approved != done


def paused_by(
    view: ClusterView, pod: Mapping[str, Any], workload: Workload, now: datetime | Horizon
) -> str | None:
    """Where a pause comes from: "pod", "workload", "namespace", or None."""
    clock = _horizon(now)
    if is_paused((pod.get("metadata") or {}).get("annotations"), clock):
        return "pod"
    if is_paused(workload.annotations, clock):
        return "workload"
    namespace_obj = view.namespace_object(workload.namespace) or {}
    if is_paused((namespace_obj.get("metadata") or {}).get("annotations"), clock):
        return "namespace"
    return None


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


def is_protected(namespace: str, view: ClusterView) -> bool:
    """kerf's own namespace and GlobalConfiguration.protectedNamespacePatterns."""
    return namespace == view.own_namespace or view.protected_by_pattern(namespace)


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


def _apply_value_rules(ctx: _Context) -> None:
    """Per-value rules on every regular action; restores pass unchanged."""
    tolerance = ctx.view.global_config.tolerance_percent
    facts = _ValueFacts(ctx)
    kept: list[_Action] = []
    refusals: list[str] = []
    for action in ctx.actions:
        t = action.target
        if action.item.restore:
            # Exempt from the rules, but a restore the pod already runs changes nothing.
            if action.desired == ctx.current[t.container][t.field].get(t.resource):
                ctx.dropped.append((t, NO_SIGNIFICANT_CHANGE))
            else:
                kept.append(action)
            continue
        if action.partner is not None:
            if t.field == "requests":  # the pair is ruled once, with its limit
                _pair_value_rules(ctx, facts, action, action.partner, kept, refusals)
            continue
        outcome = apply_value_rules(
            field=t.field,
            resource=t.resource,
            current=action.current,
            desired=action.desired,
            settings=action.item.settings,
            tolerance_percent=tolerance,
            context=facts.context(action.item),
        )
        own = ctx.current[t.container][t.field].get(t.resource)
        if outcome.value is None and action.current is not None and action.current != own:
            # A new pod whose manifest differs from the last applied value keeps the last
            # applied value (the baseline): a rollout never undoes a step.
            if outcome.reason != NO_SIGNIFICANT_CHANGE:
                ctx.dropped.append((t, outcome.reason or ""))
            action.desired = action.current
            kept.append(action)
            continue
        if outcome.value is None:
            ctx.dropped.append((t, outcome.reason or NO_SIGNIFICANT_CHANGE))
            if outcome.reason != NO_SIGNIFICANT_CHANGE:
                refusals.append(outcome.reason or "")
            continue
        # The pod's own value is what changes; the baseline only bounds the step.
        if outcome.value == own:
            ctx.dropped.append((t, NO_SIGNIFICANT_CHANGE))
            continue
        action.desired = outcome.value
        kept.append(action)
    ctx.replace_actions(kept)
    if not kept:
        if refusals:
            reason = refusals[0]
            raise _Stop("blocked", reason, _refusal_message(reason, ctx.dropped))
        raise _Stop("skipped", NO_SIGNIFICANT_CHANGE, "every change is within the tolerance")


def _pair_value_rules(
    ctx: _Context,
    facts: _ValueFacts,
    request: _Action,
    limit: _Action,
    kept: list[_Action],
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
            tolerance_percent=tolerance,
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
        ctx.dropped.extend(
            (
                a.target,
                o.reason
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
            ctx.dropped.extend((a.target, NO_SIGNIFICANT_CHANGE) for a in pair)
        else:
            refusals.append(refused[0])
        return
    request.desired = limit.desired = value
    kept.extend(pair)


class _ValueFacts:
    """What the refusal rules need to know about a pod's containers, read once."""

    def __init__(self, ctx: _Context) -> None:
        self.ctx = ctx
        self.last_change = ctx.facts.last_applied_at
        self.last_rollback = ctx.facts.last_rollback if ctx.running else None
        self._memory: dict[str, tuple[bool, int | None]] = {}

    def _memory_facts(self, container: str) -> tuple[bool, int | None]:
        found = self._memory.get(container)
        if found is None:
            ctx = self.ctx
            # A new pod has no status yet: OOM evidence comes from its siblings.
            pods = ctx.view.pods_of(ctx.workload.ref) if ctx.path == "admission" else [ctx.pod]
            found = (
                oom_killed_since(pods, container, self.last_change),
                jvm_heap_bytes(ctx.containers.get(container, {})),
            )
            self._memory[container] = found
        return found

    def context(self, item: _Prepared) -> ValueContext:
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


def _refusal_message(reason: str, dropped: list[tuple[Target, str]]) -> str:
    parts = [f"{t.container}.{t.field}.{t.resource}" for t, r in dropped if r == reason]
    return f"{reason}: refused {', '.join(parts)}"


def _validate_plan(ctx: _Context) -> None:
    """RequestsExceedLimits and GpuActionConflict over the whole plan, never clamped."""
    final = _final_resources(ctx.current, ctx.actions)
    for container, resources in sorted(final.items()):
        for resource, request in sorted(resources["requests"].items()):
            limit = resources["limits"].get(resource)
            if limit is not None and request > limit:
                raise _Stop(
                    "blocked",
                    "RequestsExceedLimits",
                    f"container {container}: {resource} request "
                    f"{format_resource(resource, request)} is above its limit "
                    f"{format_resource(resource, limit)}",
                )
    gpu_actions = [a for a in ctx.actions if a.target.resource == GPU]
    if gpu_actions:
        sources = {a.item.candidate.key for a in gpu_actions}
        unequal = [
            c
            for c in {a.target.container for a in gpu_actions}
            if final[c]["requests"].get(GPU) != final[c]["limits"].get(GPU)
        ]
        if len(sources) > 1 or unequal:
            raise _Stop(
                "blocked",
                "GpuActionConflict",
                "selected GPU actions disagree"
                + (
                    f" (request ≠ limit in {', '.join(sorted(unequal))})"
                    if unequal
                    else " (several policies)"
                ),
            )


def _final_resources(current: dict[str, Resources], actions: list[_Action]) -> dict[str, Resources]:
    """Every container's resources with the actions set; a container no action touches
    keeps the pod's own (shared, never changed) resources, the others are copies."""
    final = dict(current)
    for action in actions:
        t = action.target
        resources = final[t.container]
        if resources is current[t.container]:
            resources = final[t.container] = {f: dict(v) for f, v in resources.items()}
        resources[t.field][t.resource] = action.desired
    return final


def _common_methods(strategies: list[AutomationStrategySpec]) -> frozenset[str]:
    allowed = {"inPlace", "evict"}
    for strategy in strategies:
        if not strategy.in_place_resize.enabled:
            allowed.discard("inPlace")
        if not strategy.pod_eviction.enabled:
            allowed.discard("evict")
    return frozenset(allowed)


def _method(ctx: _Context, strategies: _StrategyFacts) -> str:
    """inPlace when every contributing strategy allows it and the change can be made in
    place; else evict when all allow eviction; else NoCommonMethod."""
    allowed = strategies.methods
    if not allowed:
        _block_regular(ctx, "NoCommonMethod", "the contributing strategies share no method")
        return "inPlace"
    restart_ok = strategies.restart_ok
    in_place = _resizable(ctx) and (restart_ok or not _restarts_container(ctx))
    if "inPlace" in allowed and in_place and not ("evict" in allowed and _restore_outgrows(ctx)):
        return "inPlace"
    if "evict" in allowed:
        return "evict"
    _block_regular(
        ctx, "NoCommonMethod", "the change cannot be made in place and eviction is not allowed"
    )
    return "inPlace"


def _resizable(ctx: _Context) -> bool:
    """Every changed resource can be resized in place (CPU and memory only)."""
    return all(a.target.resource in IN_PLACE_RESOURCES for a in ctx.actions)


def _restarts_container(ctx: _Context) -> bool:
    """An in-place resize would restart a container (its resizePolicy says so)."""
    containers = ctx.containers
    for action in ctx.actions:
        for entry in containers.get(action.target.container, {}).get("resizePolicy") or ():
            if (
                entry.get("resourceName") == action.target.resource
                and entry.get("restartPolicy") == "RestartContainer"
            ):
                return True
    return False


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


def _request_increases(ctx: _Context, actions: Iterable[_Action]) -> dict[str, list[_Action]]:
    """The actions that raise a CPU or memory request, by resource."""
    increases: dict[str, list[_Action]] = {}
    for a in actions:
        t = a.target
        if (
            t.field == "requests"
            and t.resource in IN_PLACE_RESOURCES
            and a.desired > (a.current or 0)
        ):
            increases.setdefault(t.resource, []).append(a)
    return increases


def _node_room(ctx: _Context) -> dict[str, int] | None:
    """What the pod's node has left for increases (allocatable minus headroom minus the
    requests of its non-terminal pods); None when the node is unknown."""
    node_name = (ctx.pod.get("spec") or {}).get("nodeName")
    allocatable = ctx.view.node_allocatable(node_name) if node_name else None
    if allocatable is None:
        return None
    used_cpu, used_memory = ctx.view.node_requests(node_name)
    return {
        "cpu": allocatable[0] * (100 - CPU_HEADROOM_PERCENT) // 100 - used_cpu,
        "memory": allocatable[1] - MEMORY_HEADROOM - used_memory,
    }


def _increase_delta(ctx: _Context, resource: str, actions: Iterable[_Action]) -> int:
    return sum(
        a.desired - (ctx.current[a.target.container]["requests"].get(resource) or 0)
        for a in actions
    )


def _restore_outgrows(ctx: _Context) -> bool:
    """A rollback restore raises a request beyond what the pod's node has left. Node
    capacity is physics, not a guardrail: the restore is not filtered like an increase of a
    recommendation, and an in-place resize would only be deferred by the kubelet, so the
    pod is evicted and its replacement scheduled where it fits."""
    restores = [a for a in ctx.actions if a.item.restore] if ctx.has_restores else []
    increases = _request_increases(ctx, restores)
    room = _node_room(ctx) if increases else None
    if room is None:
        return False
    return any(_increase_delta(ctx, r, acts) > room[r] for r, acts in increases.items())


def _filter_node_capacity(ctx: _Context) -> None:
    """Increases that do not fit the node are filtered (never an eviction)."""
    increases = _request_increases(ctx, ctx.regular())
    room = _node_room(ctx) if increases else None
    if room is None:
        return
    node_name = (ctx.pod.get("spec") or {}).get("nodeName")
    for resource, actions in increases.items():
        delta = _increase_delta(ctx, resource, actions)
        if delta > room[resource]:
            ctx.dropped.extend((a.target, "InsufficientNodeCapacity") for a in actions)
            # A Guaranteed pair changes together: its limit stays when its request must.
            partners = [a.partner for a in actions if a.partner is not None]
            ctx.dropped.extend((p.target, GUARANTEED_QOS) for p in partners)
            ctx.replace_actions([a for a in ctx.actions if a not in actions and a not in partners])
    if not ctx.actions:
        raise _Stop(
            "blocked", "InsufficientNodeCapacity", f"node {node_name} has no room for the increase"
        )


def decide_fallback(
    view: ClusterView, pod: Mapping[str, Any], *, now: datetime, cause: str
) -> PodDecision:
    """An accepted in-place resize that cannot finish (SPEC §7: Deferred past
    `apply.fallbackAfter`, Infeasible, Error, or a patch the API rejected): evict the pod
    when every contributing strategy allows eviction and a lone replica may be disrupted,
    else blocked. `Paused` holds it like any change; the replacement pod is sized at
    admission from the workload's last applied values."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    containers, current, owner = view.pod_facts(pod)
    workload = workload_for(view, pod, owner)
    if workload is None:
        return PodDecision(namespace, name, owner, "skipped", "Unmanaged", "no owner")
    plan = view.plan_for(workload)
    facts = _plan_facts(view, workload, plan, tuple(containers))

    def stop(reason: str, message: str) -> PodDecision:
        return PodDecision(
            namespace, name, owner, "blocked", reason, message, final=current, plan=plan
        )

    if paused := paused_by(view, pod, workload, now):
        return stop("Paused", f"paused by the {paused} annotation {PAUSE_UNTIL}")
    if "evict" not in _common_methods(facts.strategies):
        return stop(cause, f"in-place resize failed ({cause}) and eviction is not allowed")
    if workload.replicas == 1 and not all(
        view.guardrails(p).allow_single_replica_disruption for p in facts.policies
    ):
        return stop(
            "SingleReplicaUnsafe", f"in-place resize failed ({cause}); one replica, no eviction"
        )
    return PodDecision(
        namespace,
        name,
        owner,
        "apply",
        None,
        f"in-place resize failed ({cause}): evict, the replacement is sized at admission",
        method="evict",
        final=current,
        fingerprint=plan.fingerprint,
        plan=plan,
    )
