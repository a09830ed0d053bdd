"""From Prometheus's answers and the cluster view to each workload's `ContainerUsage`.

Series are keyed by (namespace, pod, container). A pod the view knows maps to its owner
through the view; a pod that is gone (an earlier replica, the history of a rollout) maps by
its generated name (`<deployment>-<hash>-<suffix>`, `<statefulset>-<ordinal>`,
`<daemonset>-<suffix>`), so every replica of the window counts. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.model.kube_types import PodDict, ResourcesDict
from app.model.owners import WorkloadRef
from app.model.quantities import QuantityError, parse_resource
from app.model.workloads import Workload, oom_terminations, parse_time, target_containers
from app.recommend.prometheus_query import Sample, Series, container_key
from app.recommend.rules import ContainerUsage, Point, Refusal, Window
from app.store.view import ClusterView

#: What a generated pod name adds to its workload's name, per workload kind.
_POD_SUFFIX = {
    "Deployment": re.compile(r"-[a-z0-9]{1,10}-[a-z0-9]{5}"),
    "Rollout": re.compile(r"-[a-z0-9]{1,10}-[a-z0-9]{5}"),
    "StatefulSet": re.compile(r"-[0-9]+"),
    "DaemonSet": re.compile(r"-[a-z0-9]{5}"),
    "Job": re.compile(r"-[a-z0-9]{5}"),
}


@dataclass(frozen=True, slots=True)
class Answers:
    """Every query's answer for one run."""

    cpu: Sequence[Series] = ()
    memory: Sequence[Series] = ()
    throttled: Sequence[Sample] = ()
    periods: Sequence[Sample] = ()
    oom: Sequence[Sample] = ()


@dataclass(slots=True)
class _Pooled:
    cpu: list[Point] = field(default_factory=list)
    memory: list[Point] = field(default_factory=list)
    throttled: float | None = None
    periods: float | None = None
    oom_pods: set[str] = field(default_factory=set)
    cpu_pods: set[str] = field(default_factory=set)
    memory_pods: set[str] = field(default_factory=set)


def owner_by_name(namespace: str, pod: str, workloads: Iterable[Workload]) -> WorkloadRef | None:
    """The workload whose generated pod names `pod` fits (the longest name wins, so
    `web-api-…` is web-api's, not web's), or None."""
    best: Workload | None = None
    for workload in workloads:
        suffix = _POD_SUFFIX.get(workload.kind)
        if suffix is None or workload.namespace != namespace:
            continue
        prefix = workload.name
        if (
            pod.startswith(prefix)
            and suffix.fullmatch(pod, len(prefix))
            and (best is None or len(prefix) > len(best.name))
        ):
            best = workload
    return None if best is None else best.ref


class _Mapper:
    """(namespace, pod) → workload, through the view, else by the pod's name."""

    def __init__(self, view: ClusterView) -> None:
        self._known: dict[tuple[str, str], WorkloadRef | None] = {}
        for pod in view.pods():
            meta = pod.get("metadata") or {}
            key = (str(meta.get("namespace") or "default"), str(meta.get("name")))
            self._known[key] = view.owner_of(pod)
        self._by_namespace: dict[str, list[Workload]] = {}
        for workload in view.workloads():
            self._by_namespace.setdefault(workload.namespace, []).append(workload)

    def owner(self, namespace: str, pod: str) -> WorkloadRef | None:
        key = (namespace, pod)
        if key not in self._known:
            self._known[key] = owner_by_name(namespace, pod, self._by_namespace.get(namespace, ()))
        return self._known[key]


def _pool(view: ClusterView, answers: Answers) -> dict[tuple[str, str, str, str], _Pooled]:
    """Points and totals by (kind, namespace, name, container), every replica together."""
    mapper = _Mapper(view)
    pooled: dict[tuple[str, str, str, str], _Pooled] = {}

    def slot(labels: Mapping[str, str]) -> tuple[_Pooled, str] | None:
        key = container_key(labels)
        if key is None:
            return None
        namespace, pod, container = key
        ref = mapper.owner(namespace, pod)
        if ref is None:
            return None
        return pooled.setdefault((*ref.key, container), _Pooled()), pod

    for series in answers.cpu:
        if (found := slot(series.labels)) is not None:
            found[0].cpu.extend(series.points)
            found[0].cpu_pods.add(found[1])
    for series in answers.memory:
        if (found := slot(series.labels)) is not None:
            found[0].memory.extend(series.points)
            found[0].memory_pods.add(found[1])
    for sample in answers.throttled:
        if (found := slot(sample.labels)) is not None:
            found[0].throttled = (found[0].throttled or 0.0) + sample.value
    for sample in answers.periods:
        if (found := slot(sample.labels)) is not None:
            found[0].periods = (found[0].periods or 0.0) + sample.value
    for sample in answers.oom:
        if (found := slot(sample.labels)) is not None and sample.value > 0:
            found[0].oom_pods.add(found[1])
    return pooled


def _amount(resource: str, value: Any) -> int | None:
    if value is None:
        return None
    try:
        return parse_resource(resource, value)
    except QuantityError:
        return None


def _limit_ratios(spec: Mapping[str, Mapping[str, str]]) -> dict[str, float]:
    """limit / request per resource of a template container (a limit alone: 1)."""
    ratios: dict[str, float] = {}
    for resource in ("cpu", "memory"):
        limit = _amount(resource, (spec.get("limits") or {}).get(resource))
        request = _amount(resource, (spec.get("requests") or {}).get(resource)) or limit
        if limit and request:
            ratios[resource] = limit / request
    return ratios


def _pod_container(pod: PodDict, name: str) -> ResourcesDict:
    return (target_containers(pod).get(name) or {}).get("resources") or {}


def _running_since(pod: PodDict) -> float | None:
    """When a running pod was created (the view keeps no start time; creation is earlier,
    which only makes the partial-answer check stricter for pods slow to start)."""
    if (pod.get("status") or {}).get("phase") != "Running":
        return None
    created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    return None if created is None else created.timestamp()


def _missing_replica(
    pods: Sequence[PodDict],
    pool: _Pooled | None,
    container: str,
    settled_before: float,
) -> str | None:
    """A running replica old enough to be scraped whose series are not in the answer."""
    for pod in pods:
        since = _running_since(pod)
        if since is None or since > settled_before:
            continue
        name = str((pod.get("metadata") or {}).get("name"))
        for series, seen in (
            ("CPU", pool.cpu_pods if pool else set()),
            ("memory", pool.memory_pods if pool else set()),
        ):
            if seen and name not in seen:
                return f"container {container}: pod {name} has no {series} series"
    return None


def usage_for(
    view: ClusterView,
    answers: Answers,
    window: Window,
    *,
    settle_s: float,
) -> dict[WorkloadRef, list[ContainerUsage] | Refusal]:
    """Every workload's containers' usage, or the reason the answer does not cover it.

    `settle_s`: a replica running longer than this before the window's end should have
    series; when it has none while its siblings do, the answer is partial, and a partial
    answer gives no row (it could only understate what the workload needs)."""
    pooled = _pool(view, answers)
    result: dict[WorkloadRef, list[ContainerUsage] | Refusal] = {}
    for workload in view.workloads():
        pods = view.pods(workload.ref)
        containers: list[ContainerUsage] = []
        refusal: Refusal | None = None
        for name, spec in sorted(workload.containers.items()):
            pool = pooled.get((*workload.ref.key, name))
            missing = _missing_replica(pods, pool, name, window.end - settle_s)
            if missing is not None:
                refusal = Refusal("PartialAnswer", missing)
                break
            containers.append(_container_usage(name, spec, pods, pool, window))
        result[workload.ref] = refusal if refusal is not None else containers
    return result


def _container_usage(
    name: str,
    spec: Mapping[str, Mapping[str, str]],
    pods: Sequence[PodDict],
    pool: _Pooled | None,
    window: Window,
) -> ContainerUsage:
    cpu_requests = [
        _amount("cpu", (_pod_container(p, name).get("requests") or {}).get("cpu")) for p in pods
    ]
    cpu_requests.append(_amount("cpu", (spec.get("requests") or {}).get("cpu")))
    known = [c for c in cpu_requests if c]
    killed = _oom_in_view(pods, name, window)
    oom = killed is not None or bool(pool and pool.oom_pods)
    killed_limit = killed
    if oom and killed_limit is None:
        limits = [
            _amount("memory", (_pod_container(p, name).get("limits") or {}).get("memory"))
            for p in pods
            if pool is None or not pool.oom_pods or p["metadata"]["name"] in pool.oom_pods
        ]
        limits.append(_amount("memory", (spec.get("limits") or {}).get("memory")))
        found = [amount for amount in limits if amount]
        killed_limit = max(found) if found else None
    return ContainerUsage(
        name=name,
        cpu=tuple(pool.cpu) if pool else (),
        memory=tuple(pool.memory) if pool else (),
        throttled_periods=pool.throttled if pool else None,
        periods=pool.periods if pool else None,
        oom_killed=oom,
        killed_limit_bytes=None if killed_limit is None else float(killed_limit),
        current_cpu_request=max(known) / 1000 if known else None,
        limit_ratios=_limit_ratios(spec),
    )


def _oom_in_view(pods: Sequence[PodDict], container: str, window: Window) -> int | None:
    """The memory limit (bytes, 0 without one) of a replica whose status records an OOM
    kill of `container` inside the window, or None when none does."""
    found: int | None = None
    for pod in pods:
        for name, terminated in oom_terminations(pod):
            finished = parse_time(terminated.get("finishedAt"))
            if name != container or (finished is not None and finished.timestamp() < window.start):
                continue
            limit = _amount("memory", (_pod_container(pod, name).get("limits") or {}).get("memory"))
            found = max(found or 0, limit or 0)
    return found
