"""What the GpuReactivePolicy evaluation reads and writes, without I/O: the policies that
apply to a workload, its pods' GPU allocations, the PromQL of each signal's windows and
their answers, the status it keeps and the annotation the selection reads.

recommender/gpu.py sends the queries and the writes; app/recommend/gpu_reactive.py decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

from app.model.crd import GpuPrometheusMetric, GpuReactivePolicy, GpuStatus, KerfResource
from app.model.durations import parse_duration
from app.model.kube_types import PodDict
from app.model.quantities import GPU_FRACTION
from app.model.workloads import Workload, target_containers
from app.policy.enablement import GPU
from app.policy.sync import policy_annotation, policy_matches, policy_rank
from app.recommend.gpu_reactive import (
    AT_BASELINE,
    KEPT,
    LOWER_REFUSED,
    SCALE_BACK,
    SIGNALS,
    UPSIZE,
    GpuEvaluation,
    PodGpu,
    Previous,
    Signal,
    Usage,
    kai_fraction,
    whole_gpus,
)
from app.recommend.prometheus_query import Sample

GPU_KINDS = ("GpuReactivePolicy", "ClusterGpuReactivePolicy")
Stat = Literal["min", "max"]
#: Reasons of an evaluation that decided what the recommendation is (possibly none); any
#: other (no eligible pod, a missing series, Prometheus unreachable) changes nothing.
DECIDED = frozenset({UPSIZE, SCALE_BACK, KEPT, AT_BASELINE, LOWER_REFUSED})
PROMETHEUS_UNAVAILABLE = "GpuPrometheusUnavailable"
QUERY_REFUSED = "GpuQueryRefused"


def gpu_policies(
    policies: Iterable[KerfResource], workload: Workload, *, multi_policy: bool
) -> list[GpuReactivePolicy]:
    """The GPU reactive policies that publish for a workload, as the sync ranks them: the
    first of each kind, or every one with multi-policy on."""
    chosen: list[GpuReactivePolicy] = []
    for kind in GPU_KINDS:
        matching = sorted(
            (
                p
                for p in policies
                if p.kind == kind
                and isinstance(p, GpuReactivePolicy)
                and policy_matches(p, workload)
            ),
            key=policy_rank,
        )
        chosen.extend(matching if multi_policy else matching[:1])
    return chosen


def policy_label(policy: KerfResource) -> str:
    namespace = policy.metadata.namespace
    return f"{policy.kind} {namespace + '/' if namespace else ''}{policy.metadata.name}"


def is_kai(pod: PodDict) -> bool:
    """A pod KAI shares a GPU with: it carries a `gpu-fraction`."""
    return GPU_FRACTION in ((pod.get("metadata") or {}).get("annotations") or {})


def _number(text: Any) -> float:
    try:
        value = float(str(text))
    except ValueError:
        return 0.0
    return value if value > 0 else 0.0


def pod_gpu(pod: PodDict) -> PodGpu:
    """A pod's GPU allocation per container: its `nvidia.com/gpu` limit (else request), or
    for a KAI pod its `gpu-fraction`, held by its first container."""
    meta = pod.get("metadata") or {}
    started = (pod.get("status") or {}).get("startTime")
    start = datetime.fromisoformat(started) if isinstance(started, str) else None
    containers = target_containers(pod)
    allocation: dict[str, float] = {}
    if is_kai(pod):
        if containers:
            allocation[next(iter(containers))] = _number(meta["annotations"][GPU_FRACTION])
    else:
        for name, container in containers.items():
            resources = container.get("resources") or {}
            value = (resources.get("limits") or {}).get(GPU) or (
                resources.get("requests") or {}
            ).get(GPU)
            if value is not None:
                allocation[name] = _number(value)
    return PodGpu(str(meta.get("name")), start, allocation)


def usage_query(
    stat: Stat, metric: GpuPrometheusMetric, namespace: str, pods: Iterable[str], window: str
) -> str:
    """The PromQL of one signal's lowest or highest samples over a window, for the pods of
    one workload (pod names are DNS names: nothing in them needs escaping in a regex)."""
    names = "|".join(sorted(pods))
    seconds = int(parse_duration(window).total_seconds())
    selector = f'{metric.namespace_label}="{namespace}",{metric.pod_label}=~"{names}"'
    return f"{stat}_over_time({metric.metric}{{{selector}}}[{seconds}s])"


def parse_usage(
    metric: GpuPrometheusMetric, low: list[Sample], high: list[Sample]
) -> tuple[dict[tuple[str, str], Usage], int]:
    """Each container's usage from the two answers, and how many series lacked the pod or
    container label (a label mapping that does not fit the series)."""
    lows: dict[tuple[str, str], float] = {}
    highs: dict[tuple[str, str], float] = {}
    unlabelled = 0
    for answer, into in ((low, lows), (high, highs)):
        for sample in answer:
            pod = sample.labels.get(metric.pod_label)
            container = sample.labels.get(metric.container_label)
            if not pod or not container:
                unlabelled += 1
                continue
            key = (pod, container)
            # Several series of one container (one per GPU, say) add up.
            into[key] = into.get(key, 0.0) + sample.value
    usage = {k: Usage(lows.get(k, highs[k]), highs[k]) for k in highs}
    return usage, unlabelled


def _units(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def previous_of(status: GpuStatus | None, label: str) -> Previous | None:
    """The recommendation in force under this policy, as the status keeps it."""
    if status is None or status.policy != label or status.total is None or not status.containers:
        return None
    driver: Signal | None = next((s for s in SIGNALS if s == status.driving_metric), None)
    return Previous(
        _number(status.total), driver, {c: _number(v) for c, v in status.containers.items()}
    )


def baseline_of(status: GpuStatus | None) -> dict[str, float] | None:
    """The baseline the status keeps (any policy's: it is the workload's own allocation)."""
    if status is None or not status.baseline:
        return None
    return {c: _number(v) for c, v in status.baseline.items()}


def gpu_values(
    evaluation: GpuEvaluation, policy: GpuReactivePolicy, *, kai: bool
) -> dict[str, str]:
    """What the recommendation sets per container: a KAI `gpu-fraction`, or a whole
    `nvidia.com/gpu` count, rounded up but, on an upsize, not past the cap."""
    if kai:
        return {c: kai_fraction(v) for c, v in evaluation.containers.items()}
    max_percent: float | None = None
    if evaluation.reason == UPSIZE and evaluation.driver is not None:
        max_percent = getattr(policy.spec.metrics, evaluation.driver).upsize.max_percent
    out: dict[str, str] = {}
    for container, value in evaluation.containers.items():
        base = evaluation.baseline.get(container)
        cap = base * max_percent / 100 if base is not None and max_percent is not None else None
        out[container] = str(whole_gpus(value, cap))
    return out


def status_of(
    label: str,
    evaluation: GpuEvaluation,
    values: Mapping[str, str],
    now: datetime,
    old: GpuStatus | None = None,
) -> dict[str, Any]:
    """The `gpu` block of the workload's RightsizingRecommendation status. An evaluation
    that decided nothing keeps the recommendation in force (`old`) and says why."""
    if evaluation.reason not in DECIDED and old is not None and old.policy == label:
        kept = old.model_copy(
            update={"reason": evaluation.reason, "message": evaluation.message, "evaluated_at": now}
        )
        return kept.model_dump(mode="json", by_alias=True, exclude_none=True)
    status = GpuStatus(
        policy=label,
        reason=evaluation.reason,
        message=evaluation.message,
        evaluated_at=now,
        baseline={c: _units(v) for c, v in evaluation.baseline.items()},
        containers={c: _units(v) for c, v in evaluation.containers.items()},
        total=None if evaluation.total is None else _units(evaluation.total),
        driving_metric=evaluation.driver,
        direction=evaluation.direction,
        values=dict(values),
        candidates=[
            {
                "signal": c.signal,
                "direction": c.direction,
                "total": _units(c.total),
                "pod": c.pod,
            }
            for c in evaluation.candidates
        ],
    )
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def same_status(old: GpuStatus | None, new: Mapping[str, Any]) -> bool:
    """Whether a status write would change more than the evaluation time."""
    if old is None:
        return False
    before = old.model_dump(mode="json", by_alias=True, exclude_none=True)
    before.pop("evaluatedAt", None)
    after = dict(new)
    after.pop("evaluatedAt", None)
    return before == after


def annotation_patch(
    workload: Workload,
    policy: GpuReactivePolicy,
    values: Mapping[str, str],
    *,
    multi_policy: bool,
    kai: bool = False,
    remove: bool = False,
) -> dict[str, str | None]:
    """The workload annotations that carry the recommendation to the selection: the
    `nvidia.com/gpu` request and, as Kubernetes requires an extended resource's limit to
    equal its request, the limit; both under the key the sync reads for the policy. A KAI
    workload's is a `gpu-fraction` request alone (a pod annotation has no limit). Only
    keys whose text changes are in the patch."""
    patch: dict[str, str | None] = {}
    resource = GPU_FRACTION if kai else GPU
    containers = {c: {resource: v} for c, v in sorted(values.items())}
    for fld in ("requests", "limits"):
        key, encoded = policy_annotation(policy, fld, containers, multi_policy)
        text = None if remove or not containers or (kai and fld == "limits") else encoded
        if workload.annotations.get(key) != text:
            patch[key] = text
    return patch


def gpu_summaries(records: Iterable[tuple[str, str, str, GpuStatus]]) -> list[dict[str, Any]]:
    """The last GPU reactive evaluation of each workload ((kind, namespace, name, the
    record's `status.gpu`)), for `kerf explain`: its rows, the driving metric and why."""
    return [
        {
            "kind": kind,
            "namespace": namespace,
            "name": name,
            "policy": status.policy,
            "reason": status.reason,
            "message": status.message,
            "drivingMetric": status.driving_metric,
            "direction": status.direction,
            "values": dict(status.values),
            "baseline": dict(status.baseline),
        }
        for kind, namespace, name, status in sorted(records, key=lambda r: r[:3])
    ]
