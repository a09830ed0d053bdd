"""The RightsizingRecommendation of a workload: its object and its status (SPEC §7).

Pure functions: the reconciler hands in what it decided and did; these build the object
to create and the status to write. A status equal to the one in the cluster is not
written, and condition times move only when a condition changes, so a steady workload
costs no write.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from app.model.annotations import dumps
from app.model.apitime import rfc3339
from app.model.crd import API_VERSION, RightsizingRecommendation
from app.model.durations import format_duration
from app.model.owners import WorkloadRef
from app.model.records import record_name
from app.policy.record_summary import phase_reason, summary_of
from app.policy.rollback_monitor import Step
from app.policy.schedule import Schedule

Values = dict[str, dict[str, dict[str, str]]]


@dataclass(frozen=True, slots=True)
class ShownProposal:
    """An audit proposal as the status shows it for approval."""

    id: str
    #: what an approval applies now: the guardrails' step
    containers: Values
    #: what the policies ask in the end (equal to `containers` when no guardrail steps)
    target: Values
    #: what `approve-target` names to approve every step toward `target`
    target_id: str = ""
    #: the steps left to `target`, this one included, and the earliest time of this one
    schedule: Schedule | None = None


@dataclass(frozen=True, slots=True)
class Summary:
    """What one pass over a workload found and did."""

    #: apply (a change goes on), blocked, skipped, pending (no running pod yet)
    outcome: str
    reason: str | None
    message: str
    #: resources of the containers as the running pods have them
    current: Values = field(default_factory=dict)
    selected: Sequence[Mapping[str, str]] = ()
    next_allowed_at: datetime | None = None
    proposal: ShownProposal | None = None
    #: the last applied values run on every running pod
    live: bool = False
    #: values dropped for a LimitRange or ResourceQuota (`Filtered.as_dict`)
    filtered: Sequence[Mapping[str, str]] = ()


@dataclass(frozen=True, slots=True)
class RollbackStatus:
    """What rollback monitoring adds to the status: a phase that overrides the decision's
    (RollingBack, RolledBack, Failed), the `Rollback` condition, a new `lastRollback`."""

    phase: str | None
    condition: dict[str, Any] | None
    last_rollback: dict[str, Any] | None
    #: why the change failed (`oomKilled`, …; None while nothing failed)
    failure: str | None = None


def rollback_status(result: Step | None) -> RollbackStatus | None:
    """The status part of a rollback step (None without monitoring)."""
    if result is None:
        return None
    condition = (
        result.condition.model_dump(by_alias=True, mode="json", exclude_none=True)
        if result.condition is not None
        else None
    )
    last = (
        result.last_rollback.model_dump(by_alias=True, mode="json", exclude_none=True)
        if result.last_rollback is not None
        else None
    )
    failure = result.state.failure_reason if result.state is not None else None
    return RollbackStatus(result.phase, condition, last, failure)


def recommendation_object(ref: WorkloadRef, api_version: str, uid: str | None) -> dict[str, Any]:
    """A new RightsizingRecommendation for a workload, owned by it (garbage-collected with
    it)."""
    owner: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": ref.kind,
        "name": ref.name,
        "blockOwnerDeletion": False,
        "controller": False,
    }
    if uid:
        owner["uid"] = uid
    return {
        "apiVersion": API_VERSION,
        "kind": "RightsizingRecommendation",
        "metadata": {
            "name": record_name(ref.kind, ref.name),
            "namespace": ref.namespace,
            "ownerReferences": [owner],
        },
        "spec": {"targetRef": {"apiVersion": api_version, "kind": ref.kind, "name": ref.name}},
    }


def phase_of(summary: Summary, has_applied: bool) -> str:
    """Pending (no running pod, or a change is on its way), Proposed (audit), Applied,
    Blocked or Skipped; Blocked and Skipped only when no earlier change is still live."""
    if summary.outcome in ("pending", "apply"):
        return "Pending"
    if summary.reason == "Audit" and summary.proposal and not summary.live:
        return "Proposed"
    if has_applied and summary.live:
        return "Applied"
    return "Blocked" if summary.outcome == "blocked" else "Skipped"


def _condition(
    previous: Mapping[str, Mapping[str, Any]],
    kind: str,
    status: str,
    reason: str,
    message: str,
    now: datetime,
) -> dict[str, Any]:
    before = previous.get(kind) or {}
    same = before.get("status") == status
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": before.get("lastTransitionTime") if same else rfc3339(now),
    }


def build_status(
    record: RightsizingRecommendation | None,
    ref: WorkloadRef,
    summary: Summary,
    *,
    last_applied: Mapping[str, Any] | None,
    last_event: Mapping[str, Any] | None,
    approved: str | None,
    now: datetime,
    rollback: RollbackStatus | None = None,
) -> dict[str, Any]:
    """The whole status of the workload's RightsizingRecommendation after this pass."""
    previous_status = record.status if record and record.status else None
    previous = {
        c.type: c.model_dump(by_alias=True, mode="json", exclude_none=True)
        for c in (previous_status.conditions if previous_status else [])
    }
    phase = phase_of(summary, last_applied is not None)
    blocked = summary.outcome == "blocked"
    conditions = [
        _condition(
            previous,
            "Blocked",
            "True" if blocked else "False",
            (summary.reason or "Blocked") if blocked else "NotBlocked",
            summary.message if blocked else "",
            now,
        ),
        _condition(
            previous,
            "Applied",
            "True" if last_applied is not None and summary.live else "False",
            _applied_reason(last_applied, summary),
            "the last applied values run on every pod"
            if last_applied is not None and summary.live
            else "",
            now,
        ),
    ]
    if rollback is not None and rollback.condition is not None:
        c = rollback.condition
        conditions.append(
            _condition(
                previous, c["type"], c["status"], c.get("reason", ""), c.get("message", ""), now
            )
        )
    if rollback is not None and rollback.phase is not None:
        phase = rollback.phase
    status: dict[str, Any] = {
        "phase": phase,
        "workload": f"{ref.kind}/{ref.name}",
        "reason": summary.reason,
        "conditions": conditions,
        "current": summary.current,
        "selected": [dict(s) for s in summary.selected],
        "filtered": [dict(f) for f in summary.filtered] or None,
        # A new object starts at generation 1 (it is created just before this status).
        "observedGeneration": (record.metadata.generation or 1) if record else 1,
    }
    if summary.next_allowed_at is not None:
        status["nextAllowedAt"] = rfc3339(summary.next_allowed_at)
    if summary.proposal is not None:
        shown = summary.proposal
        status["proposal"] = {
            "id": shown.id,
            "containers": shown.containers,
            "target": shown.target,
            "targetId": shown.target_id or None,
        }
        if shown.schedule is not None and shown.schedule.steps:
            status["proposal"]["steps"] = shown.schedule.steps
            status["proposal"]["cooldown"] = format_duration(shown.schedule.cooldown)
            if shown.schedule.next_at is not None:
                status["proposal"]["nextAt"] = rfc3339(shown.schedule.next_at)
        status["proposal"] = {k: v for k, v in status["proposal"].items() if v is not None}
    if last_applied is not None:
        status["lastApplied"] = dict(last_applied)
    if rollback is not None and rollback.last_rollback is not None:
        status["lastRollback"] = rollback.last_rollback
    elif previous_status is not None and previous_status.last_rollback is not None:
        status["lastRollback"] = previous_status.last_rollback.model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
    if last_event is not None:
        status["lastEvent"] = dict(last_event)
    if approved is not None:
        status["approvedProposal"] = approved
    shown_summary = summary_of(status, ref.namespace)
    shown_summary["reason"] = phase_reason(
        phase,
        outcome=summary.outcome,
        reason=summary.reason,
        applied_method=str(last_applied.get("method") or "") if last_applied else None,
        rollback_failure=rollback.failure if rollback is not None else None,
        proposed=summary.proposal is not None,
    )
    status["summary"] = shown_summary
    return {k: v for k, v in status.items() if v is not None}


def _applied_reason(last_applied: Mapping[str, Any] | None, summary: Summary) -> str:
    if last_applied is None:
        return "NothingApplied"
    if not summary.live:
        return "InProgress" if summary.outcome == "apply" else "NotLive"
    method = str(last_applied.get("method") or "")
    return {"inPlace": "Resized", "evict": "Evicted", "admission": "Admitted"}.get(
        method, "Applied"
    )


#: Status fields another service writes, which the reconciler's patches leave alone: the
#: GPU reactive evaluation of the recommender (recommender/gpu.py).
OTHER_WRITERS = ("gpu",)


def status_patch(
    record: RightsizingRecommendation | None, status: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The merge patch from the record's status to `status` (null for fields that go);
    None when they are equal."""
    before = (
        record.status.model_dump(by_alias=True, mode="json", exclude_none=True)
        if record and record.status
        else {}
    )
    for key in OTHER_WRITERS:
        before.pop(key, None)
    if _canonical(before) == _canonical(status):
        return None
    patch: dict[str, Any] = dict(status)
    for key in before:
        if key not in status:
            patch[key] = None
    return patch


def derived_from(record: RightsizingRecommendation | None) -> str:
    """What a pass derives its Events from: the version of the record's status it read.
    A record without a status yet (just created: the status subresource ignores a status
    sent with the create) and no record at all are the same start, so the pass that
    creates the record and a retry over the new record derive the same Events."""
    if record is None or record.status is None:
        return ""
    return record.metadata.resource_version or ""


def status_digest(status: Mapping[str, Any]) -> bytes:
    """A 16-byte digest of a status (equal statuses, whatever their key order, have equal
    digests): what the reconciler remembers of a status it found written, instead of the
    status itself. Exact, not `status_patch`'s looser comparison: ~5 µs, not ~150."""
    return hashlib.blake2b(
        orjson.dumps(status, option=orjson.OPT_SORT_KEYS), digest_size=16
    ).digest()


def _canonical(value: Mapping[str, Any]) -> str:
    # Times parsed into models come back with "+00:00"; the API writes "Z". Models fill
    # in empty maps the written status leaves out.
    return dumps(_pruned(value)).replace("+00:00", "Z").replace(".000000Z", "Z")


def _pruned(value: Any) -> Any:
    if isinstance(value, Mapping):
        pruned = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v not in ({}, [], None)}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value
