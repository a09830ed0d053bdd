"""Node helpers shared by the scheduler and the kubelet."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kubesim import pods, quantity
from kubesim.conditions import get_condition

Obj = dict[str, Any]


def allocatable(node: Obj) -> dict[str, Fraction]:
    """What pods may take from a node (status.allocatable, else status.capacity)."""
    status = node.get("status") or {}
    raw = status.get("allocatable") or status.get("capacity") or {}
    return {k: quantity.parse(v) for k, v in raw.items()}


def is_ready(node: Obj) -> bool:
    """A node is ready unless its Ready condition says otherwise (a node object written
    without status, as tests often do, counts as ready)."""
    cond = get_condition(node.get("status") or {}, "Ready")
    return cond is None or cond.get("status") == "True"


def usage(
    all_pods: list[Obj], node_name: str, source: str, exclude_uid: str = ""
) -> dict[str, Fraction]:
    """Requests of the non-terminal pods bound to `node_name` (see pods.pod_requests)."""
    total: dict[str, Fraction] = {}
    for pod in all_pods:
        if (
            pod["spec"].get("nodeName") != node_name
            or pods.is_terminal(pod)
            or pod["metadata"]["uid"] == exclude_uid
        ):
            continue
        for k, v in pods.pod_requests(pod, source).items():
            total[k] = total.get(k, Fraction(0)) + v
    return total
