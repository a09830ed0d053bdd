"""What a pod's status says about an in-place resize and about disruption (SPEC §7).

Everything here is read from the pod object, so a restarted reconciler knows exactly
where each pod's change stands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from app.model.kube_types import RESOURCE_FIELDS, PodConditionDict, PodDict, node_name
from app.model.quantities import resource_amounts
from app.model.workloads import parse_time, target_containers, target_statuses

ResizeStage = Literal["none", "inProgress", "deferred", "infeasible", "error"]


@dataclass(frozen=True, slots=True)
class ResizeProgress:
    """Where an accepted resize stands: `none` when the kubelet runs what the spec asks."""

    stage: ResizeStage
    since: datetime | None = None
    message: str = ""


def _condition(pod: PodDict, kind: str) -> PodConditionDict | None:
    conditions: Sequence[PodConditionDict] = (pod.get("status") or {}).get("conditions") or ()
    for condition in conditions:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


#: What a kubelet reports in `containerStatuses[].resources`: the resources it resizes in
#: place. An extended resource (`nvidia.com/gpu`) is not reported, and is not resized.
REPORTED_RESOURCES = frozenset({"cpu", "memory"})


def _reported(values: Mapping[str, Any] | None) -> dict[str, int | None]:
    return {r: v for r, v in resource_amounts(values).items() if r in REPORTED_RESOURCES}


def resources_running(pod: PodDict) -> bool:
    """Every container runs with the CPU and memory its spec asks, as far as the kubelet
    reports them (`containerStatuses[].resources`, compared as amounts, not spellings)."""
    statuses = {s.get("name"): s for s in target_statuses(pod)}
    for name, container in target_containers(pod).items():
        status = statuses.get(name)
        if status is None or "resources" not in status:
            # Not reported (a kubelet without in-place resize, or no status yet): nothing
            # says the spec is not what runs.
            continue
        wanted = container.get("resources") or {}
        have = status.get("resources") or {}
        if wanted == have:  # the kubelet reports what the spec says, spelled alike
            continue
        for fld in RESOURCE_FIELDS:
            if _reported(wanted.get(fld)) != _reported(have.get(fld)):
                return False
    return True


def resize_progress(pod: PodDict) -> ResizeProgress:
    """The stage of the pod's resize from `PodResizePending` (Deferred, Infeasible) and
    `PodResizeInProgress` (Error), else from whether the resources run as asked."""
    pending = _condition(pod, "PodResizePending")
    if pending is not None:
        reason = pending.get("reason")
        stage: ResizeStage = "infeasible" if reason == "Infeasible" else "deferred"
        return ResizeProgress(
            stage, parse_time(pending.get("lastTransitionTime")), pending.get("message") or ""
        )
    progress = _condition(pod, "PodResizeInProgress")
    if progress is not None and progress.get("reason") == "Error":
        return ResizeProgress(
            "error", parse_time(progress.get("lastTransitionTime")), progress.get("message") or ""
        )
    if progress is not None or not resources_running(pod):
        return ResizeProgress("inProgress", parse_time((progress or {}).get("lastTransitionTime")))
    return ResizeProgress("none")


def is_ready(pod: PodDict) -> bool:
    """The pod's Ready condition is True."""
    return _condition(pod, "Ready") is not None


def is_terminating(pod: PodDict) -> bool:
    """The pod is being deleted or has ended."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) or (
        (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    )


def is_running(pod: PodDict) -> bool:
    """Bound to a node, phase Running, not terminating: a pod the running path decides."""
    return (
        bool(node_name(pod))
        and (pod.get("status") or {}).get("phase") == "Running"
        and not is_terminating(pod)
    )
