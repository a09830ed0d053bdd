"""The status a node's kubelet reports for a pod: pure functions of (pod, node, the other
pods on the node, what the node remembers, now).

The same semantics as kubesim's kubelet (kubesim/kubelet.py), whose container statuses
(first status, restarts, actuated resources) both take from `kubesim/containerstatus.py`;
sidecars (init containers with restartPolicy Always, which run and resize like app
containers) and the
`sim.kerf.dev/*` fault annotations included; the annotations' keys, forced resize
messages and crash back-off are kubesim's own (`kubesim/fault_annotations.py`), so both
backends read the same contract:

- `sim.kerf.dev/oom-kill=<container>`: that container is OOM-killed once for each new value
  (`<container>/2`, `/3` kill it again): restartCount + 1, lastState.terminated
  `OOMKilled` exit 137, restarted at once.
- `sim.kerf.dev/crash-loop=<container>[,<container>]`: fails (lastState.terminated `Error`
  exit 1) and waits in `CrashLoopBackOff`, failing again after each back-off (10 s doubling,
  at most 5 min), until the annotation is removed; then it runs again.
- `sim.kerf.dev/unready=<container>[,<container>]`: its readiness probe fails.
- `sim.kerf.dev/resize=Deferred|Infeasible`: the node answers the pod's resizes so while the
  annotation is there.
- `sim.kerf.dev/resize=Error`: the node refuses to actuate the pod's resizes
  (`PodResizeInProgress` reason `Error`), as a kubelet refuses a memory limit below the
  container's usage, while the annotation is there.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from devcluster.fit import is_sidecar, resize_verdict
from kubesim.clock import parse_rfc3339, rfc3339
from kubesim.conditions import drop_condition, get_condition, set_condition
from kubesim.containerstatus import applied_resources, needs_restart, new_entry, restart
from kubesim.fault_annotations import (
    CRASH_BACKOFF_BASE,
    CRASH_BACKOFF_CAP,
    CRASH_LOOP,
    FORCED_RESIZE,
    OOM_KILL,
    RESIZE,
    UNREADY,
    forced_error,
)
from kubesim.quantity import parse

Obj = dict[str, Any]


@dataclass
class PodMemory:
    """What a node keeps about a pod outside its status."""

    #: The oom-kill annotation value already acted on (None: none, or it was removed).
    oom_handled: str | None = None
    #: Consecutive crash-loop failures per container, for the back-off.
    crash_failures: dict[str, int] = field(default_factory=dict)


def backoff_s(failures: int) -> int:
    """The kubelet's crash back-off after `failures` consecutive failures."""
    delay = min(CRASH_BACKOFF_BASE * 2 ** max(failures - 1, 0), CRASH_BACKOFF_CAP)
    return int(delay.total_seconds())


def _numbers(values: Obj | None) -> dict[str, Fraction]:
    return {k: parse(v) for k, v in (values or {}).items()}


def _resize_pending(container: Obj, entry: Obj) -> bool:
    """The spec asks for other resources than the node allocated or runs (compared as
    numbers: `1000m` is `1`)."""
    requests = (container.get("resources") or {}).get("requests")
    if _numbers(requests) != _numbers(entry.get("allocatedResources")):
        return True
    wanted, running = applied_resources(container), entry.get("resources") or {}
    return any(_numbers(wanted.get(s)) != _numbers(running.get(s)) for s in ("requests", "limits"))


def _resize(
    pod: Obj,
    node: Obj,
    others: list[Obj],
    running: list[tuple[Obj, Obj]],
    status: Obj,
    stamp: str,
    generation: int,
) -> None:
    """Act out a pending in-place resize: applied in one step when it fits (a container
    whose resizePolicy says RestartContainer for a changed resource restarts), else
    PodResizePending Deferred or Infeasible, or PodResizeInProgress Error while the
    `resize=Error` annotation stands for a memory limit below the container's usage."""
    pending = [(c, e) for c, e in running if _resize_pending(c, e)]
    if not pending:
        drop_condition(status, "PodResizePending")
        drop_condition(status, "PodResizeInProgress")
        return
    forced = ((pod["metadata"].get("annotations") or {}).get(RESIZE) or "").strip()
    verdict = (forced, FORCED_RESIZE[forced]) if forced in FORCED_RESIZE else None
    verdict = verdict or resize_verdict(pod, node, others)
    if verdict is not None:
        reason, message = verdict
        drop_condition(status, "PodResizeInProgress")
        set_condition(
            status,
            "PodResizePending",
            "True",
            stamp,
            reason,
            message,
            probe=True,
            observedGeneration=generation,
        )
        return
    drop_condition(status, "PodResizePending")
    # Kept, not dropped and set again: its lastTransitionTime is when the refusal began.
    refused = forced_error(pod["metadata"].get("annotations"))
    if refused:
        set_condition(
            status,
            "PodResizeInProgress",
            "True",
            stamp,
            "Error",
            refused,
            probe=True,
            observedGeneration=generation,
        )
        return
    drop_condition(status, "PodResizeInProgress")
    uid = pod["metadata"]["uid"]
    for container, entry in pending:
        wanted = applied_resources(container)
        if needs_restart(container, entry.get("resources") or {}, wanted):
            restart(entry, uid, stamp, "Completed", 0)
        entry["resources"] = wanted
        entry["allocatedResources"] = dict((container.get("resources") or {}).get("requests") or {})


def _names(value: str | None) -> set[str]:
    return {n.strip() for n in (value or "").split(",") if n.strip()}


def _faults(pod: Obj, running: dict[str, Obj], memory: PodMemory, now: datetime) -> set[str]:
    """Act out the fault annotations on the running containers; the names of those that
    are not ready."""
    meta = pod["metadata"]
    annotations = meta.get("annotations") or {}
    uid, stamp = meta["uid"], rfc3339(now)
    oom = annotations.get(OOM_KILL)
    if oom and oom != memory.oom_handled:
        entry = running.get(oom.split("/", 1)[0].strip())
        if entry is not None and "running" in (entry.get("state") or {}):
            restart(entry, uid, stamp, "OOMKilled", 137)
    memory.oom_handled = oom or None
    crashing = _names(annotations.get(CRASH_LOOP)) & set(running)
    for name, entry in running.items():
        if name in crashing:
            _crash_loop(pod, entry, memory, now)
        elif memory.crash_failures.pop(name, None) is not None or "waiting" in entry["state"]:
            entry["state"] = {"running": {"startedAt": stamp}}
            entry["started"] = True
    return crashing | (_names(annotations.get(UNREADY)) & set(running))


def _crash_loop(pod: Obj, entry: Obj, memory: PodMemory, now: datetime) -> None:
    """Fail now if running, or again once the back-off since the last failure is over."""
    name, stamp = entry["name"], rfc3339(now)
    failures = memory.crash_failures.get(name, 0)
    if failures and "waiting" in entry["state"]:
        last = (entry.get("lastState") or {}).get("terminated") or {}
        finished = parse_rfc3339(last.get("finishedAt") or stamp)
        if now < finished + timedelta(seconds=backoff_s(failures)):
            return
    meta = pod["metadata"]
    restart(entry, meta["uid"], stamp, "Error", 1)
    failures += 1
    memory.crash_failures[name] = failures
    entry["started"] = False
    entry["state"] = {
        "waiting": {
            "reason": "CrashLoopBackOff",
            "message": f"back-off {backoff_s(failures)}s restarting failed container={name} "
            f"pod={meta['name']}_{meta['namespace']}({meta['uid']})",
        }
    }


def _terminated(status: Obj, stamp: str, generation: int) -> Obj:
    """Every container stopped (graceful termination acted out): the pod is Succeeded."""
    for key in ("initContainerStatuses", "containerStatuses"):
        for entry in status.get(key) or []:
            state = entry.get("state") or {}
            if "terminated" not in state:
                entry["state"] = {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": state.get("running", {}).get("startedAt", stamp),
                        "finishedAt": stamp,
                        "containerID": entry.get("containerID", ""),
                    }
                }
            entry["ready"] = False
            entry["started"] = False
    status["phase"] = "Succeeded"
    for ctype in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
        set_condition(
            status,
            ctype,
            "False",
            stamp,
            "PodCompleted" if ctype != "PodReadyToStartContainers" else "",
            probe=True,
            observedGeneration=generation,
        )
    status["observedGeneration"] = generation
    return status


def desired_status(
    pod: Obj, node: Obj, others: list[Obj], memory: PodMemory, now: datetime, pod_ip: str
) -> tuple[Obj, PodMemory]:
    """The status the node reports for `pod` now, and what it remembers about it after.

    `others` are the other pods on the node (their allocated requests decide whether a
    resize fits); `pod_ip` is the address the node gives the pod if it has none yet.
    """
    memory = copy.deepcopy(memory)
    status = copy.deepcopy(pod.get("status") or {})
    meta, spec = pod["metadata"], pod["spec"]
    generation = int(meta.get("generation", 1))
    stamp = rfc3339(now)
    if meta.get("deletionTimestamp"):
        return _terminated(status, stamp, generation), memory
    uid = meta["uid"]
    status["phase"] = "Running"
    status.setdefault("startTime", stamp)
    host_ip = next(
        (
            a["address"]
            for a in (node.get("status") or {}).get("addresses") or []
            if a.get("type") == "InternalIP"
        ),
        "10.0.0.1",
    )
    status["hostIP"], status["hostIPs"] = host_ip, [{"ip": host_ip}]
    status.setdefault("podIP", pod_ip)
    status["podIPs"] = [{"ip": status["podIP"]}]

    known = {
        s["name"]: s
        for key in ("initContainerStatuses", "containerStatuses")
        for s in status.get(key) or []
    }
    running: list[tuple[Obj, Obj]] = []
    lists: dict[str, list[Obj]] = {}
    for key, spec_key in (
        ("initContainerStatuses", "initContainers"),
        ("containerStatuses", "containers"),
    ):
        entries = []
        for container in spec.get(spec_key) or []:
            runs = spec_key == "containers" or is_sidecar(container)
            entry = known.get(container["name"]) or new_entry(container, uid, stamp, runs)
            entry["image"] = container.get("image", "")
            entries.append(entry)
            if runs:
                running.append((container, entry))
        lists[key] = entries
    if lists["initContainerStatuses"]:
        status["initContainerStatuses"] = lists["initContainerStatuses"]
    else:
        status.pop("initContainerStatuses", None)
    status["containerStatuses"] = lists["containerStatuses"]

    _resize(pod, node, others, running, status, stamp, generation)
    unready = _faults(pod, {e["name"]: e for _, e in running}, memory, now)
    for _, entry in running:
        entry["ready"] = entry["name"] not in unready and "running" in entry["state"]
    not_ready = [e["name"] for _, e in running if not e["ready"]]
    message = f"containers with unready status: [{' '.join(not_ready)}]" if not_ready else ""
    for ctype in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"):
        ok = ctype in ("PodReadyToStartContainers", "Initialized") or not not_ready
        set_condition(
            status,
            ctype,
            "True" if ok else "False",
            stamp,
            "" if ok else "ContainersNotReady",
            "" if ok else message,
            probe=True,
            observedGeneration=generation,
        )
    if get_condition(status, "PodScheduled") is None:
        set_condition(status, "PodScheduled", "True", stamp, probe=True)
    status["observedGeneration"] = generation
    return status, memory
