"""Server-side printing (`meta.k8s.io/v1 Table`) for `kubectl get`."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from kubesim.clock import parse_rfc3339
from kubesim.pods import is_sidecar
from kubesim.resources import ResourceType

Obj = dict[str, Any]
_FILTER = re.compile(r'^\[\?\(@\.([A-Za-z0-9_]+)\s*==\s*["\']([^"\']*)["\']\)\]')
_INDEX = re.compile(r"^\[(\d+)\]")
_FIELD = re.compile(r"^\.?([A-Za-z0-9_\-]+)")


def wants_table(accept: str) -> bool:
    """Whether the client asked for a Table (kubectl get does)."""
    return "as=Table" in accept


def human_duration(seconds: float) -> str:
    """kubectl's compact age format (`45s`, `3m12s`, `5h`, `2d3h`, `400d`)."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    return f"{hours // 24}d"


def json_path(obj: Any, path: str) -> Any:
    """Evaluate the JSONPath subset printer columns use: `.a.b`, `[0]`, `[?(@.k=="v")]`."""
    rest = path.strip()
    if rest.startswith("{") and rest.endswith("}"):
        rest = rest[1:-1]
    node = obj
    while rest and node is not None:
        if m := _FILTER.match(rest):
            key, value = m.groups()
            node = (
                next((i for i in node if isinstance(i, dict) and str(i.get(key)) == value), None)
                if isinstance(node, list)
                else None
            )
        elif m := _INDEX.match(rest):
            idx = int(m.group(1))
            node = node[idx] if isinstance(node, list) and idx < len(node) else None
        elif m := _FIELD.match(rest):
            node = node.get(m.group(1)) if isinstance(node, dict) else None
        else:
            return None
        rest = rest[m.end() :]
    return node


def _age(obj: Obj, now: datetime) -> str:
    created = obj.get("metadata", {}).get("creationTimestamp")
    return (
        human_duration((now - parse_rfc3339(created)).total_seconds()) if created else "<unknown>"
    )


def _pod_cells(pod: Obj) -> list[Any]:
    """READY, STATUS and RESTARTS as kubectl's pod printer shows them: sidecars count
    with the app containers (READY 2/2), and a sidecar that is not started shows as
    `Init:<waiting reason>`, as the printer walks init containers first."""
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    statuses = status.get("containerStatuses") or []
    sidecars = {c.get("name") for c in spec.get("initContainers") or [] if is_sidecar(c)}
    total = len(spec.get("containers") or []) + len(sidecars)
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    reason = status.get("phase", "Pending")
    for s in status.get("initContainerStatuses") or []:
        if s.get("name") not in sidecars:
            continue
        restarts += int(s.get("restartCount", 0))
        if s.get("started"):
            ready += 1 if s.get("ready") else 0
            continue
        waiting = (s.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            reason = f"Init:{waiting['reason']}"
    for s in statuses:
        waiting = (s.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
    if pod.get("metadata", {}).get("deletionTimestamp"):
        reason = "Terminating"
    return [f"{ready}/{total}", reason, restarts]


def _node_status(node: Obj) -> str:
    """`Ready` or `NotReady`, and `SchedulingDisabled` when cordoned, as kubectl shows."""
    ready = json_path(node, '.status.conditions[?(@.type=="Ready")].status') == "True"
    status = "Ready" if ready else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    return status


def _columns(rt: ResourceType) -> list[tuple[str, str, int, Any]]:
    """(name, type, priority, extractor) per column, Name and Age excluded."""
    if rt.key == ("", "pods"):
        return [
            ("Ready", "string", 0, lambda o: _pod_cells(o)[0]),
            ("Status", "string", 0, lambda o: _pod_cells(o)[1]),
            ("Restarts", "integer", 0, lambda o: _pod_cells(o)[2]),
            ("IP", "string", 1, lambda o: (o.get("status") or {}).get("podIP", "<none>")),
            ("Node", "string", 1, lambda o: (o.get("spec") or {}).get("nodeName", "<none>")),
        ]
    if rt.key == ("apps", "deployments"):
        return [
            (
                "Ready",
                "string",
                0,
                lambda o: (
                    f"{(o.get('status') or {}).get('readyReplicas', 0)}/{(o.get('spec') or {}).get('replicas', 0)}"
                ),
            ),
            (
                "Up-to-date",
                "integer",
                0,
                lambda o: (o.get("status") or {}).get("updatedReplicas", 0),
            ),
            (
                "Available",
                "integer",
                0,
                lambda o: (o.get("status") or {}).get("availableReplicas", 0),
            ),
        ]
    if rt.key in (("apps", "replicasets"), ("apps", "statefulsets")):
        return [
            ("Desired", "integer", 0, lambda o: (o.get("spec") or {}).get("replicas", 0)),
            ("Current", "integer", 0, lambda o: (o.get("status") or {}).get("replicas", 0)),
            ("Ready", "integer", 0, lambda o: (o.get("status") or {}).get("readyReplicas", 0)),
        ]
    if rt.key == ("", "nodes"):
        return [
            (
                "Status",
                "string",
                0,
                _node_status,
            )
        ]
    out = []
    for col in rt.printer_columns:
        if col.get("name", "").lower() == "age":
            continue
        out.append(
            (
                col["name"],
                col.get("type", "string"),
                int(col.get("priority", 0)),
                lambda o, p=col.get("jsonPath", ""): json_path(o, p),
            )
        )
    return out


def _cell(value: Any, col_type: str, now: datetime) -> Any:
    if value is None:
        # The API server's table of a custom resource: a null cell, which kubectl prints
        # empty (no `<none>`, which only built-in kinds' printers write).
        return None
    if col_type == "date" and isinstance(value, str):
        return human_duration((now - parse_rfc3339(value)).total_seconds())
    return value


def _event_seen(event: Obj, first: bool) -> Any:
    """An Event's first or last sighting in either API version's fields."""
    series = event.get("series") or {}
    keys = (
        ("firstTimestamp", "deprecatedFirstTimestamp", "eventTime")
        if first
        else ("lastTimestamp", "deprecatedLastTimestamp", "eventTime", "firstTimestamp")
    )
    if not first and series.get("lastObservedTime"):
        return series["lastObservedTime"]
    return next((event[k] for k in keys if event.get(k)), None)


def _event_field(event: Obj, v1: str, new: str) -> Any:
    return event.get(v1) if v1 in event else event.get(new)


def _event_object(event: Obj) -> str:
    ref = _event_field(event, "involvedObject", "regarding") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


# kubectl get events: no leading Name or trailing Age column, as the real server prints.
_EVENT_COLUMNS: list[tuple[str, str, int, Any]] = [
    ("Last Seen", "date", 0, lambda o: _event_seen(o, first=False)),
    ("Type", "string", 0, lambda o: o.get("type")),
    ("Reason", "string", 0, lambda o: o.get("reason")),
    ("Object", "string", 0, _event_object),
    (
        "Subobject",
        "string",
        1,
        lambda o: (_event_field(o, "involvedObject", "regarding") or {}).get("fieldPath", ""),
    ),
    (
        "Source",
        "string",
        1,
        lambda o: (
            ((o.get("source") or o.get("deprecatedSource") or {}).get("component"))
            or _event_field(o, "reportingComponent", "reportingController")
        ),
    ),
    ("Message", "string", 0, lambda o: _event_field(o, "message", "note")),
    ("First Seen", "date", 1, lambda o: _event_seen(o, first=True)),
    (
        "Count",
        "integer",
        1,
        lambda o: (
            (o.get("series") or {}).get("count") or _event_field(o, "count", "deprecatedCount") or 1
        ),
    ),
    ("Name", "string", 1, lambda o: o["metadata"]["name"]),
]


def to_table(rt: ResourceType, body: Obj, now: datetime, include_object: str) -> Obj:
    """Render a get or list answer as a Table."""
    items = body.get("items") if "items" in body else [body]
    events = rt.key == ("", "events")
    columns = _EVENT_COLUMNS if events else _columns(rt)
    name_column = {
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": "Name",
        "priority": 0,
    }
    age_column = {
        "name": "Age",
        "type": "string",
        "format": "",
        "description": "Age",
        "priority": 0,
    }
    definitions = [] if events else [name_column]
    definitions += [
        {
            "name": n,
            "type": "string" if t == "date" else t,
            "format": "",
            "description": n,
            "priority": p,
        }
        for n, t, p, _ in columns
    ]
    if not events:
        definitions.append(age_column)
    rows = []
    for item in items or []:
        cells = [_cell(f(item), t, now) for _, t, _, f in columns]
        if not events:
            cells = [item["metadata"]["name"], *cells, _age(item, now)]
        row: Obj = {"cells": cells}
        if include_object == "Object":
            row["object"] = item
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": item["metadata"],
            }
        rows.append(row)
    meta = {
        k: v
        for k, v in (body.get("metadata") or {}).items()
        if k in ("resourceVersion", "continue")
    }
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": definitions,
        "rows": rows,
    }
