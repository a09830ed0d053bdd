"""What a RightsizingRecommendation shows people: the values, current → target, and a
reason true for its phase (`kubectl get rsrec`, `kerf status`).

Pure functions over the status the reconciler writes, so `kubectl get` (through the
status's `summary`) and `kerf status` (from the status itself) say the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from app.model.annotations import APPROVE, APPROVE_TARGET
from app.model.apitime import rfc3339
from app.model.quantities import format_resource, parse_resource

#: containers → {"requests"|"limits": {resource: quantity}}
Values = Mapping[str, Mapping[str, Mapping[str, str]]]

ARROW = "→"
#: the rollback monitor's failure reasons, as decision reasons are spelled
_FAILURES = {"oomKilled": "OOMKilled"}
#: a rollback's phases
_ROLLBACK_PHASES = frozenset({"RollingBack", "RolledBack", "Failed"})
#: the phase-true reason of a workload whose last applied values run everywhere
_APPLIED_BY_METHOD = {"inPlace": "Resized", "evict": "Evicted", "admission": "Admitted"}


def target_values(
    current: Values,
    selected: Iterable[Mapping[str, str]],
    proposal_target: Values | None = None,
) -> dict[str, dict[str, dict[str, str]]]:
    """Every container's values once the policies have their way: the winning policy's
    value of each target over the current ones; an audit proposal's target where it has
    one (it is what the policies ask, through enablement)."""
    out = {c: {f: dict(v) for f, v in r.items()} for c, r in current.items()}
    for item in selected:
        names = list(out) if item["container"] == "*" else [item["container"]]
        for name in names:
            out.setdefault(name, {}).setdefault(item["field"], {})[item["resource"]] = item["value"]
    for name, resources in (proposal_target or {}).items():
        for fld, values in resources.items():
            out.setdefault(name, {}).setdefault(fld, {}).update(values)
    return out


def change(resource: str, before: str | None, after: str | None) -> str:
    """`1→500m`, or one value when it stays; `-` for a value that is not set."""
    if before is not None and after is not None and _same(resource, before, after):
        return before
    return f"{before or '-'}{ARROW}{after or '-'}"


def summed(resource: str, fld: str, values: Values) -> str | None:
    """One field of a resource summed over the containers (None: no container sets it)."""
    amounts = [
        parse_resource(resource, (r.get(fld) or {})[resource])
        for r in values.values()
        if resource in (r.get(fld) or {})
    ]
    return format_resource(resource, sum(amounts)) if amounts else None


def totals(current: Values, target: Values) -> dict[str, str]:
    """The columns of the values: CPU and memory requests and limits, current → target,
    summed over the containers; a column no container sets is left out."""
    out: dict[str, str] = {}
    for key, resource, fld in (
        ("cpu", "cpu", "requests"),
        ("memory", "memory", "requests"),
        ("cpuLimit", "cpu", "limits"),
        ("memoryLimit", "memory", "limits"),
    ):
        before = summed(resource, fld, current)
        after = summed(resource, fld, target)
        if before is not None or after is not None:
            out[key] = change(resource, before, after)
    return out


def per_container(current: Values, target: Values) -> list[str]:
    """`app cpu 1→500m memory 512Mi, limits memory 1Gi→512Mi` per container."""
    lines = []
    for name in sorted(set(current) | set(target)):
        parts = []
        for fld in ("requests", "limits"):
            now = (current.get(name) or {}).get(fld) or {}
            then = (target.get(name) or {}).get(fld) or {}
            shown = " ".join(
                f"{r} {change(r, now.get(r), then.get(r))}" for r in sorted(set(now) | set(then))
            )
            if shown:
                parts.append(shown if fld == "requests" else f"limits {shown}")
        lines.append(f"{name} " + (", ".join(parts) if parts else "no values"))
    return lines


def phase_reason(
    phase: str | None,
    *,
    outcome: str,
    reason: str | None,
    applied_method: str | None = None,
    rollback_failure: str | None = None,
    proposed: bool = False,
) -> str:
    """A reason that is true for the phase: why a rollback happened for its phases
    (`RolledBack OOMKilled` once retries are over), how the last values went in for
    Applied unless a new change is held or proposed (never NoSignificantChange there),
    the decision's reason otherwise."""
    if phase in _ROLLBACK_PHASES:
        failure = _failure(rollback_failure)
        if phase == "Failed" and rollback_failure != "rollbackRecommendationUnavailable":
            return f"RolledBack {failure}"
        return failure
    if phase == "Applied":
        if (outcome == "blocked" and reason) or (proposed and reason == "Audit"):
            return str(reason)
        return _APPLIED_BY_METHOD.get(applied_method or "", "Applied")
    if phase == "Pending" and outcome in ("apply", "pending") and reason is None:
        return "InProgress"
    return reason or (phase or "Pending")


def _failure(reason: str | None) -> str:
    if not reason:
        return "Unhealthy"
    return _FAILURES.get(reason, reason[0].upper() + reason[1:])


def policies(selected: Iterable[Mapping[str, str]], namespace: str) -> str | None:
    """The winning policies, `Kind/name` (`Kind/namespace/name` from another namespace),
    in order of first appearance."""
    names: dict[str, None] = {}
    for item in selected:
        kind, name = item.get("policyKind", ""), item.get("policyName", "")
        where = item.get("policyNamespace") or ""
        if where and where != namespace:
            name = f"{where}/{name}"
        names[f"{kind}/{name}"] = None
    return ",".join(names) or None


def _same(resource: str, a: str, b: str) -> bool:
    try:
        return parse_resource(resource, a) == parse_resource(resource, b)
    except ValueError:
        return a == b


def summary_of(status: Mapping[str, Any], namespace: str) -> dict[str, str]:
    """The `summary` a status shows in `kubectl get`, from the status itself."""
    current = status.get("current") or {}
    proposal = status.get("proposal") or {}
    target = target_values(current, status.get("selected") or (), proposal.get("target"))
    out = totals(current, target)
    policy = policies(status.get("selected") or (), namespace)
    if policy:
        out["policy"] = policy
    return out


# ----------------------------------------------------------------- kerf status / approve


def workload_of(record: Mapping[str, Any]) -> str:
    """`deployment/web`: the workload a record is about, as kubectl names it."""
    status = record.get("status") or {}
    shown = status.get("workload")
    if not shown:
        ref = (record.get("spec") or {}).get("targetRef") or {}
        shown = f"{ref.get('kind', '?')}/{ref.get('name', '?')}"
    kind, _, name = str(shown).partition("/")
    return f"{kind.lower()}/{name}"


def approval(record: Mapping[str, Any]) -> str | None:
    """How the shown proposal stands: `awaiting` (approval), `step` (approved once),
    `target` (every step approved); None without a proposal."""
    status = record.get("status") or {}
    proposal = status.get("proposal") or {}
    if not proposal.get("id"):
        return None
    annotations = (record.get("metadata") or {}).get("annotations") or {}
    if proposal.get("targetId") and annotations.get(APPROVE_TARGET) == proposal["targetId"]:
        return "target"
    if annotations.get(APPROVE) == proposal["id"] != status.get("approvedProposal"):
        return "step"
    return "awaiting"


def human_duration(delta: timedelta) -> str:
    """kubectl's short form: `45s`, `12m`, `5h`, `2d3h`."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"


def when(at: datetime | None, now: datetime) -> str:
    """`now`, or `at 2026-12-07T10:00:00Z (in 23h)`."""
    if at is None or at <= now:
        return "now"
    return f"at {rfc3339(at)} (in {human_duration(at - now)})"


def status_time(text: object) -> datetime | None:
    """A time of the status (None: absent or not a time)."""
    if not text:
        return None
    try:
        at = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def next_action(record: Mapping[str, Any], now: datetime) -> str:
    """What kerf does next for the workload, and when."""
    status = record.get("status") or {}
    phase = status.get("phase")
    metadata = record.get("metadata") or {}
    if phase in _ROLLBACK_PHASES:
        rollback: Mapping[str, Any] = next(
            (c for c in status.get("conditions") or () if c.get("type") == "Rollback"), {}
        )
        _, found, text = str(rollback.get("message") or "").rpartition("next: ")
        return f"rollback: {text}" if found else "rollback: see the Rollback condition"
    proposal = status.get("proposal") or {}
    state = approval(record)
    if state is not None:
        steps = int(proposal.get("steps") or 1)
        held = status_time(status.get("nextAllowedAt"))
        start = held if held is not None else status_time(proposal.get("nextAt"))
        apart = f"a cooldown ({proposal['cooldown']})" if proposal.get("cooldown") else "a cooldown"
        later = f", then {steps - 1} more {apart} apart" if steps > 1 else ""
        if state == "awaiting":
            command = f"kerf approve {workload_of(record)} -n {metadata.get('namespace')}"
            return f"approve: {command} (step {when(start, now)}{later})"
        if state == "target":
            return f"approved step {when(start, now)}{later}"
        more = f" ({steps - 1} more to approve)" if steps > 1 else ""
        return f"approved step {when(start, now)}{more}"
    at = status_time(status.get("nextAllowedAt"))
    if phase == "Pending":
        return "apply the change now" if status.get("reason") is None else "wait for a pod"
    if phase == "Blocked":
        reason = status.get("reason") or "the block"
        return f"decide again {when(at, now)}" if at else f"wait until {reason} clears"
    if at is not None:
        return f"decide again {when(at, now)}"
    return "none"


def status_line(record: Mapping[str, Any], now: datetime) -> list[str]:
    """`kerf status`'s columns for one record: namespace, workload, phase, reason, the
    values current → target per container, the next action."""
    status = record.get("status") or {}
    metadata = record.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    current = status.get("current") or {}
    proposal = status.get("proposal") or {}
    target = target_values(current, status.get("selected") or (), proposal.get("target"))
    shown = status.get("summary") or {}
    return [
        namespace,
        workload_of(record),
        str(status.get("phase") or "Pending"),
        str(shown.get("reason") or status.get("reason") or "-"),
        "; ".join(per_container(current, target)) or "no running pod yet",
        next_action(record, now),
    ]
