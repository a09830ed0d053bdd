"""`events.k8s.io/v1` Events as a view of the `v1` Events storage, as on a real server."""

from __future__ import annotations

from typing import Any

from kubesim.store import clone

Obj = dict[str, Any]

# events.k8s.io/v1 field -> v1 field (top level).
_FIELDS = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_SAME = ("reason", "type", "action", "related", "reportingInstance", "eventTime")


def to_core(obj: Obj) -> Obj:
    """An events.k8s.io/v1 Event in v1 form (for storage)."""
    out: Obj = {"apiVersion": "v1", "kind": "Event", "metadata": clone(obj.get("metadata") or {})}
    for new, old in _FIELDS.items():
        if new in obj:
            out[old] = clone(obj[new])
    for key in _SAME:
        if key in obj:
            out[key] = clone(obj[key])
    series = obj.get("series")
    if series:
        out["series"] = {
            "count": series.get("count"),
            "lastObservedTime": series.get("lastObservedTime"),
        }
        out["count"] = series.get("count", out.get("count"))
    return out


def from_core(obj: Obj) -> Obj:
    """A stored v1 Event in events.k8s.io/v1 form."""
    out: Obj = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": obj.get("metadata") or {},
    }
    for new, old in _FIELDS.items():
        if old in obj:
            out[new] = obj[old]
    for key in _SAME:
        if key in obj:
            out[key] = obj[key]
    if obj.get("series"):
        out["series"] = obj["series"]
    return out
