"""The Events a kubelet records for what one status change did to a pod: pure functions
from (pod before, status after) to events, written by the agent after the status.

The reasons and notes are kubesim's kubelet's (Created, Started, OOMKilling, BackOff,
Killing), with the 1.35 kubelet's resize events (ResizeDeferred and ResizeInfeasible as
Warnings, ResizeCompleted; the note "Pod resize <what>: <JSON of the spec's resources>").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubesim.conditions import get_condition

Obj = dict[str, Any]
NORMAL, WARNING = "Normal", "Warning"


@dataclass(frozen=True)
class PodEvent:
    """One Event about a pod (`field_path` names the container, if any)."""

    type: str
    reason: str
    message: str
    field_path: str = ""


def _entries(status: Obj) -> dict[str, tuple[str, Obj]]:
    out = {}
    for key, spec_key in (
        ("initContainerStatuses", "initContainers"),
        ("containerStatuses", "containers"),
    ):
        for entry in status.get(key) or []:
            out[entry["name"]] = (spec_key, entry)
    return out


def resize_note(pod: Obj, prefix: str, error: str = "") -> str:
    """The kubelet's resize note: `<prefix>: {"initContainers":…,"containers":…,
    "generation":N[,"error":…]}`, resources as in the spec (Go's field order)."""
    summary: Obj = {}
    for key in ("initContainers", "containers"):
        entries = []
        for container in pod["spec"].get(key) or []:
            resources = container.get("resources") or {}
            ordered = {
                s: dict(sorted(resources[s].items()))
                for s in ("limits", "requests")
                if resources.get(s)
            }
            entries.append({"name": container["name"], "resources": ordered})
        if entries:
            summary[key] = entries
    summary["generation"] = int(pod["metadata"].get("generation", 1))
    if error:
        summary["error"] = error
    return f"{prefix}: {json.dumps(summary, separators=(',', ':'))}"


def pod_events(pod: Obj, after: Obj) -> list[PodEvent]:
    """What the kubelet records for the change from `pod`'s stored status to `after`."""
    before = pod.get("status") or {}
    meta = pod["metadata"]
    old = _entries(before)
    found: list[PodEvent] = []
    for name, (spec_key, entry) in _entries(after).items():
        path = f"spec.{spec_key}{{{name}}}"
        state = next(iter(entry.get("state") or {}), "")
        last = (entry.get("lastState") or {}).get("terminated") or {}
        if name not in old:
            if state == "running" or spec_key == "initContainers":
                found.append(PodEvent(NORMAL, "Created", f"Created container: {name}", path))
                found.append(PodEvent(NORMAL, "Started", f"Started container {name}", path))
            continue
        old_entry = old[name][1]
        old_state = next(iter(old_entry.get("state") or {}), "")
        restarted = int(entry.get("restartCount", 0)) > int(old_entry.get("restartCount", 0))
        if state == "terminated" and old_state == "running" and meta.get("deletionTimestamp"):
            found.append(PodEvent(NORMAL, "Killing", f"Stopping container {name}", path))
            continue
        if restarted and last.get("reason") == "OOMKilled":
            found.append(
                PodEvent(
                    WARNING,
                    "OOMKilling",
                    f"Memory cgroup out of memory: killed container {name}",
                    path,
                )
            )
        elif restarted and last.get("reason") == "Completed" and state == "running":
            found.append(
                PodEvent(NORMAL, "Killing", f"Container {name} resize requires a restart", path)
            )
        if state == "waiting" and old_state != "waiting":
            note = (
                f"Back-off restarting failed container {name} in pod "
                f"{meta['name']}_{meta['namespace']}({meta['uid']})"
            )
            found.append(PodEvent(WARNING, "BackOff", note, path))
        elif state == "running" and (restarted or old_state != "running"):
            found.append(PodEvent(NORMAL, "Started", f"Started container {name}", path))
    pending = get_condition(after, "PodResizePending")
    was = get_condition(before, "PodResizePending") or {}
    if pending and (pending.get("reason"), pending.get("message")) != (
        was.get("reason"),
        was.get("message"),
    ):
        reason = pending.get("reason", "")
        note = resize_note(pod, f"Pod resize {reason}", pending.get("message", ""))
        found.append(PodEvent(WARNING, f"Resize{reason}", note))
    resized = any(
        name in old and entry.get("resources") != old[name][1].get("resources")
        for name, (_, entry) in _entries(after).items()
    )
    if resized and not pending:
        found.append(PodEvent(NORMAL, "ResizeCompleted", resize_note(pod, "Pod resize completed")))
    return found


def event_object(pod: Obj, event: PodEvent, node: str, now: datetime) -> Obj:
    """A core v1 Event from `kubelet` on `node`, as the kubelet's recorder writes them."""
    meta = pod["metadata"]
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    involved: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
    if event.field_path:
        involved["fieldPath"] = event.field_path
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": involved,
        "reason": event.reason,
        "message": event.message,
        "type": event.type,
        "source": {"component": "kubelet", "host": node},
        "reportingComponent": "kubelet",
        "reportingInstance": node,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
