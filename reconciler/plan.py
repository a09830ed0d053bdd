"""The plan of one pass over a workload, as a value: everything the pass will write and
why, computed from the view, the workload's memory and the library's decisions before
anything is written (`reconciler.act` carries it out; `reconciler.report` builds the
status and Events from it and what the writes answered).

- `publish`: the policy values on the workload's annotations (a merge patch of kerf's
  keys), when they differ;
- `decisions`: each running pod's decision (`decide_pod`, running path): its method, or
  why it is left alone;
- `rollout`: the one action on a pod (`app.outcome.rollout`: a resize, an eviction or a fallback,
  each once its preconditions hold) or what holds it back;
- `rollback`: the rollback monitor's step (its state annotation and Events);
- `settle`: an eviction recorded and not reported (`pendingEviction`), and whether it
  went out;
- `wait`: the pass decides nothing now (the view is behind this reconciler's own writes,
  or nothing it reads changed since a quiet pass) and when to look again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.decide import PodDecision, decide_pod
from app.model.crd import LastApplied, PendingEviction, RightsizingRecommendation
from app.model.durations import parse_duration
from app.model.horizon import Horizon
from app.model.kube_types import PodDict
from app.model.owners import WorkloadRef
from app.model.workloads import Workload
from app.outcome.rollout import (
    Memory,
    Rollout,
    Timings,
    plan_replacement,
    plan_rollout,
    webhook_unavailable,
)
from app.policy.plans import WorkloadPlan, plan_for
from app.policy.podstate import is_running
from app.policy.rollback import rollback_state
from app.policy.rollback_monitor import Step, monitor_inputs
from app.policy.rollback_monitor import step as rollback_step
from app.store.view import ClusterView
from reconciler.intent import happened, intent_name
from reconciler.memory import Unreported, WorkloadMemory
from reconciler.publish import annotation_patch

LeaseAge = Callable[[], Awaitable[datetime | None]]
#: (namespace, name) -> the pod as the API server has it now (None: no such pod)
ReadPod = Callable[[str, str], Awaitable[Mapping[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class Settle:
    """An eviction recorded before it was asked for and not reported since."""

    intent: PendingEviction
    #: it went out (the pod is gone, deleting, or another one): its Events are told
    went: bool
    #: this replica recorded it and knows it did not go out, whatever became of the pod
    unsent: bool = False


@dataclass(frozen=True, slots=True)
class PassPlan:
    """Everything one pass over a workload will do, decided before it does any of it."""

    ref: WorkloadRef
    workload: Workload
    obj: Mapping[str, Any]
    record: RightsizingRecommendation | None
    now: datetime
    #: every decision of the pass narrows it: when they can next change
    clock: Horizon
    #: the objects the pass read (a pass over the same ones decides the same)
    inputs: tuple[Any, ...]
    publish: dict[str, str | None] | None
    #: False: no policy manages the workload and nothing of kerf's is on it
    managed: bool = False
    running: Sequence[PodDict] = ()
    decisions: Sequence[PodDecision] = ()
    rollout: Rollout = Rollout()
    rollback: Step | None = None
    settle: Settle | None = None


def sort_pods(pods: Sequence[PodDict]) -> list[PodDict]:
    """A workload's pods in the order a pass takes them: by name."""
    return sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name") or ""))


def plan_workload(
    view: ClusterView,
    workload: Workload,
    obj: Mapping[str, Any],
    record: RightsizingRecommendation | None,
    pods: Sequence[PodDict],
    memory: WorkloadMemory,
    now: datetime,
    timings: Timings,
    inputs: tuple[Any, ...],
    *,
    held: tuple[str, str] | None = None,
    went: bool | None = None,
) -> PassPlan:
    """The plan of a pass over a live workload (the pure part: `plan_pass` gathers the
    answers it needs from the API first). `held`: why an eviction may not go out now;
    `went`: whether the eviction recorded and not reported went out (None: the view says)."""
    ref = workload.ref
    plan: WorkloadPlan = plan_for(view, workload)
    publish = annotation_patch(workload.annotations, plan.sync.annotations) or None
    clock = Horizon(now)
    base = PassPlan(ref, workload, obj, record, now, clock, inputs, publish)
    news = plan.sources
    if (
        not plan.candidates
        and not (news.unreachable or news.invalid or news.held)
        and record is None
        and memory.unreported is None
    ):
        return base
    memory.keep_pods(pods)
    running = [p for p in pods if is_running(p)]
    decisions = [decide_pod(view, p, now=clock, path="running") for p in running]
    remembered = Memory(
        awaiting=memory.awaiting,
        rejected=memory.rejection,
        unreported=memory.unreported.last_applied if memory.unreported else None,
    )
    intent = record.status.pending_eviction if record and record.status else None
    settle = None
    if intent is not None:
        # That pass starts nothing new: the next one decides from the status this one
        # writes.
        if memory.knows_unsent(intent_name(intent)):
            settle = Settle(intent, went=False, unsent=True)
        else:
            settle = Settle(intent, happened(intent, pods) if went is None else went)
        rollout = Rollout(busy=settle.went, report=True, again_in=timings.follow_s)
    else:
        rollout = plan_rollout(
            view, workload, pods, running, decisions, remembered, now, timings, held
        )
        if rollout.report and rollout.action is None and memory.unreported is not None:
            decided = _decided_as_recorded(
                view, workload, pods, running, memory.unreported, remembered, clock, timings, held
            )
            if decided is not None:
                decisions, rollout = decided
    rollback = _rollback(view, workload, now)
    if rollback is not None and intent is None and not rollout.busy and rollout.action is None:
        replace = plan_replacement(view, workload, pods, rollback, remembered, timings, held)
        if replace is not None:
            rollout = Rollout(
                replace.action,
                busy=replace.busy,
                blocked=replace.blocked or rollout.blocked,
                report=rollout.report,
                again_in=_sooner(rollout.again_in, replace.again_in),
                fallback=rollout.fallback,
            )
    return PassPlan(
        ref,
        workload,
        obj,
        record,
        now,
        clock,
        inputs,
        publish,
        managed=True,
        running=running,
        decisions=decisions,
        rollout=rollout,
        rollback=rollback,
        settle=settle,
    )


def _decided_as_recorded(
    view: ClusterView,
    workload: Workload,
    pods: Sequence[PodDict],
    running: Sequence[PodDict],
    unreported: Unreported,
    remembered: Memory,
    clock: Horizon,
    timings: Timings,
    held: tuple[str, str] | None,
) -> tuple[list[PodDecision], Rollout] | None:
    """The rollout in place is done, and its report is due because another change waits
    to be decided from the status that records it (`plan_rollout`). That change decided
    now, as the pass after the report would decide it: when nothing would go out then
    (its cooldown holds it: the next step of a stepped decrease), this pass reports the
    rollout and the hold at once, one status write instead of two. None: the next change
    could go out now, or something else is under way: the report goes first."""
    recorded = LastApplied.model_validate(unreported.last_applied)
    decisions = [decide_pod(view, p, now=clock, path="running", recorded=recorded) for p in running]
    rollout = plan_rollout(
        view, workload, pods, running, decisions, remembered, clock.now, timings, held
    )
    if rollout != Rollout():  # an action, a wait or a report of its own: not folded
        return None
    return decisions, rollout


def _sooner(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return b if a is None else a
    return min(a, b)


def _rollback(view: ClusterView, workload: Workload, now: datetime) -> Step | None:
    """The rollback monitor's step (SPEC §8); its state lives in the workload's
    `rollback-state` annotation, whose restore values the next pass publishes."""
    state = rollback_state(view, workload)
    inputs = monitor_inputs(view, workload)
    if inputs.policy is None and state is None:
        return None
    return rollback_step(state, inputs, now)


async def plan_pass(
    view: ClusterView,
    workload: Workload,
    obj: Mapping[str, Any],
    record: RightsizingRecommendation | None,
    pods: Sequence[PodDict],
    memory: WorkloadMemory,
    now: datetime,
    timings: Timings,
    inputs: tuple[Any, ...],
    *,
    lease: LeaseAge | None,
    read_pod: ReadPod | None,
) -> PassPlan:
    """The plan of a pass, with the two answers only the API server has: whether an
    eviction recorded and not reported went out (the view may not show it yet), and,
    when the plan evicts, whether the webhook's Lease is fresh."""
    plan = plan_workload(view, workload, obj, record, pods, memory, now, timings, inputs)
    settle = plan.settle
    if settle is not None and not (settle.went or settle.unsent) and read_pod is not None:
        # The view may not show the eviction yet (the pod's watch runs apart from the
        # record's): only the API server can say it did not happen.
        pod = await read_pod(workload.ref.namespace, settle.intent.pod_name)
        if happened(settle.intent, [pod] if pod is not None else []):
            plan = plan_workload(
                view, workload, obj, record, pods, memory, now, timings, inputs, went=True
            )
    action = plan.rollout.action
    if action is not None and action.disrupts and lease is not None:
        max_age = parse_duration(view.global_config.webhook_lease_max_age)
        held = webhook_unavailable(await lease(), max_age, now)
        if held is not None:
            plan = plan_workload(
                view, workload, obj, record, pods, memory, now, timings, inputs, held=held
            )
    return plan


def steady_until(plan: PassPlan, horizon: timedelta) -> tuple[datetime, bool]:
    """Until when a pass that wrote nothing stands, and whether that is when its
    decisions change (else the steady horizon: the times a decision reads that its span
    does not describe)."""
    change = plan.clock.next_change()
    changes = [d.next_allowed_at for d in plan.decisions if d.next_allowed_at]
    changes += [change] if change is not None else []
    latest = plan.now + horizon
    until = min([latest, *changes])
    return until, until < latest
