"""What one admission request may carry into a decision.

A decision runs on the event loop, so its cost is paid by every request waiting behind
it: one pod with a thousand 4,000-digit quantities once held the loop for 0.8 s. Before
deciding, the pod is checked against the bounds below; a pod over any of them is admitted
unchanged with a warning that names the bound (fail open, cause `OverLimit`).

Every bound is far above what the API server sends for a pod it would accept: mutating
webhooks see the object as the API server serialized it, so quantities are in canonical
form (at most a couple of dozen characters); names over the Kubernetes limits, or
annotations over 256 KiB, would fail the API server's own validation after admission
anyway. The container, quantity and argument counts have no Kubernetes limit; they are
set an order of magnitude above real pods, and together they keep the worst bounded pod
at a few milliseconds of decision time (see docs/webhook.md, "Request limits").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RequestBounds:
    """The largest pod a decision accepts."""

    #: containers + initContainers
    containers: int = 64
    #: requests and limits entries over all containers
    quantities: int = 256
    #: characters of one quantity text (canonical Kubernetes quantities are ≤ ~25)
    quantity_chars: int = 64
    #: args over all containers
    args: int = 1024
    #: ownerReferences entries
    owner_references: int = 32
    #: characters of a container name (a DNS label: Kubernetes allows 63)
    container_name_chars: int = 63
    #: characters of all annotations, keys and values (the API server's limit is 256 KiB)
    annotation_bytes: int = 256 * 1024


DEFAULT_BOUNDS = RequestBounds()


def over_bounds(pod: Mapping[str, Any], bounds: RequestBounds = DEFAULT_BOUNDS) -> str | None:
    """Which bound `pod` exceeds, as a message for the warning and the log; None within.

    `pod` has passed `webhook.review.pod_shape_problem` (containers are named dicts). The
    message names the field and the bound, never a value from the request. The pod is
    parsed JSON, so its objects are tested with `isinstance(x, dict)`: the `Mapping` ABC
    check costs several times more and this runs on every admission.
    """
    spec = pod.get("spec") or {}
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    if len(containers) > bounds.containers:
        return f"the pod has more than {bounds.containers} containers"
    quantities = 0
    args = 0
    for container in containers:
        if len(container["name"]) > bounds.container_name_chars:
            return f"a container name is longer than {bounds.container_name_chars} characters"
        problem, count = _quantities(container.get("resources"), bounds)
        if problem is not None:
            return problem
        quantities += count
        container_args = container.get("args")
        args += len(container_args) if isinstance(container_args, list) else 0
    if quantities > bounds.quantities:
        return f"the pod has more than {bounds.quantities} resource quantities"
    if args > bounds.args:
        return f"the pod has more than {bounds.args} container args"
    metadata = pod.get("metadata") or {}
    owners = metadata.get("ownerReferences")
    if isinstance(owners, list) and len(owners) > bounds.owner_references:
        return f"the pod has more than {bounds.owner_references} ownerReferences"
    return _annotations(metadata.get("annotations"), bounds)


def _annotations(annotations: Any, bounds: RequestBounds) -> str | None:
    if not isinstance(annotations, dict):
        return None
    size = 0
    for key, value in annotations.items():
        if not isinstance(value, str):
            return "an annotation value is not a string"
        size += len(key) + len(value)
        if size > bounds.annotation_bytes:
            return f"the pod's annotations exceed {bounds.annotation_bytes} characters"
    return None


def _quantities(resources: Any, bounds: RequestBounds) -> tuple[str | None, int]:
    """(a problem, the number of quantities) of one container's `resources`."""
    if not isinstance(resources, dict):
        return None, 0
    count = 0
    for field in ("requests", "limits"):
        values = resources.get(field)
        if not isinstance(values, dict):
            continue
        count += len(values)
        if count > bounds.quantities:
            return f"the pod has more than {bounds.quantities} resource quantities", count
        for value in values.values():
            if isinstance(value, str) and len(value) > bounds.quantity_chars:
                return f"a resource quantity is longer than {bounds.quantity_chars} characters", 0
    return None, count
