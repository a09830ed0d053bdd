"""Workloads as the decisions see them: a small typed view of a controller object."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast

from app.model.kube_types import (
    RESOURCE_FIELDS,
    ContainerDict,
    ContainerStatusDict,
    PodDict,
    PodSpecDict,
    PodTemplateDict,
)
from app.model.owners import WorkloadRef
from app.model.quantities import GPU_FRACTION, QuantityError, parse_resource

WORKLOAD_KINDS: frozenset[str] = frozenset(
    {
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "Job",
        "CronJob",
        "Rollout",
        "AnalysisRun",
        "Model",
        "StrimziPodSet",
    }
)

#: Environment variables a JVM reads options (a fixed heap) from.
JAVA_OPTION_VARS = ("JAVA_TOOL_OPTIONS", "JAVA_OPTS", "JDK_JAVA_OPTIONS")

ContainerResources = dict[str, dict[str, str]]  # {"requests": {res: qty}, "limits": {...}}
Resources = dict[str, dict[str, int]]  # {"requests": {res: amount}, "limits": {...}}


def parse_time(value: Any) -> datetime | None:
    """An RFC3339 timestamp from YAML/JSON (YAML may already give a datetime)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def container_resources(container: ContainerDict, *, owned: bool = False) -> ContainerResources:
    """Requests and limits of a container spec as plain string maps; with `owned` (the
    caller gives the spec up), a map whose values are all strings is kept, not copied, and
    so is the resources map that has both and nothing else (a projection's, which the
    view's pods may share: `app.store.slim.share_resources`)."""
    resources = container.get("resources") or {}
    if owned and type(resources) is dict and list(resources) == ["requests", "limits"]:
        requests, limits = resources["requests"], resources["limits"]
        if _string_map(requests, owned) is requests and _string_map(limits, owned) is limits:
            return cast(ContainerResources, resources)
    return {
        "requests": _string_map(resources.get("requests"), owned),
        "limits": _string_map(resources.get("limits"), owned),
    }


def _string_map(values: Mapping[str, Any] | None, owned: bool) -> dict[str, str]:
    if owned and type(values) is dict and all(type(v) is str for v in values.values()):
        return values
    return {k: str(v) for k, v in (values or {}).items()}


def pod_template(obj: Mapping[str, Any]) -> PodTemplateDict:
    """The pod template of a workload object (CronJob: through its jobTemplate)."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    return cast(PodTemplateDict, spec.get("template") or {})


@dataclass(frozen=True, slots=True)
class Workload:
    """A workload kerf may manage."""

    kind: str
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    replicas: int | None = None
    containers: Mapping[str, ContainerResources] = field(default_factory=dict)
    uid: str | None = None
    #: the (kind, namespace, name) identity, built once (it keys every per-workload lookup)
    ref: WorkloadRef = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ref", WorkloadRef(self.kind, self.namespace, self.name))

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], *, owned: bool = False) -> Workload:
        """Build from a Kubernetes object dict (Deployment, StatefulSet, CronJob …).

        `owned`: the caller gives `obj` up (the view, with the projection it just made), so
        its label, annotation and resource maps are kept rather than copied (~0.5 KB a
        workload); nothing may change them afterwards."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        kind = str(obj.get("kind"))
        replicas: int | None
        if kind in ("Deployment", "StatefulSet", "Rollout", "StrimziPodSet"):
            replicas = int(spec.get("replicas", 1))
        elif kind == "Job":
            replicas = int(spec.get("parallelism", 1))
        else:
            replicas = None
        template_spec = pod_template(obj).get("spec") or {}
        containers = {
            name: container_resources(c, owned=owned)
            for name, c in target_containers({"spec": template_spec}).items()
        }
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        return cls(
            kind=kind,
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta["name"]),
            labels=labels if owned else dict(labels),
            annotations=annotations if owned else dict(annotations),
            replicas=replicas,
            containers=containers,
            uid=meta.get("uid"),
        )


def is_sidecar(container: ContainerDict) -> bool:
    """An init container that keeps running beside the app (`restartPolicy: Always`):
    kerf sizes it like an app container, and Kubernetes resizes it in place."""
    return container.get("restartPolicy") == "Always"


def target_statuses(pod: PodDict) -> Iterator[ContainerStatusDict]:
    """The kubelet's statuses of the containers kerf sizes: `containerStatuses`, and the
    sidecars' entries of `initContainerStatuses` (a sidecar reports there)."""
    status = pod.get("status") or {}
    yield from status.get("containerStatuses") or ()
    init = status.get("initContainerStatuses")
    if init:
        sidecars = {
            c.get("name")
            for c in (pod.get("spec") or {}).get("initContainers") or ()
            if is_sidecar(c)
        }
        yield from (s for s in init if s.get("name") in sidecars)


def oom_terminations(pod: PodDict) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(container name, its `terminated` state) for every OOM kill a pod's container
    statuses record, in the current state or the last one."""
    state_key: Literal["lastState", "state"]
    for status in target_statuses(pod):
        for state_key in ("lastState", "state"):
            terminated = (status.get(state_key) or {}).get("terminated") or {}
            if terminated.get("reason") == "OOMKilled":
                yield str(status.get("name")), terminated


def oom_looping(pod: PodDict) -> set[str]:
    """The pod's containers in an OOM loop: last ended by an OOM kill, and waiting in
    CrashLoopBackOff or killed more than once (between back-offs it runs for a moment)."""
    looping = set()
    for status in target_statuses(pod):
        last = ((status.get("lastState") or {}).get("terminated") or {}).get("reason")
        waiting = ((status.get("state") or {}).get("waiting") or {}).get("reason")
        again = int(status.get("restartCount") or 0) >= 2
        if last == "OOMKilled" and (waiting == "CrashLoopBackOff" or again):
            looping.add(str(status.get("name")))
    return looping


def target_containers(pod: PodDict) -> dict[str, ContainerDict]:
    """Containers kerf sizes: the app containers and sidecars (init containers that keep
    running, `restartPolicy: Always`); plain init containers run once and are left alone."""
    spec = pod.get("spec") or {}
    found: dict[str, ContainerDict] = {
        c["name"]: c for c in spec.get("containers") or [] if "name" in c
    }
    for init in spec.get("initContainers") or []:
        if is_sidecar(init) and "name" in init:
            found[init["name"]] = init
    return found


def resources_of(container: ContainerDict | PodSpecDict) -> Resources:
    """Parsed requests and limits of a container spec (or of a pod spec: its pod-level
    resources)."""
    raw = container.get("resources") or {}
    return {
        fld: {r: parse_resource(r, q) for r, q in (raw.get(fld) or {}).items()}
        for fld in RESOURCE_FIELDS
    }


def resources_by_container(containers: Mapping[str, ContainerDict]) -> dict[str, Resources]:
    """Parsed resources of containers by name (e.g. those `target_containers` finds)."""
    return {name: resources_of(spec) for name, spec in containers.items()}


def pod_resources(pod: PodDict, containers: Mapping[str, ContainerDict]) -> dict[str, Resources]:
    """Parsed resources of a pod's `containers` (`target_containers(pod)`). A KAI pod's
    `gpu-fraction` annotation counts as a request of its first container, so a fraction
    is selected, filtered and compared like any other value (app/policy/kai.py); a fraction
    that is not a number is left out, as if absent."""
    found = resources_by_container(containers)
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(GPU_FRACTION)
    if text is not None and found:
        try:
            amount = parse_resource(GPU_FRACTION, str(text))
        except QuantityError:
            return found
        found[next(iter(found))]["requests"][GPU_FRACTION] = amount
    return found
