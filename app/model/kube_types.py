"""Typed views of the parts of Kubernetes objects kerf reads: pods, their containers and
statuses, workloads, autoscalers, nodes, namespaces and their bounds.

Objects reach kerf as parsed JSON (the API server, an AdmissionReview) or YAML (a state
dir). These TypedDicts name the fields kerf reads, so code that walks a pod says what it
expects to find. Every field is optional (`total=False`): a state-dir object or a pod not
yet scheduled may lack any of them, so readers keep their `.get(...) or {}` fallbacks.
Nothing here validates an object; the types only describe one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict, cast

#: resource name → quantity: a string from the API server, a number too from YAML
ResourceList = dict[str, Any]
ResourceField = Literal["requests", "limits"]
#: the maps of a ResourcesDict, in the order kerf reports them
RESOURCE_FIELDS: tuple[ResourceField, ...] = ("requests", "limits")


class ResourcesDict(TypedDict, total=False):
    """A container's `resources` (spec) or the kubelet's report of them (status)."""

    requests: ResourceList
    limits: ResourceList


class ContainerDict(TypedDict, total=False):
    """An entry of `spec.containers` or `spec.initContainers`."""

    name: str
    image: str
    resources: ResourcesDict
    #: `Always` on an init container makes it a sidecar
    restartPolicy: str
    env: list[dict[str, Any]]
    command: list[str]
    args: list[str]
    #: per resource, whether a resize restarts the container
    resizePolicy: list[dict[str, Any]]


class ContainerStatusDict(TypedDict, total=False):
    """An entry of `status.containerStatuses` or `status.initContainerStatuses`."""

    name: str
    #: what the container runs with, once the kubelet reports it (in-place resize)
    resources: ResourcesDict
    restartCount: int
    state: dict[str, Any]
    lastState: dict[str, Any]


class PodConditionDict(TypedDict, total=False):
    """An entry of `status.conditions`."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str


class OwnerReferenceDict(TypedDict, total=False):
    """An entry of `metadata.ownerReferences`."""

    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool


class ObjectMetaDict(TypedDict, total=False):
    """An object's `metadata`."""

    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReferenceDict]
    creationTimestamp: str
    deletionTimestamp: str


class PodSpecDict(TypedDict, total=False):
    """A pod's (or a pod template's) `spec`, as far as kerf reads it."""

    nodeName: str
    schedulerName: str
    activeDeadlineSeconds: int
    priorityClassName: str
    runtimeClassName: str
    restartPolicy: str
    containers: list[ContainerDict]
    initContainers: list[ContainerDict]
    #: pod-level resources (the PodLevelResources feature)
    resources: ResourcesDict
    #: what the RuntimeClass adds to the pod's requests
    overhead: ResourceList
    affinity: dict[str, Any]
    nodeSelector: dict[str, str]
    tolerations: list[dict[str, Any]]


class PodStatusDict(TypedDict, total=False):
    """A pod's `status`."""

    phase: str
    reason: str
    qosClass: str
    #: the in-place resize state (before the PodResize* conditions)
    resize: str
    startTime: str
    conditions: list[PodConditionDict]
    containerStatuses: list[ContainerStatusDict]
    initContainerStatuses: list[ContainerStatusDict]


class PodDict(TypedDict, total=False):
    """A Pod."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaDict
    spec: PodSpecDict
    status: PodStatusDict


class PodTemplateDict(TypedDict, total=False):
    """A workload's `spec.template`."""

    metadata: ObjectMetaDict
    spec: PodSpecDict


class WorkloadSpecDict(TypedDict, total=False):
    """The `spec` of a workload kind (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
    CronJob, Argo Rollout) as far as kerf reads it."""

    replicas: int
    parallelism: int
    selector: dict[str, Any]
    template: PodTemplateDict
    #: a CronJob's Job template (its `spec.template` is the pod's)
    jobTemplate: dict[str, Any]


class WorkloadDict(TypedDict, total=False):
    """A workload object: Deployment-like, with a pod template."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaDict
    spec: WorkloadSpecDict
    status: dict[str, Any]


class TargetRefDict(TypedDict, total=False):
    """An autoscaler's reference to the workload it acts on."""

    apiVersion: str
    kind: str
    name: str


class HPASpecDict(TypedDict, total=False):
    """A HorizontalPodAutoscaler's `spec` (autoscaling/v2, and v1's CPU target)."""

    scaleTargetRef: TargetRefDict
    minReplicas: int
    maxReplicas: int
    metrics: list[dict[str, Any]]
    targetCPUUtilizationPercentage: int


class HPADict(TypedDict, total=False):
    """A HorizontalPodAutoscaler."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaDict
    spec: HPASpecDict
    status: dict[str, Any]


class VPAContainerPolicyDict(TypedDict, total=False):
    """An entry of a VerticalPodAutoscaler's `spec.resourcePolicy.containerPolicies`."""

    #: a container's name, or `*` for every container no other entry names
    containerName: str
    mode: str
    controlledResources: list[str]
    #: `RequestsAndLimits` (the default) or `RequestsOnly`
    controlledValues: str
    minAllowed: ResourceList
    maxAllowed: ResourceList


class VPAResourcePolicyDict(TypedDict, total=False):
    containerPolicies: list[VPAContainerPolicyDict]


class VPASpecDict(TypedDict, total=False):
    """A VerticalPodAutoscaler's `spec`."""

    targetRef: TargetRefDict
    updatePolicy: dict[str, Any]
    resourcePolicy: VPAResourcePolicyDict


class VPAStatusDict(TypedDict, total=False):
    """A VerticalPodAutoscaler's `status`."""

    recommendation: dict[str, Any]
    conditions: list[dict[str, Any]]


class VPADict(TypedDict, total=False):
    """A VerticalPodAutoscaler (autoscaling.k8s.io/v1)."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaDict
    spec: VPASpecDict
    status: VPAStatusDict


class NodeStatusDict(TypedDict, total=False):
    """A Node's `status`."""

    allocatable: ResourceList
    capacity: ResourceList


class NodeDict(TypedDict, total=False):
    """A Node."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaDict
    status: NodeStatusDict


class NamespaceDict(TypedDict, total=False):
    """A Namespace: its labels and annotations are what kerf reads."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaDict


class LimitRangeItemDict(TypedDict, total=False):
    """An entry of a LimitRange's `spec.limits`."""

    type: str
    min: ResourceList
    max: ResourceList
    default: ResourceList
    defaultRequest: ResourceList
    maxLimitRequestRatio: ResourceList


class LimitRangeSpecDict(TypedDict, total=False):
    limits: list[LimitRangeItemDict]


class LimitRangeDict(TypedDict, total=False):
    """A LimitRange."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaDict
    spec: LimitRangeSpecDict


class ResourceQuotaSpecDict(TypedDict, total=False):
    hard: ResourceList
    scopes: list[str]
    scopeSelector: dict[str, Any]


class ResourceQuotaStatusDict(TypedDict, total=False):
    hard: ResourceList
    used: ResourceList


class ResourceQuotaDict(TypedDict, total=False):
    """A ResourceQuota."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaDict
    spec: ResourceQuotaSpecDict
    status: ResourceQuotaStatusDict


class ObjectDict(TypedDict, total=False):
    """Any other object kerf keeps (a ReplicaSet, a Job, a CRD …): its spec and status
    are read by the code that knows the kind."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaDict
    spec: dict[str, Any]
    status: dict[str, Any]


def node_name(pod: PodDict) -> str:
    """The node a pod is bound to ("" before the scheduler binds it)."""
    return (pod.get("spec") or {}).get("nodeName") or ""


def as_pod(obj: Mapping[str, Any]) -> PodDict:
    """A pod as parsed JSON or YAML, typed: the edge where a pod enters the decisions
    (an AdmissionReview, a watch event, a state dir). Nothing is checked."""
    return cast(PodDict, obj)
