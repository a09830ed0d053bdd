"""Which workload owns a pod? (pod → ReplicaSet → Deployment/Rollout, pod → Job → CronJob)

Works on plain Kubernetes object dicts, as parsed from YAML or API JSON. Intermediate
owners (ReplicaSets, Jobs) come from an :class:`OwnerLookup`; when a ReplicaSet is not
known (not yet in the cache, or a state dir without it) the Deployment name is recovered
from the ReplicaSet name, which Kubernetes always builds as ``<deployment>-<pod-template-hash>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.model.kube_types import OwnerReferenceDict, PodDict

__all__ = ["OwnerLookup", "WorkloadRef", "controller_ref", "resolve_owner"]

_REPLICASET_OWNERS = frozenset({"Deployment", "Rollout"})


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """A workload's identity: its kind, namespace and name."""

    kind: str
    namespace: str
    name: str

    @property
    def key(self) -> tuple[str, str, str]:
        """``(kind, namespace, name)``, for dict keys and sorting."""
        return (self.kind, self.namespace, self.name)


class OwnerLookup(Protocol):
    """Finds an intermediate owner object (a ReplicaSet or a Job) by kind and name."""

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The object dict, or ``None`` when it is not known."""
        ...


def controller_ref(obj: Mapping[str, Any]) -> OwnerReferenceDict | None:
    """The ownerReference with ``controller: true``, else the first one, else ``None``."""
    refs: Sequence[OwnerReferenceDict] = (obj.get("metadata") or {}).get("ownerReferences") or ()
    for ref in refs:
        if ref.get("controller") is True:
            return ref
    return refs[0] if refs else None


def _owner_from_replicaset_name(
    replicaset: str, namespace: str, labels: Mapping[str, str]
) -> WorkloadRef:
    """Name the Deployment (or Rollout) of a ReplicaSet that is not known.

    ReplicaSet names are ``<owner>-<hash>`` with the hash also on the pod's label, so the
    label gives the exact suffix; without it the last ``-segment`` is the best guess.
    """
    kind, label = "Deployment", "pod-template-hash"
    if "rollouts-pod-template-hash" in labels:
        # Argo Rollouts labels its pods with its own hash label.
        kind, label = "Rollout", "rollouts-pod-template-hash"
    pod_hash = labels.get(label)
    if pod_hash and replicaset.endswith(f"-{pod_hash}") and len(replicaset) > len(pod_hash) + 1:
        return WorkloadRef(kind, namespace, replicaset[: -len(pod_hash) - 1])
    base, dash, _ = replicaset.rpartition("-")
    if dash and base:
        return WorkloadRef(kind, namespace, base)
    # Not a generated name at all: the best identity left is the ReplicaSet itself.
    return WorkloadRef("ReplicaSet", namespace, replicaset)


def resolve_owner(pod: PodDict, lookup: OwnerLookup) -> WorkloadRef | None:
    """The workload that owns ``pod``, or ``None`` for a bare pod.

    - ReplicaSet → its Deployment or Rollout owner; a ReplicaSet with neither is the
      workload itself; an unknown ReplicaSet is named from the pod's hash label.
    - Job → its CronJob owner when the Job is known and has one, else the Job.
    - Any other controller (StatefulSet, DaemonSet, Model, StrimziPodSet, AnalysisRun …)
      is the workload directly.

    The namespace is always the pod's: owner references never cross namespaces.
    """
    metadata = pod.get("metadata") or {}
    ref = controller_ref(pod)
    if ref is None:
        return None
    namespace = metadata.get("namespace") or "default"
    kind = ref.get("kind", "")
    name = ref.get("name", "")
    if kind == "ReplicaSet":
        replicaset = lookup.get("ReplicaSet", namespace, name)
        if replicaset is None:
            return _owner_from_replicaset_name(name, namespace, metadata.get("labels") or {})
        owner = controller_ref(replicaset)
        if owner is not None and owner.get("kind") in _REPLICASET_OWNERS:
            return WorkloadRef(owner["kind"], namespace, owner.get("name", ""))
        return WorkloadRef("ReplicaSet", namespace, name)
    if kind == "Job":
        job = lookup.get("Job", namespace, name)
        owner = controller_ref(job) if job is not None else None
        if owner is not None and owner.get("kind") == "CronJob":
            return WorkloadRef("CronJob", namespace, owner.get("name", ""))
        return WorkloadRef("Job", namespace, name)
    return WorkloadRef(kind, namespace, name)
