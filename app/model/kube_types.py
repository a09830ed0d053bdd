"""Typed views of the parts of Kubernetes objects kerf reads: containers, their statuses.

Objects reach kerf as parsed JSON (the API server, an AdmissionReview) or YAML (a state
dir). These TypedDicts name the fields kerf reads, so code that walks a pod says what it
expects to find. Every field is optional (`total=False`): a state-dir object or a pod not
yet scheduled may lack any of them, so readers keep their `.get(...) or {}` fallbacks.
Nothing here validates an object; the types only describe one.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

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
