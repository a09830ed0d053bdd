"""What a reconciler pass does to a workload's running pods (SPEC §7), as a value.

The pods' decisions are `decide_pod`'s; this module turns them into the one action of the
pass, in the order the spec gives: accepted resizes are followed first (one change at a
time), then the first pod whose decision is `apply`. It owns the decisions that sit
between a decision and its act:

- how long a resize the node defers (or retries after an Error) is waited for before it
  falls back (`apply.fallbackAfter`, from the condition's `lastTransitionTime`);
- the disruption gate: an eviction, or a resize that restarts a container, waits until
  the workload is whole and Ready again;
- `WebhookUnavailable`: no eviction while the webhook's Lease is stale, or the
  replacement would start unsized;
- which unschedulable pod a rollback restore replaces (`app.policy.restore`).

Nothing here writes or reads the API: the reconciler hands in what it remembers of its own
writes (a pod it acted on and the view has not shown changed yet, a proposal the API
rejected) and carries out the `Rollout` returned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from app.decide import PodDecision, decide_fallback, fallback_after
from app.model.durations import format_duration
from app.model.kube_types import PodDict
from app.model.quantities import same_values
from app.model.workloads import Workload
from app.policy.plans import plan_for
from app.policy.podstate import is_ready, is_terminating, resize_progress
from app.policy.restore import unschedulable_to_replace
from app.policy.rollback_monitor import Step
from app.policy.sync import ROLLBACK_KINDS
from app.store.view import ClusterView

#: The reason an eviction is held while the webhook cannot size its replacement.
WEBHOOK_UNAVAILABLE = "WebhookUnavailable"
#: The fallback cause of a resize the node has not carried out, by its stage (an
#: `inProgress` one has none: it is followed).
_RESIZE_CAUSES = {"deferred": "Deferred", "infeasible": "Infeasible", "error": "Error"}

ActionKind = Literal["resize", "evict"]


@dataclass(frozen=True, slots=True)
class Action:
    """The one write a pass makes to a pod, with what it carries."""

    kind: ActionKind
    pod: PodDict
    #: resize, or an eviction that applies a plan: the pod's decision (its values are
    #: recorded as applied); a fallback's: `decide_fallback`'s; None for an eviction that
    #: applies no plan of its own (an unschedulable pod replaced)
    decision: PodDecision | None
    #: the `Evicted` event's note (None: the default one)
    note: str | None = None
    #: a fallback: its cause (Deferred, Infeasible, Error, ResizeRejected) and the
    #: node's or the API's message
    cause: str | None = None
    detail: str = ""

    @property
    def disrupts(self) -> bool:
        """An eviction: held while the webhook's Lease is stale."""
        return self.kind == "evict"


@dataclass(frozen=True, slots=True)
class Fallback:
    """A fallback `decide_fallback` blocked: what the reconciler logs and counts."""

    pod: str
    cause: str
    detail: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class Rollout:
    """The pass's action on its pods and what it leaves the workload in besides what the
    action's answer will (the reconciler follows a write it made)."""

    action: Action | None = None
    #: a change is under way (one still settling, or waited for)
    busy: bool = False
    #: (reason, message) of a change the pass holds back (a fallback blocked, a resize
    #: in Error, the webhook unavailable)
    blocked: tuple[str, str] | None = None
    #: the status must be written now (a decision is about to read it)
    report: bool = False
    #: the seconds after which to look again (None: on a change only)
    again_in: float | None = None
    #: a fallback decided and blocked
    fallback: Fallback | None = None


@dataclass(frozen=True, slots=True)
class Memory:
    """What the reconciler remembers of its own writes that a decision must respect."""

    #: the pod was acted on and the view has not shown it changed since
    awaiting: Callable[[PodDict], bool]
    #: the API's message for this pod's proposal, rejected before (never sent again)
    rejected: Callable[[PodDict, PodDecision], str | None]
    #: the values of the in-place rollout under way that the status does not show yet
    unreported: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Timings:
    """How soon a workload is looked at again after each kind of wait."""

    follow_s: float
    refused_retry_s: float
    lease_retry_s: float


def _sooner(a: float | None, b: float) -> float:
    return b if a is None else min(a, b)


def restores(decision: PodDecision) -> bool:
    """The decision applies rollback restore values to its pod."""
    return decision.outcome == "apply" and any(
        s.policy_kind in ROLLBACK_KINDS for s in decision.selected
    )


def disruption_under_way(
    workload: Workload,
    pods: Sequence[PodDict],
    running: Sequence[PodDict],
    besides: PodDict | None = None,
) -> bool:
    """A disruption is still under way: a pod terminating or not Ready (`besides`, the pod
    about to be replaced, aside), or fewer pods than replicas (a replacement not yet
    created)."""
    if any(is_terminating(p) for p in pods):
        return True
    if any(not is_ready(p) for p in running if p is not besides):
        return True
    live = [p for p in pods if not is_terminating(p)]
    return workload.replicas is not None and len(live) < workload.replicas


def webhook_unavailable(
    renewed: datetime | None, max_age: timedelta, now: datetime
) -> tuple[str, str] | None:
    """Why an eviction is held for the webhook: its Lease, renewed at `renewed`, is older
    than `max_age` (or missing). None: the replacement will be sized."""
    if renewed is not None and now - renewed <= max_age:
        return None
    return WEBHOOK_UNAVAILABLE, "the webhook Lease is stale: a replacement pod would start unsized"


def _readiness_counts(
    running: Sequence[PodDict], decisions: Sequence[PodDecision]
) -> list[PodDict]:
    """The running pods whose readiness holds a disruption back: all but those still
    waiting for a rollback restore. Those are unready because of the change being rolled
    back (an OOM loop); waiting for them to recover would keep the bad values in force."""
    return [p for p, d in zip(running, decisions, strict=True) if not restores(d)]


def _pod_name(pod: PodDict) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


def fall_back(
    view: ClusterView,
    workload: Workload,
    pods: Sequence[PodDict],
    running: Sequence[PodDict],
    pod: PodDict,
    cause: str,
    detail: str,
    now: datetime,
    timings: Timings,
    held: tuple[str, str] | None = None,
) -> Rollout:
    """The fallback of a resize that cannot finish: evict the pod once the workload is
    whole, or blocked when `decide_fallback` says so (or `held`: the webhook cannot size
    the replacement)."""
    decision = decide_fallback(view, pod, now=now, cause=cause)
    if decision.outcome != "apply":
        message = f"{decision.message}: {detail}" if detail else decision.message
        return Rollout(
            blocked=(decision.reason or cause, message),
            again_in=timings.refused_retry_s,
            fallback=Fallback(_pod_name(pod), cause, detail, decision.reason),
        )
    if disruption_under_way(workload, pods, running, besides=pod):
        return Rollout(busy=True, again_in=timings.follow_s)
    if held is not None:
        return Rollout(blocked=held, again_in=timings.lease_retry_s)
    return Rollout(Action("evict", pod, decision, cause=cause, detail=detail))


def _follow(
    view: ClusterView,
    workload: Workload,
    pods: Sequence[PodDict],
    running: Sequence[PodDict],
    now: datetime,
    timings: Timings,
    held: tuple[str, str] | None,
) -> tuple[bool, Rollout]:
    """Accepted resizes being carried out. True while one is, or its fallback was decided
    (nothing new starts meanwhile: one change at a time). A resize the node defers does
    not hold the other pods back until its `fallbackAfter` has passed: False, with what
    waiting for it adds to the pass."""
    busy = False
    blocked: tuple[str, str] | None = None
    again: float | None = None
    for pod in running:
        progress = resize_progress(pod)
        if progress.stage == "none":
            continue
        cause = _RESIZE_CAUSES.get(progress.stage)
        if progress.stage in ("deferred", "error"):
            # An Error (a memory limit below what the container uses now) is retried by
            # the kubelet itself, like a Deferred resize: not sent again, waited for.
            waited = now - (progress.since or now)
            limit = fallback_after(view, workload)
            if waited < limit:
                busy = True
                if progress.stage == "error":
                    blocked = (
                        "ResizeError",
                        f"pod {_pod_name(pod)}: {progress.message} (the kubelet retries; "
                        f"falls back after {format_duration(limit)})",
                    )
                again = _sooner(again, max(0.5, (limit - waited).total_seconds()))
                continue
        if cause is None:
            return True, Rollout(
                busy=True, blocked=blocked, again_in=_sooner(again, timings.follow_s)
            )
        waiting = Rollout(busy=True, blocked=blocked, again_in=again)
        fallback = fall_back(
            view, workload, pods, running, pod, cause, progress.message, now, timings, held
        )
        return True, _with(waiting, fallback)
    return False, Rollout(busy=busy, blocked=blocked, again_in=again)


def plan_rollout(
    view: ClusterView,
    workload: Workload,
    pods: Sequence[PodDict],
    running: Sequence[PodDict],
    decisions: Sequence[PodDecision],
    memory: Memory,
    now: datetime,
    timings: Timings,
    held: tuple[str, str] | None = None,
) -> Rollout:
    """The pass's action on the workload's pods: follow the resizes under way, else the
    first pod whose decision is `apply` (while a rollout in place goes on and the status
    does not show it yet, the first that continues it), in place or by eviction.

    `held`: why an eviction may not go out now (`webhook_unavailable`); the reconciler
    asks only when the rollout without it evicts (the answer costs an API read)."""
    under_way, waiting = _follow(view, workload, pods, running, now, timings, held)
    if under_way:
        return waiting
    applies = [(p, d) for p, d in zip(running, decisions, strict=True) if d.outcome == "apply"]
    if memory.unreported is not None and applies:
        # The rollout under way goes on first. Another change (a pod already resized may
        # want the next step) waits until the status records this one: decisions read
        # the last change, and its cooldown, from there.
        applies = [
            (p, d)
            for p, d in applies
            if d.method == "inPlace"
            and same_values(memory.unreported.get("containers") or {}, d.values)
        ]
        if not applies:
            return _with(waiting, Rollout(busy=True, report=True, again_in=timings.follow_s))
    if not applies:
        return waiting
    pod, decision = applies[0]
    if memory.awaiting(pod):
        # The view has not seen the last action on this pod yet: deciding again now
        # would repeat it.
        return _with(waiting, Rollout(busy=True, again_in=timings.follow_s))
    gentle = decision.method == "inPlace" and not decision.restarts
    if not gentle and disruption_under_way(workload, pods, _readiness_counts(running, decisions)):
        return _with(waiting, Rollout(busy=True, again_in=timings.follow_s))
    if decision.method != "inPlace" and held is not None:
        return _with(waiting, Rollout(blocked=held, again_in=timings.lease_retry_s))
    if decision.method != "inPlace":
        return _with(waiting, Rollout(Action("evict", pod, decision)))
    rejected = memory.rejected(pod, decision)
    if rejected is not None:
        fallback = fall_back(
            view, workload, pods, running, pod, "ResizeRejected", rejected, now, timings, held
        )
        return _with(waiting, fallback)
    return _with(waiting, Rollout(Action("resize", pod, decision)))


def _with(waiting: Rollout, rollout: Rollout) -> Rollout:
    """`rollout`, with what waiting for the resizes the node defers adds to it."""
    again = rollout.again_in
    if waiting.again_in is not None:
        again = _sooner(again, waiting.again_in)
    return Rollout(
        rollout.action,
        busy=rollout.busy or waiting.busy,
        blocked=rollout.blocked or waiting.blocked,
        report=rollout.report,
        again_in=again,
        fallback=rollout.fallback,
    )


def plan_replacement(
    view: ClusterView,
    workload: Workload,
    pods: Sequence[PodDict],
    rollback: Step,
    memory: Memory,
    timings: Timings,
    held: tuple[str, str] | None = None,
) -> Rollout | None:
    """A Pending pod cannot be resized: while a restore is in force, evict one that no
    node fits and that lacks the restored values, so its replacement is admitted with
    them (evicting a Pending pod disrupts nothing; PDBs do not count it). None: nothing
    to replace."""
    pod = unschedulable_to_replace(
        pods, rollback.restore, workload.annotations, plan_for(view, workload).sync.annotations
    )
    if pod is None or memory.awaiting(pod):
        return None
    if held is not None:
        return Rollout(blocked=held, again_in=timings.lease_retry_s)
    note = (
        f"evicted unschedulable pod {_pod_name(pod)}: it cannot be resized; "
        "its replacement is admitted with the rollback's restored values"
    )
    return Rollout(Action("evict", pod, None, note=note))
