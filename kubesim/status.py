"""What a write of the `status` subresource keeps, per kind, as kube-apiserver 1.35's
status strategies decide (`PrepareForUpdate` of each `*StatusStrategy`, then the generic
`rest.BeforeUpdate`)."""

from __future__ import annotations

from kubesim.resources import ResourceType
from kubesim.store import Obj, clone

# Identity and lifecycle fields no update may change (`rest.BeforeUpdate`).
_KEPT_METADATA = (
    "uid",
    "creationTimestamp",
    "namespace",
    "name",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


def status_write(rt: ResourceType, old: Obj, written: Obj) -> Obj:
    """The object a status write of `written` over `old` stores.

    A custom resource keeps everything of `old` but its status, metadata included. A
    built-in kind keeps its spec and identity and takes the rest of the metadata
    (labels, annotations, finalizers, ownerReferences) from the write, except that
    `pods/status` may not touch ownerReferences (old kubelets corrupted them) and
    `deployments/status` may not touch labels.
    """
    if rt.is_custom:
        new = clone(old)
    else:
        new = clone(written)
        new.pop("spec", None)
        if "spec" in old:
            new["spec"] = clone(old["spec"])
        meta = new.setdefault("metadata", {})
        kept = list(_KEPT_METADATA)
        if rt.key == ("", "pods"):
            kept.append("ownerReferences")
        elif rt.key == ("apps", "deployments"):
            kept.append("labels")
        for key in kept:
            if key in old["metadata"]:
                meta[key] = clone(old["metadata"][key])
            else:
                meta.pop(key, None)
    if "status" in written:
        new["status"] = clone(written["status"])
    else:
        new.pop("status", None)
    if rt.key == ("", "pods"):
        _keep_pod_status_fields(old, new)
    return new


def _keep_pod_status_fields(old: Obj, new: Obj) -> None:
    """The QoS class is immutable and an observedGeneration may not be cleared: a write
    without them keeps the old values."""
    before = old.get("status") or {}
    status = new.setdefault("status", {})
    for key in ("qosClass", "observedGeneration"):
        if not status.get(key) and before.get(key):
            status[key] = before[key]
