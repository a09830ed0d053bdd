"""One decision in progress: its actions, the baseline they start from, and what a check
returns (`Result`: pass, block with a reason, or the values that stand).

Checks only read a `Context`; the runner (`app/decide/checks.py`) is its one writer: it
applies each check's `Result` in the order of `CHECKS`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from app.decide.plan_facts import (
    QOS_RESOURCES,
    PlanFacts,
    Prepared,
    StrategyFacts,
    policies_of,
)
from app.decide.pod_facts import is_guaranteed
from app.decide.results import AuditProposal, Filtered
from app.model.crd import AutomationStrategySpec, KerfResource
from app.model.horizon import Horizon
from app.model.kube_types import ContainerDict, PodDict
from app.model.workloads import Resources, Workload
from app.policy.guardrails import GuardrailSettings
from app.policy.plans import WorkloadPlan, guardrails
from app.policy.selection import Target
from app.store.view import ClusterView

Path = Literal["admission", "running"]

IN_PLACE_RESOURCES = frozenset({"cpu", "memory"})


@dataclass(frozen=True, slots=True)
class FallbackCase:
    """An accepted in-place resize that cannot finish, as the fallback's checks read it."""

    view: ClusterView
    pod: PodDict
    workload: Workload
    facts: PlanFacts
    now: datetime
    #: Deferred, Infeasible, Error or ResizeRejected
    cause: str


class Action:
    """A prepared target with the amount the pod has and the amount to set."""

    __slots__ = ("item", "target", "current", "desired", "partner")

    def __init__(self, item: Prepared, current: int | None, desired: int) -> None:
        self.item = item
        self.target = item.target
        self.current = current
        self.desired = desired
        #: the other field of a Guaranteed container's pair: both change together
        self.partner: Action | None = None


class Context:
    """One decision in progress: the pod, the plan facts and what the checks so far left
    standing. The checks read it; only the runner (`run_checks`, through `apply`)
    changes it. The clock is the exception by design: a check that compares a time
    narrows the span the decision holds for (`app/model/horizon.py`)."""

    __slots__ = (
        "view",
        "pod",
        "workload",
        "plan",
        "facts",
        "clock",
        "path",
        "running",
        "containers",
        "current",
        "baseline",
        "actions",
        "has_restores",
        "dropped",
        "filtered",
        "_memo_actions",
        "_memo_len",
        "_policies",
        "_strategies",
        "_audit",
        "approved_id",
        "proposal",
        "strategy_facts",
        "method",
        "_final",
    )

    def __init__(
        self,
        view: ClusterView,
        pod: PodDict,
        workload: Workload,
        plan: WorkloadPlan,
        facts: PlanFacts,
        clock: Horizon,
        path: Path,
        containers: Mapping[str, ContainerDict],
        current: dict[str, Resources],
    ) -> None:
        self.view = view
        self.pod = pod
        self.workload = workload
        self.plan = plan
        self.facts = facts
        #: the decision time; every check compares it through here (see app/model/horizon.py)
        self.clock = clock
        self.path = path
        self.running = path == "running"
        self.containers = containers
        self.current = current
        self.baseline = _baseline(facts, current, path)
        self.actions: list[Action] = []
        #: a rollback restore stands: it is an action from the start and never dropped
        #: but by Paused, which stops the whole plan
        self.has_restores = any(i.restore for i in facts.items)
        self.dropped: list[tuple[Target, str]] = []
        #: values dropped for a bound outside kerf (a LimitRange, a quota), and the bound
        self.filtered: list[Filtered] = []
        self._memo_actions: list[Action] | None = None
        self._memo_len = -1
        self._policies: list[KerfResource] = []
        self._strategies: list[AutomationStrategySpec] = []
        self._audit = False
        #: the proposal an approval let through audit mode (None otherwise)
        self.approved_id: str | None = None
        #: audit mode: the proposal as it waits for approval (None when there is none)
        self.proposal: AuditProposal | None = None
        #: the windows and methods of the strategies behind the change: those of the
        #: actions standing before the first check that reads them (`Check.strategies`)
        self.strategy_facts: StrategyFacts | None = None
        #: how the change is carried out; chosen on the running path only
        self.method = "admission"
        #: (actions, their count, the resources they give): `final`'s last answer
        self._final: tuple[list[Action], int, dict[str, Resources]] | None = None

    def settings(self, policy: KerfResource | None) -> GuardrailSettings:
        return guardrails(self.view, policy)

    def final(self) -> dict[str, Resources]:
        """Every container's resources with the standing actions set (`final_resources`),
        worked out again only when the action list was replaced or grew: the checks
        never change an action's value once the plan is validated."""
        kept = self._final
        if kept is not None and kept[0] is self.actions and kept[1] == len(self.actions):
            return kept[2]
        final = final_resources(self.current, self.actions)
        self._final = (self.actions, len(self.actions), final)
        return final

    def regular(self) -> list[Action]:
        if not self.has_restores:
            return self.actions
        return [a for a in self.actions if not a.item.restore]

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
        self._policies, self._strategies, self._audit = policies_of([a.item for a in regular])

    def check_on(self, name: str) -> bool:
        """A strategy's safety check (`safetyChecks.<name>`, a switch) holds for the change:
        off only when every strategy behind it turns it off."""
        strategies = self.strategies()
        return not strategies or any(getattr(s.safety_checks, name) for s in strategies)

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


Outcome = Literal["blocked", "skipped"]


@dataclass(frozen=True, slots=True)
class Block:
    """A check holds: the plan stops with this outcome and reason, unless it holds only
    the regular actions and rollback restores stand (they are exempt): then those go on."""

    outcome: Outcome
    reason: str
    message: str
    next_allowed_at: datetime | None = None
    #: holds the rollback restores too (Paused, and the checks that left no action)
    restores: bool = False


@dataclass(frozen=True, slots=True)
class Result:
    """What a check decided: nothing (`PASS`), the actions that stand after it with what
    it dropped, a `Block`, or what it found for the decision (the method, audit's
    proposal). The runner applies it, in this order: values, then the block."""

    #: the actions that stand after the check; None: unchanged
    actions: list[Action] | None = None
    dropped: tuple[tuple[Target, str], ...] = ()
    #: values dropped for a bound outside kerf (a LimitRange, a quota), and the bound
    filtered: tuple[Filtered, ...] = ()
    block: Block | None = None
    #: how the change is carried out (the method check)
    method: str | None = None
    #: audit mode: the proposal as it waits for approval, and whether it is approved
    proposal: AuditProposal | None = None
    approved: bool = False


PASS = Result()


def stop(
    reason: str,
    message: str,
    when: datetime | None = None,
    outcome: Outcome = "blocked",
    *,
    restores: bool = False,
) -> Block:
    """The block of the regular actions (with `restores`, of every action)."""
    return Block(outcome, reason, message, when, restores)


def block(
    reason: str,
    message: str,
    when: datetime | None = None,
    outcome: Outcome = "blocked",
    *,
    restores: bool = False,
) -> Result:
    """The check holds the regular actions (with `restores`, every action)."""
    return Result(block=Block(outcome, reason, message, when, restores))


def apply(ctx: Context, result: Result) -> Block | None:
    """Applies a check's result to the decision; returns the block that stops the plan,
    or None when the plan goes on (a block of the regular actions only drops them while
    rollback restores stand)."""
    if result is PASS:
        return None
    if result.actions is not None:
        ctx.actions = result.actions
    ctx.dropped.extend(result.dropped)
    ctx.filtered.extend(result.filtered)
    if result.method is not None:
        ctx.method = result.method
    if result.proposal is not None:
        ctx.proposal = result.proposal
        if result.approved:
            ctx.approved_id = result.proposal.id
    stop = result.block
    if stop is None or stop.restores:
        return stop
    restores = [a for a in ctx.actions if a.item.restore]
    if not restores:
        return stop
    ctx.dropped.extend((a.target, stop.reason) for a in ctx.regular())
    ctx.actions = restores
    return None


def _baseline(facts: PlanFacts, current: dict[str, Resources], path: Path) -> dict[str, Resources]:
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
            value = next(v for v in (limit, request) if v is not None)
        baseline["requests"][resource] = baseline["limits"][resource] = value


def final_resources(current: dict[str, Resources], actions: list[Action]) -> dict[str, Resources]:
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
