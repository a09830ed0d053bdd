"""What a pod takes from a node, and the kubelet's verdict on an in-place resize.

Pure functions over API objects (dicts), mirroring the 1.35 kubelet's allocation manager
(`canResizePod`): above the node's allocatable is `Infeasible`, not fitting next to the
other pods' allocated requests is `Deferred`, with the kubelet's messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from kubesim.quantity import parse

Obj = dict[str, Any]
RESIZABLE = ("cpu", "memory")


def is_sidecar(container: Obj) -> bool:
    """An init container that keeps running beside the app (restartPolicy Always)."""
    return container.get("restartPolicy") == "Always"


def _requests(container: Obj, allocated: Obj | None) -> dict[str, Fraction]:
    raw = (
        allocated
        if allocated is not None
        else (container.get("resources") or {}).get("requests") or {}
    )
    return {k: parse(v) for k, v in raw.items() if k in RESIZABLE}


def _add(total: dict[str, Fraction], more: dict[str, Fraction]) -> None:
    for k, v in more.items():
        total[k] = total.get(k, Fraction(0)) + v


def pod_requests(pod: Obj, source: str) -> dict[str, Fraction]:
    """cpu and memory a pod takes: the app containers and sidecars summed, or an init
    container with the sidecars started before it, whichever is larger (the kubelet's
    rule). `source` "spec" reads the desired requests, "allocated" what the node granted
    (status allocatedResources; the spec's for a container not yet reported)."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    granted: dict[str, Obj] = {}
    if source == "allocated":
        for key in ("initContainerStatuses", "containerStatuses"):
            for entry in status.get(key) or []:
                if entry.get("allocatedResources") is not None:
                    granted[entry["name"]] = entry["allocatedResources"]
    running: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or []:
        requests = _requests(container, granted.get(container["name"]))
        if is_sidecar(container):
            _add(running, requests)
            continue
        during = dict(running)
        _add(during, requests)
        for k, v in during.items():
            peak[k] = max(peak.get(k, Fraction(0)), v)
    for container in spec.get("containers") or []:
        _add(running, _requests(container, granted.get(container["name"])))
    return {
        k: max(running.get(k, Fraction(0)), peak.get(k, Fraction(0)))
        for k in set(running) | set(peak)
    }


def allocatable(node: Obj) -> dict[str, Fraction]:
    """cpu and memory pods may take from a node (status.allocatable, else capacity)."""
    status = node.get("status") or {}
    raw = status.get("allocatable") or status.get("capacity") or {}
    return {k: parse(v) for k, v in raw.items() if k in RESIZABLE}


def _amount(resource: str, value: Fraction) -> int:
    """The kubelet's units in its messages: millicores and bytes."""
    return int(value * 1000) if resource == "cpu" else int(value)


def resize_verdict(pod: Obj, node: Obj, others: Iterable[Obj]) -> tuple[str, str] | None:
    """None when the pod's desired requests fit `node` next to `others` (the other pods
    on it, at their allocated requests), else (Infeasible|Deferred, the kubelet's message)."""
    capacity = allocatable(node)
    wanted = pod_requests(pod, "spec")
    # canResizePod looks at memory first for the Infeasible message.
    for resource in ("memory", "cpu"):
        need, have = wanted.get(resource, Fraction(0)), capacity.get(resource)
        if have is not None and need > have:
            return (
                "Infeasible",
                f"Node didn't have enough capacity: {resource}, requested: "
                f"{_amount(resource, need)}, capacity: {_amount(resource, have)}",
            )
    used: dict[str, Fraction] = {}
    uid = pod["metadata"]["uid"]
    for other in others:
        if other["metadata"]["uid"] != uid:
            _add(used, pod_requests(other, "allocated"))
    # The admission predicate's order: cpu, then memory.
    for resource in ("cpu", "memory"):
        need, have = wanted.get(resource, Fraction(0)), capacity.get(resource)
        taken = used.get(resource, Fraction(0))
        if have is not None and taken + need > have:
            return (
                "Deferred",
                f"Node didn't have enough resource: {resource}, requested: "
                f"{_amount(resource, need)}, used: {_amount(resource, taken)}, "
                f"capacity: {_amount(resource, have)}",
            )
    return None
