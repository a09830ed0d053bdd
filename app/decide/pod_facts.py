"""Facts read from one pod, its workload and namespace: pauses, protection, skipped
containers, OOM kills, a fixed JVM heap, HPA coupling, the Guaranteed QoS class."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from app.model.annotations import PAUSE_REASON, PAUSE_UNTIL, SKIP_CONTAINERS
from app.model.horizon import Horizon
from app.model.kube_types import ContainerDict, HPADict, PodDict, VPAContainerPolicyDict, VPADict
from app.model.owners import WorkloadRef
from app.model.workloads import (
    JAVA_OPTION_VARS,
    Resources,
    Workload,
    oom_terminations,
    parse_time,
    pod_resources,
    target_containers,
)
from app.policy.plans import protected_by_pattern
from app.store.view import ClusterView

_HEAP_RE = re.compile(r"(?:-Xmx|-XX:MaxHeapSize=)(\d+)([kKmMgGtT]?)\b")

_HEAP_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


#: (containers kerf sizes by name, their parsed resources, the owner) of a pod
PodFacts = tuple[dict[str, ContainerDict], dict[str, Resources], WorkloadRef | None]


def read_pod_facts(view: ClusterView, pod: PodDict) -> PodFacts:
    """The containers kerf sizes, their parsed resources and the owner of a pod, in one
    lookup: kept per pod object of the view (shared: callers copy before they change
    anything), worked out afresh for a pod the view does not hold."""
    containers, resources = pod_containers(view, pod)
    return containers, resources, view.owner_of(pod)


def pod_containers(
    view: ClusterView, pod: PodDict
) -> tuple[dict[str, ContainerDict], dict[str, Resources]]:
    """The containers kerf sizes and their parsed resources (`read_pod_facts` without the
    owner, for a caller that has resolved it), kept by the view's decision caches for the
    pod objects the view holds."""
    meta = pod.get("metadata") or {}
    key = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
    if view.get("Pod", *key) is not pod:
        containers = target_containers(pod)
        return containers, pod_resources(pod, containers)
    parsed: tuple[dict[str, ContainerDict], dict[str, Resources]] | None
    parsed = view.caches.parsed(key)
    if parsed is None:
        containers = target_containers(pod)
        parsed = (containers, pod_resources(pod, containers))
        view.caches.keep_parsed(key, parsed)
    return parsed


def skipped_containers(pod: PodDict, workload: Workload) -> set[str]:
    """`skip-containers`: the pod's value wins (an empty value skips none)."""
    pod_annotations = (pod.get("metadata") or {}).get("annotations") or {}
    value = pod_annotations.get(SKIP_CONTAINERS)
    if value is None:
        value = workload.annotations.get(SKIP_CONTAINERS, "")
    return {name.strip() for name in value.split(",") if name.strip()}


def as_horizon(now: datetime | Horizon) -> Horizon:
    return now if isinstance(now, Horizon) else Horizon(now)


def is_paused(annotations: Mapping[str, str] | None, now: datetime | Horizon) -> bool:
    """`pause-until` is `infinite` or a time still ahead (an unreadable value pauses).
    Given a `Horizon`, the comparison with the clock narrows it."""
    value = (annotations or {}).get(PAUSE_UNTIL)
    if value is None:
        return False
    if value.strip() == "infinite":
        return True
    try:
        until = parse_time(value.strip())
    except ValueError:
        return True  # a typo must not silently resume automation
    return until is not None and as_horizon(now).before(until)


def jvm_heap_bytes(container: ContainerDict) -> int | None:
    """A fixed JVM heap (-Xmx / -XX:MaxHeapSize) from command, args or JAVA_* env;
    the last occurrence wins, as in the JVM."""
    texts: list[str] = [*(container.get("command") or []), *(container.get("args") or [])]
    for env in container.get("env") or []:
        if env.get("name") in JAVA_OPTION_VARS and isinstance(env.get("value"), str):
            texts.append(env["value"])
    heap: int | None = None
    for text in texts:
        for number, unit in _HEAP_RE.findall(str(text)):
            heap = int(number) * _HEAP_UNITS[unit.lower()]
    return heap


def oom_killed_since(pods: Iterable[PodDict], container: str, since: datetime | None) -> bool:
    """Whether a container was OOM-killed (in any of the pods) after `since`."""
    for pod in pods:
        for name, terminated in oom_terminations(pod):
            if name != container:
                continue
            finished = parse_time(terminated.get("finishedAt"))
            if since is None or finished is None or finished > since:
                return True
    return False


def hpa_coupled_resources(hpas: Iterable[HPADict]) -> set[str]:
    """Resources an HPA scales on by Utilization (cpu or memory)."""
    coupled: set[str] = set()
    for hpa in hpas:
        spec = hpa.get("spec") or {}
        for metric in spec.get("metrics") or []:
            resource = metric.get("resource") or metric.get("containerResource") or {}
            target = resource.get("target") or {}
            if target.get("type") == "Utilization" and resource.get("name") in ("cpu", "memory"):
                coupled.add(resource["name"])
        legacy = spec.get("targetCPUUtilizationPercentage")
        if legacy is not None:
            coupled.add("cpu")
    return coupled


def _container_policy(vpa: VPADict, container: str) -> VPAContainerPolicyDict | None:
    """The VPA's policy for a container: the one naming it, else the `*` one (as the VPA
    itself chooses)."""
    policies = ((vpa.get("spec") or {}).get("resourcePolicy") or {}).get("containerPolicies")
    found = None
    for policy in policies or []:
        name = policy.get("containerName")
        if name == container:
            return policy
        if name == "*":
            found = policy
    return found


def _fields(policy: VPAContainerPolicyDict | None) -> tuple[str, ...]:
    """The fields the VPA sets: requests, and limits too unless `RequestsOnly`."""
    if policy is not None and policy.get("controlledValues") == "RequestsOnly":
        return ("requests",)
    return ("requests", "limits")


def _recommends(vpa: VPADict) -> bool:
    conditions = (vpa.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "RecommendationProvided" and c.get("status") == "True" for c in conditions
    )


def vpa_held_targets(
    vpas: Iterable[VPADict], containers: Iterable[str], *, declared: bool
) -> dict[tuple[str, str, str], str]:
    """The (container, field, resource) values VerticalPodAutoscalers hold, each with the
    name of the first VPA that holds it (Kubex's `enableVpaFilter`, and with `declared`
    its `blockResizeOnVpaControlledResources`).

    A VPA holds a value it is actively managing: its updateMode is not Off (a VPA that
    sets none is in Auto, its default), its RecommendationProvided condition is True and
    its recommendation for the container names the resource. With `declared`, it also holds every resource a container policy
    lists in controlledResources, whatever the mode or the recommendation. Either way the
    fields are those of the container policy's controlledValues (requests and limits by
    default, requests only with `RequestsOnly`); a container whose policy's mode is Off is
    left to kerf by the first rule (the VPA recommends nothing for it).
    """
    names = list(containers)
    held: dict[tuple[str, str, str], str] = {}
    for vpa in vpas:
        name = str((vpa.get("metadata") or {}).get("name") or "")
        spec = vpa.get("spec") or {}
        mode = (spec.get("updatePolicy") or {}).get("updateMode") or "Auto"
        recommended: dict[str, set[str]] = {}
        if mode != "Off" and _recommends(vpa):
            recommendation = (vpa.get("status") or {}).get("recommendation") or {}
            for rec in recommendation.get("containerRecommendations") or []:
                target = rec.get("target") or {}
                recommended.setdefault(str(rec.get("containerName")), set()).update(
                    r for r in target if r in ("cpu", "memory")
                )
        for container in names:
            policy = _container_policy(vpa, container)
            resources = set()
            if policy is None or policy.get("mode") != "Off":
                resources |= recommended.get(container, set())
            if declared and policy is not None:
                listed = policy.get("controlledResources") or []
                resources |= {r for r in listed if r in ("cpu", "memory")}
            for resource in resources:
                for field in _fields(policy):
                    held.setdefault((container, field, resource), name)
    return held


def workload_for(view: ClusterView, pod: PodDict, owner: WorkloadRef | None) -> Workload | None:
    """The pod's workload; one not (yet) in the view is stood in for by the pod's labels,
    so a pod created right after its Deployment is still sized."""
    if owner is None:
        return None
    meta = pod.get("metadata") or {}
    return view.workload(owner) or Workload(
        kind=owner.kind,
        namespace=owner.namespace,
        name=owner.name,
        labels=dict(meta.get("labels") or {}),
    )


def is_guaranteed(resources: Resources) -> bool:
    """A container's part of the Guaranteed QoS class: CPU and memory requests set and
    equal to their limits (the API server has already defaulted requests from limits)."""
    requests, limits = resources["requests"], resources["limits"]
    cpu = requests.get("cpu")
    if cpu is None or cpu != limits.get("cpu"):
        return False
    memory = requests.get("memory")
    return memory is not None and memory == limits.get("memory")


@dataclass(frozen=True, slots=True)
class Pause:
    """A `pause-until` in force: where it is ("pod", "workload" or "namespace") and the
    `pause-reason` written beside it ("" without one), which Kubex users put there for
    whoever reads the block."""

    source: str
    reason: str


def paused_by(
    view: ClusterView, pod: PodDict, workload: Workload, now: datetime | Horizon
) -> Pause | None:
    """The pause that holds the pod, the pod's own first, or None."""
    clock = as_horizon(now)
    pod_annotations = (pod.get("metadata") or {}).get("annotations")
    if is_paused(pod_annotations, clock):
        return _pause("pod", pod_annotations)
    if is_paused(workload.annotations, clock):
        return _pause("workload", workload.annotations)
    namespace_obj = view.get("Namespace", "", workload.namespace) or {}
    namespace_annotations = (namespace_obj.get("metadata") or {}).get("annotations")
    if is_paused(namespace_annotations, clock):
        return _pause("namespace", namespace_annotations)
    return None


def _pause(source: str, annotations: Mapping[str, str] | None) -> Pause:
    return Pause(source, (annotations or {}).get(PAUSE_REASON, "").strip())


def is_protected(workload: Workload, view: ClusterView) -> bool:
    """Whether a workload's namespace is kerf's own or named by
    GlobalConfiguration.protectedNamespacePatterns."""
    return workload.namespace == view.own_namespace or protected_by_pattern(view, workload)
