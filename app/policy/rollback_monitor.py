"""The rollback state machine (SPEC §8, seed rollback-policies.txt) as one pure function.

`step(state, inputs, now)` takes the stored `rollback-state`, what the cluster shows about a
workload and the time, and returns the next state plus everything the caller must do:
the events to emit, the restore values in force, when to look again, and what the
RightsizingRecommendation shows. It performs no I/O and reads no clock, so a restarted
reconciler that decodes the stored state resumes exactly where it was.

Modes and their meaning here:

- `idle` — nothing monitored. With an `activeRecommendationFingerprint` it waits for that
  recommendation to be applied (a pod carries it, or the reconciler applied it), then
  starts `monitoring`; a guardrail-blocked recommendation is never monitored.
- `monitoring` — the window `[startedAt, expiryAt)`; the verdict comes at its end only.
- `monitoringSucceeded` — `lastSuccessfulState` recorded; `expiryAt` is when it was declared.
- `rollingBack` — restore keys published; ends once every live pod runs the restored values
  or when `expiryAt` (`rollbackStartedAt` + `monitoringPeriod`) passes.
- `backingOff` — restore keys kept until `expiryAt`; then turn + 1 waits for the
  recommendation to be applied again (`idle`), or after `maxAttempts` turns
  `failedPermanent`.
- `failedPermanent` — restore keys kept; that fingerprint is never retried. Only a new
  fingerprint starts a fresh turn 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from app.model.annotations import parse_key, recommendation_fingerprint
from app.model.apitime import rfc3339, rfc3339_as_kept
from app.model.crd import Condition, LastApplied, LastRollback, RollbackPolicy
from app.model.durations import parse_duration
from app.model.kube_types import PodDict
from app.model.workloads import ContainerResources, Workload
from app.policy.plans import guardrails, plan_for, policies_for
from app.policy.rollback import (
    RESTORING_MODES,
    AnyRollbackPolicy,
    RollbackState,
    backoff_wait,
    choose_rollback_policy,
    encode_state,
    restore_target,
)
from app.policy.rollback_health import (
    ADOPTION_THRESHOLD_NOT_MET,
    POD_REASONS,
    RESTORE_UNAVAILABLE,
    Applied,
    HealthThresholds,
    PodHealth,
    carries,
    is_live,
    pod_created,
    pod_health,
    pod_name,
    running_resources,
    runs_values,
    thresholds_for,
)
from app.policy.sync import policy_matches

if TYPE_CHECKING:
    from app.store.view import ClusterView

#: Event reasons (SPEC §8).
MONITORING_STARTED = "RollbackMonitoringStarted"
MONITORING_SUCCEEDED = "RollbackMonitoringSucceeded"
ROLLING_BACK_STARTED = "RollbackRollingBackStarted"
BACKING_OFF = "RollbackBackingOff"
FAILED_PERMANENT = "RollbackFailedPermanent"

#: RightsizingRecommendation phase while a rollback is in force (other modes leave the
#: phase to the decision).
PHASE_BY_MODE: dict[str, str] = {
    "rollingBack": "RollingBack",
    "backingOff": "RolledBack",
    "failedPermanent": "Failed",
}
#: The condition type the state machine owns on the RightsizingRecommendation.
CONDITION_TYPE = "Rollback"


@dataclass(frozen=True, slots=True)
class RollbackEvent:
    """An event to record on the workload."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class MonitorInputs:
    """What the cluster shows about one workload.

    `fingerprint` is `monitored_fingerprint(plan.sync.annotations)` (None: no
    recommendation); `pods` are the workload's pods; `replicas` its desired replicas
    (None for kinds without a count); `manifest` its template's resources
    (`Workload.containers`); `applied` what the reconciler last applied
    (`applied_from_status`).
    """

    policy: AnyRollbackPolicy | None
    fingerprint: str | None
    pods: Sequence[PodDict] = ()
    replicas: int | None = None
    manifest: Mapping[str, ContainerResources] = field(default_factory=dict)
    thresholds: HealthThresholds = field(default_factory=HealthThresholds)
    applied: Applied | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """The outcome of one step.

    - `state`: the state to store (None only when there was none and none is needed);
      `annotation` its `rollback-state` value; `write` whether that differs from before.
    - `events`: to record on the workload, in order.
    - `restore`: the values the rollback restore keys carry after this step (None: no
      restore keys). The policy sync publishes exactly these from the stored state, so
      writing the state annotation is all the caller does for them.
    - `requeue_at`: when the workload must be stepped again even if nothing changes
      (None: only on a change of the workload, its pods or its record).
    - `phase` / `condition`: what the RightsizingRecommendation shows (phase None: the
      decision's phase stands).
    - `last_rollback`: set when a rollback started in this step; write it as
      `status.lastRollback` (it starts the cooldown on decreases of those resources).
    """

    state: RollbackState | None
    annotation: str | None
    write: bool
    events: tuple[RollbackEvent, ...] = ()
    restore: dict[str, ContainerResources] | None = None
    requeue_at: datetime | None = None
    phase: str | None = None
    condition: Condition | None = None
    last_rollback: LastRollback | None = None


# ---------------------------------------------------------------------- inputs


def rollback_policy_for(workload: Workload, policies: Iterable[Any]) -> AnyRollbackPolicy | None:
    """The rollback policy that governs a workload: among RollbackPolicies (own namespace)
    and ClusterRollbackPolicies whose scope matches, higher weight, then older. None: no
    monitoring and no rollback."""
    return choose_rollback_policy(
        p for p in policies if isinstance(p, RollbackPolicy) and policy_matches(p, workload)
    )


def monitored_fingerprint(annotations: Mapping[str, str]) -> str | None:
    """The fingerprint rollback monitors: the hash of the recommendation's physical keys and
    values (the sync result) without the rollback restore keys, so publishing a restore is
    not a new recommendation. None when no recommendation is published. While no restore is
    published it equals the plan fingerprint the webhook writes into pod-rightsizing-info."""
    kept = {
        k: v
        for k, v in annotations.items()
        if (info := parse_key(k)) is None or info.kind != "RollbackPolicy"
    }
    return recommendation_fingerprint(kept) if kept else None


def applied_from_status(last_applied: LastApplied | None) -> Applied | None:
    """`Applied` from the RightsizingRecommendation's `status.lastApplied`.

    Its `fingerprint` must be the fingerprint of the plan whose values were applied
    (`PodDecision.fingerprint`): while a restore is published that plan's fingerprint
    includes the restore keys, so applying a restore never counts as applying the
    recommendation."""
    if last_applied is None:
        return None
    containers = {
        name: {
            "requests": {r: str(q) for r, q in values.requests.items()},
            "limits": {r: str(q) for r, q in values.limits.items()},
        }
        for name, values in last_applied.containers.items()
    }
    return Applied(
        last_applied.fingerprint, last_applied.at, containers, last_applied.baseline or {}
    )


# ---------------------------------------------------------------------- the step


def step(state: RollbackState | None, inputs: MonitorInputs, now: datetime) -> Step:
    """Advance a workload's rollback state to `now` (see the module docstring)."""
    policy = inputs.policy
    if policy is None:
        # Without a matching policy nothing is monitored or restored; the stored state is
        # kept untouched so a policy that comes back resumes it.
        return Step(state, encode_state(state) if state else None, False)
    current = state or RollbackState()
    events: list[RollbackEvent] = []
    rolled_back: list[LastRollback] = []
    new = _advance(current, policy, inputs, now, events, rolled_back)
    annotation = encode_state(new)
    write = new != RollbackState() if state is None else annotation != encode_state(state)
    stored = new if write or state is not None else None
    return Step(
        state=stored,
        annotation=annotation if stored is not None else None,
        write=write,
        events=tuple(events),
        restore=_restore(policy, new, inputs.manifest),
        requeue_at=new.expiry_at if new.mode in _TIMED else None,
        phase=PHASE_BY_MODE.get(new.mode),
        condition=rollback_condition(new, policy),
        last_rollback=rolled_back[0] if rolled_back else None,
    )


_TIMED = frozenset({"monitoring", "rollingBack", "backingOff"})


def _restore(
    policy: AnyRollbackPolicy, state: RollbackState, manifest: Mapping[str, ContainerResources]
) -> dict[str, ContainerResources] | None:
    if not state.restoring:
        return None
    target = restore_target(policy, state, dict(manifest))
    return target if _has_values(target) else None


def _has_values(values: Mapping[str, ContainerResources] | None) -> bool:
    return bool(values) and any(v for res in values.values() for v in res.values())  # type: ignore[union-attr]


def _advance(
    current: RollbackState,
    policy: AnyRollbackPolicy,
    inputs: MonitorInputs,
    now: datetime,
    events: list[RollbackEvent],
    rolled_back: list[LastRollback],
) -> RollbackState:
    fingerprint = inputs.fingerprint
    if fingerprint is not None and fingerprint != current.active_recommendation_fingerprint:
        # A new recommendation (also one whose key moved with the multi-policy flag):
        # a fresh turn 1, restore keys cleared so it can be applied; the recorded
        # successful state survives for a later `lastSuccessful` rollback.
        waiting = RollbackState(
            mode="idle",
            turn=1,
            active_recommendation_fingerprint=fingerprint,
            last_successful_state=current.last_successful_state,
        )
        return _start_when_applied(waiting, policy, inputs, now, events)
    mode = current.mode
    if mode == "idle":
        return _start_when_applied(current, policy, inputs, now, events)
    if mode == "monitoring":
        return _monitor(current, policy, inputs, now, events, rolled_back)
    if mode == "monitoringSucceeded":
        return _reopen(current, policy, inputs, now, events)
    if mode == "rollingBack":
        return _rolling_back(current, policy, inputs, now, events)
    if mode == "backingOff":
        return _backing_off(current, policy, now, events)
    return current  # failedPermanent: only a new fingerprint leaves it


def _period(policy: AnyRollbackPolicy) -> Any:
    return parse_duration(policy.spec.monitoring_period)


def _live(inputs: MonitorInputs) -> list[PodDict]:
    return sorted((p for p in inputs.pods if is_live(p)), key=pod_name)


def _cohort(inputs: MonitorInputs) -> int:
    """The baseline cohort: the desired replicas when the kind has a count, else the live
    pods at the start of the window."""
    if inputs.replicas is not None:
        return inputs.replicas
    return len(_live(inputs))


def _start_monitoring(
    current: RollbackState,
    policy: AnyRollbackPolicy,
    inputs: MonitorInputs,
    now: datetime,
    events: list[RollbackEvent],
    why: str,
) -> RollbackState:
    """Open the window at `now`: the moment the change was sent (SPEC §8)."""
    expiry = now + _period(policy)
    cohort = _cohort(inputs)
    events.append(
        RollbackEvent(
            "Normal",
            MONITORING_STARTED,
            f"turn {current.turn}: {why}; watching {cohort} pod(s) until {rfc3339(expiry)} "
            f"(adoption threshold {policy.spec.adoption_threshold_percent}%)",
        )
    )
    return replace(
        current,
        mode="monitoring",
        started_at=now,
        expiry_at=expiry,
        rollback_started_at=None,
        cohort=cohort,
    )


def _start_when_applied(
    current: RollbackState,
    policy: AnyRollbackPolicy,
    inputs: MonitorInputs,
    now: datetime,
    events: list[RollbackEvent],
) -> RollbackState:
    fingerprint = current.active_recommendation_fingerprint
    if fingerprint is None:
        return current
    applied = inputs.applied
    by_reconciler = (
        applied is not None
        and applied.fingerprint == fingerprint
        and (current.started_at is None or applied.at >= current.started_at)
    )
    if by_reconciler or any(carries(p, fingerprint, applied) for p in _live(inputs)):
        # The reconciler's change opened the window when it was sent, a pass before this
        # one: a pod killed in between is this change's failure.
        opened = min(now, applied.at) if by_reconciler and applied is not None else now
        return _start_monitoring(
            current, policy, inputs, opened, events, f"recommendation {fingerprint} applied"
        )
    return current


def _reopen(
    current: RollbackState,
    policy: AnyRollbackPolicy,
    inputs: MonitorInputs,
    now: datetime,
    events: list[RollbackEvent],
) -> RollbackState:
    """`enableMonitoringReopen`: a pod newer than the success that carries the same
    recommendation reopens the turn (false: only a new recommendation does)."""
    fingerprint = current.active_recommendation_fingerprint
    if not policy.spec.enable_monitoring_reopen or fingerprint is None:
        return current
    closed = current.expiry_at
    for pod in _live(inputs):
        created = pod_created(pod)
        if (
            created is not None
            and (closed is None or created > closed)
            and carries(pod, fingerprint, inputs.applied)
        ):
            return _start_monitoring(
                current, policy, inputs, now, events, f"reopened for new pod {pod_name(pod)}"
            )
    return current


@dataclass(frozen=True, slots=True)
class Verdict:
    """Adoption at the end of a window."""

    adopted: int
    required: int
    cohort: int
    unhealthy: tuple[PodHealth, ...]
    #: live pods that carry the recommendation, and those of them that are healthy
    carrying: tuple[PodDict, ...]
    adopted_pods: tuple[PodDict, ...]
    any_pod: bool

    @property
    def succeeded(self) -> bool:
        """Adopted pods reach the threshold."""
        return self.adopted >= self.required

    @property
    def reason(self) -> str:
        """The most frequent pod failure (ties: the more telling one), else the threshold."""
        if not self.unhealthy:
            return ADOPTION_THRESHOLD_NOT_MET
        counts = {r: sum(1 for h in self.unhealthy if h.reason == r) for r in POD_REASONS}
        return max(POD_REASONS, key=lambda r: (counts[r], -POD_REASONS.index(r)))


def adoption(state: RollbackState, policy: AnyRollbackPolicy, inputs: MonitorInputs) -> Verdict:
    """Count the live pods that carry the active recommendation and are healthy, against
    `adoptionThresholdPercent` of the cohort recorded when the window opened (at least one
    pod is required)."""
    fingerprint = state.active_recommendation_fingerprint or ""
    live = _live(inputs)
    carrying = tuple(p for p in live if carries(p, fingerprint, inputs.applied))
    applied = inputs.applied
    baseline = applied.baseline if applied and applied.fingerprint == fingerprint else {}
    health = [
        pod_health(p, inputs.thresholds, state.started_at, baseline.get(_uid(p))) for p in carrying
    ]
    cohort = state.cohort if state.cohort is not None else _cohort(inputs)
    required = max(1, math.ceil(policy.spec.adoption_threshold_percent * cohort / 100))
    return Verdict(
        adopted=sum(1 for h in health if h.healthy),
        required=required,
        cohort=cohort,
        unhealthy=tuple(h for h in health if not h.healthy),
        carrying=carrying,
        adopted_pods=tuple(p for p, h in zip(carrying, health, strict=True) if h.healthy),
        any_pod=bool(live),
    )


def _uid(pod: PodDict) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def _verdict_message(verdict: Verdict, policy: AnyRollbackPolicy) -> str:
    text = (
        f"{verdict.adopted} of {verdict.cohort} pod(s) adopted the recommendation and are "
        f"healthy; the adoption threshold of {policy.spec.adoption_threshold_percent}% needs "
        f"{verdict.required}"
    )
    if verdict.unhealthy:
        shown = "; ".join(f"{h.name}: {h.detail}" for h in verdict.unhealthy[:3])
        more = len(verdict.unhealthy) - 3
        text += f" (unhealthy: {shown}{f'; {more} more' if more > 0 else ''})"
    return text


def _monitor(
    current: RollbackState,
    policy: AnyRollbackPolicy,
    inputs: MonitorInputs,
    now: datetime,
    events: list[RollbackEvent],
    rolled_back: list[LastRollback],
) -> RollbackState:
    """The verdict comes at the window's end only (the seed lets transient restarts
    recover); a workload without a single live pod then gets another window, since there
    is nothing to judge."""
    if current.expiry_at is not None and now < current.expiry_at:
        return current
    verdict = adoption(current, policy, inputs)
    if not verdict.any_pod:
        return replace(current, expiry_at=now + _period(policy))
    message = _verdict_message(verdict, policy)
    if verdict.succeeded:
        events.append(
            RollbackEvent("Normal", MONITORING_SUCCEEDED, f"turn {current.turn}: {message}")
        )
        return replace(
            current,
            mode="monitoringSucceeded",
            expiry_at=now,
            failure_reason=None,
            failure_message=None,
            last_successful_state=running_resources(verdict.adopted_pods[0]),
        )
    reason = verdict.reason
    failed = replace(current, failure_reason=reason, failure_message=message)
    target = restore_target(policy, failed, dict(inputs.manifest))
    if not _has_values(target):
        text = (
            f"rollback target {policy.spec.rollback_target} has no values to restore "
            f"(no successful state recorded); the change failed with {reason}: {message}"
        )
        events.append(RollbackEvent("Warning", FAILED_PERMANENT, text))
        return replace(
            failed,
            mode="failedPermanent",
            expiry_at=now,
            failure_reason=RESTORE_UNAVAILABLE,
            failure_message=text,
        )
    assert target is not None
    events.append(
        RollbackEvent(
            "Warning",
            ROLLING_BACK_STARTED,
            f"turn {current.turn}: {reason}: {message}; restoring the "
            f"{policy.spec.rollback_target} values",
        )
    )
    rolled_back.append(
        LastRollback(at=now, resources=_changed_resources(target, verdict), reason=reason)
    )
    return replace(
        failed,
        mode="rollingBack",
        rollback_started_at=now,
        expiry_at=now + _period(policy),
    )


def _changed_resources(target: Mapping[str, ContainerResources], verdict: Verdict) -> list[str]:
    """The resources the rollback changes back: those where the restore differs from what
    the pods carrying the recommendation run (all of the restore's when none is known)."""
    changed = {
        resource
        for pod in verdict.carrying
        for name, fields in target.items()
        for fld, values in fields.items()
        for resource, quantity in values.items()
        if not runs_values(pod, {name: {fld: {resource: quantity}}})
    }
    every = {r for fields in target.values() for values in fields.values() for r in values}
    return sorted(changed or every)


def _rolling_back(
    current: RollbackState,
    policy: AnyRollbackPolicy,
    inputs: MonitorInputs,
    now: datetime,
    events: list[RollbackEvent],
) -> RollbackState:
    target = _restore(policy, current, inputs.manifest) or {}
    restored = all(runs_values(p, target) for p in _live(inputs)) if target else True
    deadline = current.expiry_at
    if not restored and (deadline is None or now < deadline):
        return current
    wait = backoff_wait(policy, current.turn)
    expiry = now + wait
    how = "restored" if restored else "restore still in progress"
    events.append(
        RollbackEvent(
            "Normal",
            BACKING_OFF,
            f"turn {current.turn} of {policy.spec.backoff.max_attempts}: {how}; backing off "
            f"{_span(wait)} until {rfc3339(expiry)}",
        )
    )
    return replace(current, mode="backingOff", started_at=now, expiry_at=expiry)


def _backing_off(
    current: RollbackState,
    policy: AnyRollbackPolicy,
    now: datetime,
    events: list[RollbackEvent],
) -> RollbackState:
    if current.expiry_at is not None and now < current.expiry_at:
        return current
    attempts = policy.spec.backoff.max_attempts
    if current.turn >= attempts:
        text = (
            f"gave up after {current.turn} turn(s) of {attempts}; the recommendation is not "
            f"retried until a new one is published (last failure {current.failure_reason}: "
            f"{current.failure_message})"
        )
        events.append(RollbackEvent("Warning", FAILED_PERMANENT, text))
        return replace(current, mode="failedPermanent", expiry_at=now)
    # The next turn waits for the recommendation to be applied again: guardrails (the
    # rollback cooldown among them) may hold it, and a window without it would only fail.
    return replace(
        current,
        mode="idle",
        turn=current.turn + 1,
        started_at=now,
        expiry_at=None,
        rollback_started_at=None,
    )


# ---------------------------------------------------------------------- presentation


def _span(delta: Any) -> str:
    seconds = int(delta.total_seconds())
    if seconds % 3600 == 0 and seconds:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0 and seconds:
        return f"{seconds // 60}m"
    return f"{seconds}s"


@dataclass(frozen=True, slots=True)
class NextStep:
    """What the state machine does next for a workload, and when (None: on a change)."""

    action: str
    at: datetime | None = None


def next_step(state: RollbackState, policy: AnyRollbackPolicy | None) -> NextStep:
    """The next step of a workload's rollback state, for `kerf explain` and conditions."""
    if policy is None:
        return NextStep("none: no rollback policy matches the workload")
    mode = state.mode
    if mode == "idle":
        if state.active_recommendation_fingerprint is None:
            return NextStep("monitor the next recommendation once it is applied")
        return NextStep(f"start monitoring turn {state.turn} once the recommendation is applied")
    if mode == "monitoring":
        return NextStep("evaluate health and the adoption threshold", state.expiry_at)
    if mode == "monitoringSucceeded":
        if policy.spec.enable_monitoring_reopen:
            return NextStep("reopen monitoring when a newer pod carries the recommendation")
        return NextStep("none until a new recommendation is published")
    if mode == "rollingBack":
        return NextStep(
            "back off once every pod runs the restored values, at the latest", state.expiry_at
        )
    if mode == "backingOff":
        if state.turn >= policy.spec.backoff.max_attempts:
            return NextStep("fail permanently (no turns left)", state.expiry_at)
        return NextStep(f"retry the recommendation (turn {state.turn + 1})", state.expiry_at)
    return NextStep("none until a new recommendation is published")


def rollback_condition(state: RollbackState, policy: AnyRollbackPolicy | None) -> Condition:
    """The `Rollback` condition of the RightsizingRecommendation: True while a rollback is
    in force; reason the mode; message the failure and the next step."""
    upcoming = next_step(state, policy)
    message = f"turn {state.turn}: next: {upcoming.action}"
    if upcoming.at is not None:
        message += f" at {rfc3339(upcoming.at)}"
    if state.failure_reason:
        message = f"{state.failure_reason}: {state.failure_message}; {message}"
    return Condition(
        type=CONDITION_TYPE,
        status="True" if state.mode in RESTORING_MODES else "False",
        reason=state.mode[0].upper() + state.mode[1:],
        message=message,
    )


def summary(state: RollbackState | None, policy: AnyRollbackPolicy | None) -> dict[str, Any]:
    """A workload's rollback state as `kerf explain` shows it (JSON)."""
    current = state or RollbackState()
    upcoming = next_step(current, policy)
    body: dict[str, Any] = {
        "policy": (
            {
                "kind": policy.kind,
                "namespace": policy.metadata.namespace,
                "name": policy.metadata.name,
            }
            if policy is not None
            else None
        ),
        "mode": current.mode,
        "turn": current.turn,
        "maxAttempts": policy.spec.backoff.max_attempts if policy is not None else None,
        "activeRecommendationFingerprint": current.active_recommendation_fingerprint,
        "failureReason": current.failure_reason,
        "failureMessage": current.failure_message,
        "nextStep": upcoming.action,
        "nextStepAt": rfc3339_as_kept(upcoming.at) if upcoming.at is not None else None,
    }
    return body


def policy_counts(states: Iterable[RollbackState]) -> dict[str, int]:
    """RollbackPolicy `status` counters over the states of the workloads it governs:
    monitoring now, rolled back now (rollingBack or backingOff), failed permanently."""
    counts = {"monitoring": 0, "rolledBack": 0, "failedPermanent": 0}
    for state in states:
        if state.mode == "monitoring":
            counts["monitoring"] += 1
        elif state.mode in ("rollingBack", "backingOff"):
            counts["rolledBack"] += 1
        elif state.mode == "failedPermanent":
            counts["failedPermanent"] += 1
    return counts


# ---------------------------------------------------------------------- from the view


def monitor_inputs(view: ClusterView, workload: Workload) -> MonitorInputs:
    """Everything `step` needs about a workload, read from the cluster view: the governing
    rollback policy, the monitored fingerprint of its current recommendation, its pods,
    replicas and template values, the strictest health thresholds of the policies that
    contributed, and what the reconciler last applied (its RightsizingRecommendation)."""
    plan = plan_for(view, workload)
    record = view.recommendations("record", workload.ref)
    contributing = {
        (p.kind, p.metadata.namespace, p.metadata.name): p
        for key, p in plan.sync.sources.items()
        if (info := parse_key(key)) is not None and info.kind != "RollbackPolicy"
    }
    return MonitorInputs(
        policy=rollback_policy_for(workload, policies_for(view, workload)),
        fingerprint=monitored_fingerprint(plan.sync.annotations),
        pods=view.pods(workload.ref),
        replicas=workload.replicas,
        manifest=dict(workload.containers),
        thresholds=thresholds_for(guardrails(view, p) for p in contributing.values()),
        applied=applied_from_status(
            record.status.last_applied if record and record.status else None
        ),
    )
