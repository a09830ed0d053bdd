"""Status condition helpers shared by the simulated controllers, scheduler and kubelet."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def set_condition(
    status: Obj,
    ctype: str,
    value: str,
    now: str,
    reason: str = "",
    message: str = "",
    probe: bool = False,
    **extra: Any,
) -> None:
    """Set one condition, keeping `lastTransitionTime` unless its status flips."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    current = next((c for c in conditions if c.get("type") == ctype), None)
    entry: Obj = {"type": ctype, "status": value}
    if probe:
        entry["lastProbeTime"] = None
    entry["lastTransitionTime"] = (
        current["lastTransitionTime"]
        if current and current.get("status") == value and current.get("lastTransitionTime")
        else now
    )
    if reason:
        entry["reason"] = reason
    if message:
        entry["message"] = message
    entry.update(extra)
    if current is None:
        conditions.append(entry)
    else:
        conditions[conditions.index(current)] = entry


def drop_condition(status: Obj, ctype: str) -> None:
    """Remove one condition if present."""
    if "conditions" in status:
        status["conditions"] = [c for c in status["conditions"] if c.get("type") != ctype]


def get_condition(status: Obj, ctype: str) -> Obj | None:
    """One condition, or None."""
    return next((c for c in status.get("conditions") or [] if c.get("type") == ctype), None)
