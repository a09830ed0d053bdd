"""What a pass reports (SPEC §7): the RightsizingRecommendation's status and the Events,
built from the decisions and what the pass did (`Outcome`) as one value, `Report`, that
the actuator writes.

- A change in place is reported (status, one `Resized` event) once, when its rollout is
  done, or as Pending once it has taken `pending_after`; anything else at once.
- Values kerf's plan asks for that already run on a pod but are not recorded yet (a
  restart between a resize and its status write, or a pod sized at admission) are
  recorded as applied when found, so a restart neither repeats nor forgets a change.
- Each Event is told before the status that records it, under a name derived from what
  it was derived from (or named once, for an action's): a pass that fails after telling
  it, or a successor, derives the same name again, and its second create is refused with
  409 (told).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson

from app.decide import PodDecision, describe_resources, format_resources, read_pod_facts
from app.model.annotations import APPROVE, POD_INFO
from app.model.apitime import rfc3339 as stamp
from app.model.crd import LastApplied, RightsizingRecommendation
from app.model.kube_types import PodDict
from app.model.owners import WorkloadRef
from app.model.quantities import same_values
from app.model.workloads import Workload
from app.policy.podstate import resize_progress, resources_running
from app.policy.rollback_health import restart_counts
from app.policy.rollback_monitor import Step
from app.store.view import ClusterView
from reconciler.events import dedup_key, is_repeat, merged, pending_event
from reconciler.memory import Unreported, WorkloadMemory
from reconciler.outcome import Outcome
from reconciler.status import (
    ShownProposal,
    Summary,
    build_status,
    derived_from,
    recommendation_object,
    rollback_status,
    status_digest,
    status_patch,
)

Values = dict[str, dict[str, dict[str, str]]]


@dataclass(frozen=True, slots=True)
class Report:
    """The writes that report a pass, in order: the record created (when missing), the
    Events told, the status written."""

    #: the rollout in place under way that the status does not show yet: nothing is
    #: written, it is remembered (None: reported, or nothing to hold)
    hold: Unreported | None = None
    create: dict[str, Any] | None = None
    #: `pendingEvents`-shaped entries to tell, each under its own name
    events: Sequence[dict[str, Any]] = ()
    #: the status merge patch (None: the status is as it should be)
    patch: dict[str, Any] | None = None
    #: the status found equal to this record version's (remembered: not compared again)
    seen: tuple[str, bytes] | None = None
    #: the digest of the status `patch` writes: the version the write answers with holds
    #: it, so the pass its echo queues need not compare it again
    written: bytes | None = None
    #: the `decision` log line's fields (None: nothing new to say)
    log: dict[str, Any] | None = None


def label(ref: WorkloadRef) -> str:
    """`Kind/namespace/name`, as logs name a workload."""
    return f"{ref.kind}/{ref.namespace}/{ref.name}"


def pod_name(pod: PodDict) -> str:
    """The pod's name ("" without one)."""
    return str((pod.get("metadata") or {}).get("name") or "")


def format_resources_of(view: ClusterView, pod: PodDict) -> Values:
    """A pod's containers' resources as quantities (what kerf sizes)."""
    return {c: format_resources(r) for c, r in read_pod_facts(view, pod)[1].items()}


def applied_entry(decision: PodDecision, method: str) -> dict[str, Any]:
    """The `lastApplied` entry (without its time) of a decision carried out by `method`."""
    applied: dict[str, Any] = {"method": method, "containers": decision.values}
    if decision.proposal_id:
        applied["proposal"] = decision.proposal_id
    if decision.fingerprint:
        # The plan's fingerprint: rollback monitoring watches the recommendation it names.
        applied["fingerprint"] = decision.fingerprint
    return applied


def action_events(ref: WorkloadRef, done: Outcome, now: datetime) -> list[dict[str, Any]]:
    """The Events of the pass's actions, named once."""
    if done.told is None:
        fresh = [pending_event(ref, r, n, warning=w, now=now) for r, n, w in done.events]
        done.told = merged(done.named, fresh)
    return done.told


def plan_report(
    view: ClusterView,
    workload: Workload,
    obj: Mapping[str, Any],
    running: Sequence[PodDict],
    decisions: Sequence[PodDecision],
    record: RightsizingRecommendation | None,
    memory: WorkloadMemory,
    done: Outcome,
    now: datetime,
    *,
    pending_after: timedelta,
    rollback: Step | None = None,
) -> Report:
    """The status and Events that report this pass."""
    ref = workload.ref
    status_before = record.status if record and record.status else None
    recorded = _dumped(status_before.last_applied if status_before else None)
    unreported = memory.unreported
    last_applied = _last_applied(
        unreported.last_applied if unreported else recorded,
        done,
        running,
        decisions,
        workload,
        view,
        now,
    )
    summary = _summary(view, running, decisions, done, last_applied)
    last_event = (
        status_before.last_event.model_dump(by_alias=True)
        if status_before and status_before.last_event
        else None
    )
    events: list[tuple[str, str, bool]] = []
    # A skip while the applied values run everywhere is nothing to report.
    quiet = summary.outcome == "skipped" and summary.live
    if summary.outcome in ("blocked", "skipped") and summary.reason and not quiet:
        shown = summary.proposal
        key = dedup_key(summary.reason, shown.id if shown else summary.selected)
        if not is_repeat(last_event, key):
            events.append(
                (
                    "Blocked" if summary.outcome == "blocked" else "Skipped",
                    f"{summary.reason}: {summary.message}",
                    summary.outcome == "blocked",
                )
            )
            last_event = key
    status = build_status(
        record,
        ref,
        summary,
        last_applied=last_applied,
        last_event=last_event,
        approved=_approval_used(record, last_applied, decisions, done),
        now=now,
        rollback=rollback_status(rollback),
    )
    # Events a status of an earlier kerf left to tell (it recorded them before telling).
    left = [
        p.model_dump(by_alias=True, mode="json")
        for p in (status_before.pending_events if status_before else [])
    ]
    intent = done.intent or bool(status_before and status_before.pending_eviction)
    if not (left or memory.untold or intent) and _holds(
        status_before, status, last_applied, recorded, unreported, done, now, pending_after
    ):
        since = unreported.since if unreported is not None else now
        return Report(hold=Unreported(since, dict(last_applied or {})))
    if last_applied is not None and _new_in_place(recorded, last_applied):
        note = _resized_note(view, last_applied["containers"], running, done)
        events.insert(0, ("Resized", note, False))
    told = action_events(ref, done, now)
    uid = (obj.get("metadata") or {}).get("uid")
    # Named from the status they were derived over: a pass retried over the same one (its
    # status write failed, or went in but the answer was lost and the view has not
    # caught up) derives the same Events under the same names, and tells none twice. A
    # status this pass wrote already (an eviction's intent) is the one a retry reads.
    over = done.status_version if done.status_version is not None else derived_from(record)
    read = f"{uid}/{over}"
    derived = [
        pending_event(ref, r, n, warning=w, now=now, identity=f"{read}/{r}") for r, n, w in events
    ]
    # Resized first: the change, then how it was made.
    to_tell = merged(left, memory.untold, derived[:1], told, derived[1:])
    patch, seen = _status_patch(record, status, memory.seen_status)
    if done.intent:
        # Written in this pass, so not in the record read: cleared explicitly.
        patch = {**(patch or {}), "pendingEviction": None}
    create = None
    if record is None and not done.created:
        create = recommendation_object(ref, str(obj.get("apiVersion")), uid)
    log = None
    if patch is not None or events:
        log = dict(
            workload=label(ref),
            outcome=summary.outcome,
            reason=summary.reason,
            message=summary.message,
            phase=status["phase"],
            values=(last_applied or {}).get("containers"),
        )
    written = status_digest(status) if patch is not None else None
    return Report(create=create, events=to_tell, patch=patch, seen=seen, written=written, log=log)


def _status_patch(
    record: RightsizingRecommendation | None,
    status: dict[str, Any],
    seen: tuple[str, bytes] | None,
) -> tuple[dict[str, Any] | None, tuple[str, bytes] | None]:
    """`status_patch`, skipped when this very status was found equal to the same version
    of the record before (a steady workload costs a digest comparison); and what to
    remember of a status found equal."""
    version = record.metadata.resource_version if record is not None else None
    digest = status_digest(status) if version is not None else b""
    if version is not None and seen == (version, digest):
        return None, seen
    patch = status_patch(record, status)
    if patch is None and version is not None:
        return None, (version, digest)
    return patch, seen


def _holds(
    before: Any,
    status: Mapping[str, Any],
    last_applied: Mapping[str, Any] | None,
    recorded: Mapping[str, Any] | None,
    unreported: Unreported | None,
    done: Outcome,
    now: datetime,
    pending_after: timedelta,
) -> bool:
    """Whether this pass's status waits: a change in place whose rollout is under way is
    reported when it is done, or once it has taken `pending_after` (as Pending, written
    once). Anything else (a block, an eviction, a fallback, rollback, another change
    waiting to be decided) is reported at once."""
    if done.report or done.events:
        return False
    if status["phase"] != "Pending" or not done.busy:
        return False
    if last_applied is None or last_applied.get("method") != "inPlace":
        return False
    shown = recorded is not None and same_values(
        recorded.get("containers") or {}, last_applied["containers"]
    )
    if shown and before is not None and before.phase == "Pending":
        return True  # the status says so already
    since = unreported.since if unreported is not None else now
    return now - since < pending_after


def _dumped(last_applied: Any) -> dict[str, Any] | None:
    if last_applied is None:
        return None
    return last_applied.model_dump(by_alias=True, mode="json", exclude_none=True)


def _new_in_place(recorded: Mapping[str, Any] | None, last_applied: Mapping[str, Any]) -> bool:
    """The status records a change made in place that it did not record before (nor as
    made in place: values recorded as admitted and then resized to are one)."""
    if last_applied.get("method") != "inPlace":
        return False
    return (
        recorded is None
        or recorded.get("method") != "inPlace"
        or not same_values(recorded.get("containers") or {}, last_applied["containers"])
    )


def _runs(view: ClusterView, pod: PodDict, values: Mapping[str, Any]) -> bool:
    """The pod's spec has these values for their containers."""
    current = format_resources_of(view, pod)
    return same_values({c: v for c, v in current.items() if c in values}, values)


def _resized_note(
    view: ClusterView,
    values: Mapping[str, Any],
    running: Sequence[PodDict],
    done: Outcome,
) -> str:
    """The `Resized` event of a change: its values and how many pods have them in place
    (the pod resized in this pass is not in the view yet); a replacement admitted with
    them (a fallback's eviction) is told apart, not counted as resized, and a pod whose
    resize the node refused (Infeasible), or that this pass evicted, is not counted."""
    having = [
        p
        for p in running
        if _runs(view, p, values)
        and pod_name(p) != done.evicted
        and resize_progress(p).stage != "infeasible"
    ]
    admitted = {pod_name(p) for p in having if admitted_with(p, values)}
    names = {pod_name(p) for p in having} - admitted
    if done.resized is not None:
        names.add(done.resized)
    count = f"{len(names)} of {len(running)} pods"
    if admitted:
        count += f", {len(admitted)} replaced and sized at admission"
    if len(names) + len(admitted) < len(running):
        count += ", the others follow"
    return f"resized in place: {describe_resources(values)} ({count})"


def _last_applied(
    previous: dict[str, Any] | None,
    done: Outcome,
    running: Sequence[PodDict],
    decisions: Sequence[PodDecision],
    workload: Workload,
    view: ClusterView,
    now: datetime,
) -> dict[str, Any] | None:
    """`lastApplied` after this pass: kept while the same values roll out (its time is the
    cooldown clock, started by the first pod); new when other values were applied now or
    are found running on the pods unrecorded."""
    found = done.applied or _unrecorded(running, decisions, workload, view)
    if found is None:
        return previous
    if previous is not None and same_values(previous.get("containers") or {}, found["containers"]):
        if previous.get("method") == "admission" and found.get("method") == "inPlace":
            # Recorded as admitted (a pod sized at admission was found first), and then
            # a pod was resized to the same values: a change in place, told once.
            previous = {**previous, "method": "inPlace"}
        fingerprint = found.get("fingerprint")
        if fingerprint and previous.get("fingerprint") != fingerprint:
            # The same values under other keys (e.g. multi-policy toggled): a new
            # recommendation for rollback monitoring, applied already.
            return {**previous, "fingerprint": fingerprint}
        return previous
    # The restart counts as they were when the change was sent: rollback monitoring
    # counts the failures beyond them, whatever second the API stamps them with.
    entry = {"at": stamp(now), **found, "baseline": restart_counts(running)}
    # As the status reads back (every field its model has): a pass that reports this
    # entry from memory writes what a pass that reads it from the record would.
    return _dumped(LastApplied.model_validate(entry))


def _unrecorded(
    running: Sequence[PodDict],
    decisions: Sequence[PodDecision],
    workload: Workload,
    view: ClusterView,
) -> dict[str, Any] | None:
    """Values kerf's plan asks that already run on a pod but differ from the workload's
    template: kerf put them there (at admission, or a resize whose record was lost). A
    pod that runs them in place makes it a change in place, whichever pod comes first:
    a replica that resized one and lost the workload's bucket before its report leaves
    pods admitted with the same values beside it, and its successor tells the change."""
    found: dict[str, Any] | None = None
    for pod, decision in zip(running, decisions, strict=True):
        if decision.outcome != "skipped" or decision.reason != "NoSignificantChange":
            continue
        current = format_resources_of(view, pod)
        changed = {
            c: values
            for c, values in current.items()
            if c in workload.containers
            and not same_values({c: values}, {c: _template(workload, c)})
        }
        if not changed:
            continue
        admitted = admitted_with(pod, changed)
        if found is not None and admitted:
            continue
        found = {"method": "admission" if admitted else "inPlace", "containers": changed}
        if decision.fingerprint:
            found["fingerprint"] = decision.fingerprint
        if not admitted:
            return found
    return found


def admitted_with(pod: PodDict, values: Mapping[str, Any]) -> bool:
    """The webhook set these values when it admitted the pod (its info annotation names
    them): else they were set in place since."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(POD_INFO)
    try:
        info = orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return False
    admitted = info.get("containers") if isinstance(info, dict) else None
    if not isinstance(admitted, dict):
        return False
    return same_values({c: admitted.get(c) or {} for c in values}, values)


def _template(workload: Workload, container: str) -> dict[str, dict[str, str]]:
    values = workload.containers.get(container) or {}
    return {f: dict(v) for f, v in values.items() if v}


def _summary(
    view: ClusterView,
    running: Sequence[PodDict],
    decisions: Sequence[PodDecision],
    done: Outcome,
    last_applied: Mapping[str, Any] | None,
) -> Summary:
    current = format_resources_of(view, running[0]) if running else {}
    selected = [s.as_dict() for s in decisions[0].selected] if decisions else []
    live = (
        last_applied is not None
        # the kubelet runs them: a resize it refused (Error) or defers is not live
        and all(
            _runs(view, p, last_applied["containers"]) and resources_running(p) for p in running
        )
        and bool(running)
    )
    # A proposal waiting for approval, or approved and held (the cooldown between steps).
    audit = next((d for d in decisions if d.proposal_id and d.proposal_target), None)
    proposal = (
        ShownProposal(
            audit.proposal_id,
            {c: format_resources(r) for c, r in audit.proposal.items()},
            {c: format_resources(r) for c, r in audit.proposal_target.items()},
            audit.proposal_target_id,
            audit.proposal_schedule,
        )
        if audit is not None and audit.proposal_id
        else None
    )
    filtered = list(
        {tuple(f.as_dict().items()): f.as_dict() for d in decisions for f in d.filtered}.values()
    )
    common: dict[str, Any] = dict(
        current=current, selected=selected, proposal=proposal, live=live, filtered=filtered
    )
    if done.blocked is not None:
        return Summary("blocked", done.blocked[0], done.blocked[1], **common)
    if done.busy or any(d.outcome == "apply" for d in decisions):
        return Summary("apply", None, "a change is being applied", **common)
    if not decisions:
        return Summary("pending", "NoRunningPods", "no running pod to decide for", **common)
    chosen = next((d for d in decisions if d.outcome == "blocked"), decisions[0])
    return Summary(
        chosen.outcome,
        chosen.reason,
        chosen.message,
        next_allowed_at=chosen.next_allowed_at,
        **common,
    )


def _approval_used(
    record: RightsizingRecommendation | None,
    last_applied: Mapping[str, Any] | None,
    decisions: Sequence[PodDecision],
    done: Outcome,
) -> str | None:
    """The approval (`approve=<id>`) is used up once its proposal has rolled out: the last
    applied change carries it and no pod has anything left to apply."""
    previous = record.status.approved_proposal if record and record.status else None
    wanted = record.metadata.annotations.get(APPROVE) if record else None
    if (
        wanted
        and wanted != previous
        and last_applied is not None
        and last_applied.get("proposal") == wanted
        and not done.busy
        and not any(d.outcome == "apply" for d in decisions)
    ):
        return wanted
    return previous
