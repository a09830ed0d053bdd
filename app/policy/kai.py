"""A KAI pod's share of a GPU as admission sets it (docs/gpu.md, "KAI").

KAI reads a pod's GPU share from its `gpu-fraction` annotation, not from a container's
resources. Every decision holds it as a request of the pod's first container
(`app.model.workloads.pod_resources`), so it is selected, filtered by the `gpu` switches,
guarded and compared like any other value; here it leaves the resources for the
annotation, and the strategy says whether the pod's `kai.scheduler/queue` label is set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.model.crd import AutomationStrategySpec
from app.model.quantities import GPU_FRACTION, same_quantity

KAI_QUEUE_LABEL = "kai.scheduler/queue"

ContainerValues = dict[str, dict[str, dict[str, str]]]


@dataclass(frozen=True, slots=True)
class KaiChange:
    """What admission writes for a decision: the container resources left once the
    fraction is taken out, and the pod annotations and labels that carry it."""

    resources: ContainerValues
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def kai_change(
    resources: ContainerValues,
    current: str | None,
    strategy: AutomationStrategySpec | None,
) -> KaiChange:
    """Split a decision's resources (`PodDecision.values`) into what the containers get
    and what the pod gets. `current` is the pod's `gpu-fraction`; `strategy` that of the
    policy whose fraction was selected. A new fraction is the annotation; with it the
    strategy's `kai.queue` becomes the queue label when `kai.setQueueWhenSpecified` is
    true, else the pod's own label (or its absence) stays: a queue the cluster may not
    have would leave the pod unschedulable."""
    fraction: str | None = None
    left: ContainerValues = {}
    for container, values in resources.items():
        requests = values.get("requests") or {}
        if GPU_FRACTION in requests:
            fraction = requests[GPU_FRACTION]
            values = {
                **values,
                "requests": {r: q for r, q in requests.items() if r != GPU_FRACTION},
            }
        left[container] = {f: v for f, v in values.items() if v}
    if fraction is None or (current is not None and same_quantity(GPU_FRACTION, current, fraction)):
        return KaiChange(left)
    labels: dict[str, str] = {}
    if strategy is not None and strategy.kai.set_queue_when_specified:
        labels[KAI_QUEUE_LABEL] = strategy.kai.queue
    return KaiChange(left, {GPU_FRACTION: fraction}, labels)
