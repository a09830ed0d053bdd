"""What kerf keeps of each Kubernetes object: one projection per kind.

The cluster view (`app.store.view.ClusterView`) holds every pod, workload, ReplicaSet, node and
namespace of the cluster; as the API server returns them, most of each object is what
kerf never reads (volumes, images, probes, tolerations, most conditions, container
states, `managedFields`, `last-applied-configuration`). `project` keeps only the fields
the decisions, the status, the rollback monitor, the reconciler's writes and the webhook
read, in the same shape as the API's JSON, so every reader works on a projection as on
the full object. Repeated strings (namespaces, node names, label keys and values,
quantities, condition types) are interned: thousands of pods share one copy.

A field a reader needs must be listed here; `tests/app/test_slim.py` checks that
decisions over the projections equal decisions over the full objects. Kinds without a
projection below are kept whole, minus `metadata.managedFields`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from app.model.annotations import MIRROR_POD
from app.model.workloads import JAVA_OPTION_VARS, WORKLOAD_KINDS, is_sidecar

_INTERN = sys.intern

#: Annotation domains kerf reads (its own and the webhook's); other annotations are
#: dropped, e.g. `kubectl.kubernetes.io/last-applied-configuration`.
KEPT_ANNOTATION_DOMAIN = "kubex.ai"
#: Annotations outside those domains that kerf reads: a mirror pod's, and KAI's share of
#: a GPU (app/recommend/gpu_inputs.py).
KEPT_ANNOTATIONS = frozenset({MIRROR_POD, "gpu-fraction"})
#: Pod condition types kerf reads: readiness and scheduling (rollback health), resize
#: progress (`app.policy.podstate`).
KEPT_CONDITIONS = frozenset({"Ready", "PodScheduled", "PodResizePending", "PodResizeInProgress"})
_OWN_FIELDS = ("name", "uid", "resourceVersion", "deletionTimestamp")
_CONDITION_FIELDS = ("type", "status", "reason", "message", "lastTransitionTime")
#: Of readiness and scheduling kerf reads the status, reason and message, not the time
#: (that is read of the resize conditions only: how long a resize waits).
_UNTIMED_CONDITION_FIELDS = ("type", "status", "reason", "message")
_TIMED_CONDITIONS = frozenset({"PodResizePending", "PodResizeInProgress"})
#: Condition lists without times or messages, one list for all the pods that have it
#: (most running pods: Ready and PodScheduled both True). Such lists are a handful of
#: statuses and reasons; the bound keeps odd reasons from growing it without end.
_SHARED_CONDITIONS: dict[tuple[tuple[tuple[str, Any], ...], ...], list[dict[str, Any]]] = {}
SHARED_CONDITIONS_MAX = 256
#: What a container's state says that kerf reads: why it ended and when, why it waits.
_STATE_FIELDS = {"terminated": ("reason", "finishedAt"), "waiting": ("reason",)}


def _head(obj: Mapping[str, Any]) -> dict[str, Any]:
    return _copy(obj, ("apiVersion", "kind"))


def _intern(value: Any) -> Any:
    return _INTERN(value) if type(value) is str else value


def _strings(values: Mapping[str, Any] | None) -> dict[str, Any]:
    # Inlined rather than calling _intern per item: this runs for every label and
    # quantity of every object listed.
    return {
        _INTERN(k) if type(k) is str else k: _INTERN(v) if type(v) is str else v
        for k, v in (values or {}).items()
    }


def kept_annotation(key: str) -> bool:
    """Whether the view keeps an annotation: kerf's domains and `KEPT_ANNOTATIONS`."""
    return key.partition("/")[0].endswith(KEPT_ANNOTATION_DOMAIN) or key in KEPT_ANNOTATIONS


def _copy(source: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """The listed fields of `source` that it has, strings interned."""
    kept = {}
    for f in fields:
        if f in source:
            v = source[f]
            kept[f] = _INTERN(v) if type(v) is str else v
    return kept


def metadata(meta: Mapping[str, Any] | None, *, labels: bool = True) -> dict[str, Any]:
    """Identity, version, labels, kerf's annotations and owner references of an object."""
    meta = meta or {}
    # Names, uids, versions and deletion times are the object's own: interning them would
    # cost time and an entry in the interned table each, for nothing shared.
    kept = {f: meta[f] for f in _OWN_FIELDS if f in meta}
    # Shared: a ReplicaSet's pods have one generateName, and creation times are to the
    # second (the pods a rollout or a scale-up creates share them).
    for f in ("namespace", "generateName", "creationTimestamp"):
        if f in meta:
            kept[f] = _intern(meta[f])
    if labels and meta.get("labels"):
        kept["labels"] = _strings(meta["labels"])
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if kept_annotation(k)}
    if annotations:
        kept["annotations"] = {_intern(k): v for k, v in annotations.items()}
    if meta.get("ownerReferences"):
        kept["ownerReferences"] = _owner_references(meta["ownerReferences"])
    return kept


def _owner_references(refs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [_copy(ref, ("kind", "name", "controller")) for ref in refs]


def _resources(resources: Mapping[str, Any]) -> dict[str, Any]:
    return {f: _strings(resources[f]) for f in ("requests", "limits") if f in resources}


def container(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Name, resources, resize policy, restart policy, and what a JVM heap is read from
    (command, args, the `JAVA_OPTION_VARS` environment variables)."""
    kept = _copy(spec, ("name", "restartPolicy", "command", "args"))
    if "resources" in spec:
        kept["resources"] = _resources(spec["resources"] or {})
    if spec.get("resizePolicy"):
        kept["resizePolicy"] = [_strings(entry) for entry in spec["resizePolicy"]]
    env = [
        {"name": entry["name"], "value": entry["value"]}
        for entry in spec.get("env") or ()
        if entry.get("name") in JAVA_OPTION_VARS and "value" in entry
    ]
    if env:
        kept["env"] = env
    return kept


def _state(state: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: _copy(state[key] or {}, fields)
        for key, fields in _STATE_FIELDS.items()
        if key in state
    }


def container_status(
    status: Mapping[str, Any], asked: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Name, restarts, the resources the kubelet runs, why it ended or waits. Resources
    equal to `asked` (the spec's, as kept) are that very dict: the kubelet runs what the
    spec asks on almost every pod, and the view's dicts are only read."""
    kept = _copy(status, ("name", "restartCount"))
    if "resources" in status:
        running = _resources(status["resources"] or {})
        kept["resources"] = asked if running == asked else running
    for key in ("state", "lastState"):
        state = _state(status.get(key) or {})
        if state:
            kept[key] = state
    return kept


def pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What kerf keeps of a pod: its identity and owner, node, containers' resources (and
    the overhead its RuntimeClass adds, which its node counts), and the status fields that
    say whether it runs, is ready, restarted or is being resized."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    kept_spec = _copy(spec, ("nodeName",))
    if spec.get("overhead"):
        kept_spec["overhead"] = _strings(spec["overhead"])
    for group in ("containers", "initContainers"):
        if group in spec:
            kept_spec[group] = [container(c) for c in spec[group] or ()]
    # startTime: a GPU reactive policy counts a pod's metrics by its age (app/recommend/gpu_reactive.py)
    kept_status = _copy(status, ("phase", "reason", "startTime"))
    conditions = [
        _copy(c, _CONDITION_FIELDS if c["type"] in _TIMED_CONDITIONS else _UNTIMED_CONDITION_FIELDS)
        for c in status.get("conditions") or ()
        if c.get("type") in KEPT_CONDITIONS
    ]
    if conditions:
        kept_status["conditions"] = _shared_conditions(conditions)
    asked = {
        c.get("name"): c.get("resources")
        for group in ("containers", "initContainers")
        for c in kept_spec.get(group) or ()
    }
    for group in ("containerStatuses", "initContainerStatuses"):
        if group in status:
            kept_status[group] = [
                container_status(s, asked.get(s.get("name"))) for s in status[group] or ()
            ]
    return {
        **_head(obj),
        "metadata": metadata(obj.get("metadata")),
        "spec": kept_spec,
        "status": kept_status,
    }


_CONTAINER_GROUPS = frozenset(
    {"containers", "initContainers", "containerStatuses", "initContainerStatuses"}
)
#: The parts of a pod that its siblings (the pods of its ReplicaSet or Job) most often have
#: equal, by section: labels, owner, containers, and while they run alike their statuses.
_SIBLING_PARTS = (
    ("metadata", ("labels", "annotations", "ownerReferences")),
    ("spec", ("containers", "initContainers", "overhead")),
    ("status", ("conditions", "containerStatuses", "initContainerStatuses")),
)


def share_with_sibling(kept: dict[str, Any], sibling: Mapping[str, Any]) -> None:
    """Make the parts of a fresh pod projection that equal its sibling's be the sibling's
    (one copy for all the pods of a controller instead of one each). A container list
    that differs (a pod resized, or restarted) shares the containers that are equal, and
    of the others their resources if equal.

    The view's pods are only read, so a shared part is never changed through one pod;
    `tests/app/test_slim.py` checks that deciding over the view leaves it as it was."""
    for section, fields in _SIBLING_PARTS:
        mine, theirs = kept.get(section), sibling.get(section)
        if not mine or not theirs:
            continue
        for f in fields:
            value = mine.get(f)
            if value is None or f not in theirs:
                continue
            other = theirs[f]
            if value == other:
                mine[f] = other
            elif f in _CONTAINER_GROUPS and type(value) is list and type(other) is list:
                shared = [_shared_entry(v, o) for v, o in zip(value, other, strict=False)]
                mine[f] = shared + value[len(shared) :]


def share_resources(kept: Mapping[str, Any], resources: Mapping[str, Any]) -> None:
    """Make the resources of a fresh projection's containers (a pod's, and its container
    statuses', or a workload template's) be those of `resources` (by container name) where
    equal, or their requests or limits where those are: a workload's pods and its template
    ask alike until a resize, and then keep one of the two maps."""
    spec = kept.get("spec") or {}
    entries = [
        *(spec.get("containers") or ()),
        *(spec.get("initContainers") or ()),
        *((kept.get("status") or {}).get("containerStatuses") or ()),
        *((kept.get("status") or {}).get("initContainerStatuses") or ()),
    ]
    for entry in entries:
        _share_maps(entry, resources.get(entry.get("name")))


def _shared_entry(entry: Any, other: Any) -> Any:
    """A container (or container status) entry: its sibling's if equal, else with its
    sibling's resources, or requests or limits, where those are."""
    if entry == other:
        return other
    if type(entry) is dict and type(other) is dict and entry.get("name") == other.get("name"):
        _share_maps(entry, other.get("resources"))
    return entry


def _share_maps(entry: dict[str, Any], resources: Mapping[str, Any] | None) -> None:
    """An entry's resources become `resources` if equal, else its requests or limits
    become those of `resources` that are equal."""
    mine = entry.get("resources")
    if mine is None or resources is None:
        return
    if mine == resources:
        entry["resources"] = resources
        return
    for f in ("requests", "limits"):
        if f in mine and mine[f] == resources.get(f):
            mine[f] = resources[f]


def _shared_conditions(conditions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The list of every other pod with the same conditions, if they say no time and no
    message (`_SHARED_CONDITIONS`); else `conditions`."""
    if any("lastTransitionTime" in c or "message" in c for c in conditions):
        return conditions
    key = tuple(tuple(c.items()) for c in conditions)
    found = _SHARED_CONDITIONS.get(key)
    if found is not None:
        return found
    if len(_SHARED_CONDITIONS) < SHARED_CONDITIONS_MAX:
        _SHARED_CONDITIONS[key] = conditions
    return conditions


def _template(template: Mapping[str, Any]) -> dict[str, Any]:
    spec = template.get("spec") or {}
    kept = {"containers": [container(c) for c in spec.get("containers") or ()]}
    sidecars = [container(c) for c in spec.get("initContainers") or () if is_sidecar(c)]
    if sidecars:
        kept["initContainers"] = sidecars
    return {"spec": kept}


def workload(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What kerf keeps of a workload (Deployment, StatefulSet, Job, CronJob …): what
    `app.model.workloads.Workload` is built from (labels, annotations, replicas, the template's
    containers) and what the reconciler writes with (identity, version, uid)."""
    spec = obj.get("spec") or {}
    kept_spec = _copy(spec, ("replicas", "parallelism"))
    if obj.get("kind") == "CronJob":
        job = (spec.get("jobTemplate") or {}).get("spec") or {}
        kept_spec["jobTemplate"] = {"spec": {"template": _template(job.get("template") or {})}}
    elif "template" in spec:
        kept_spec["template"] = _template(spec["template"] or {})
    return {
        **_head(obj),
        "metadata": metadata(obj.get("metadata")),
        "spec": kept_spec,
    }


def reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the view keeps of a workload object besides its `Workload`: what the
    reconciler writes to it with (kind, name, resourceVersion, uid) and its owner (a Job's
    CronJob)."""
    meta = obj.get("metadata") or {}
    kept = _copy(meta, ("name", "namespace", "uid", "resourceVersion"))
    if "ownerReferences" in meta:
        kept["ownerReferences"] = meta["ownerReferences"]
    return {**_head(obj), "metadata": kept}


def replica_set(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What kerf keeps of a ReplicaSet: its name, version and who owns it (a pod's owner is
    resolved through it; nothing reads its uid, labels or times)."""
    meta = obj.get("metadata") or {}
    # Its name interned: its pods' owner references name it.
    kept = _copy(meta, ("name", "namespace"))
    if "resourceVersion" in meta:
        kept["resourceVersion"] = meta["resourceVersion"]
    if meta.get("ownerReferences"):
        kept["ownerReferences"] = _owner_references(meta["ownerReferences"])
    return {**_head(obj), "metadata": kept}


def node(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What kerf keeps of a node: its name and allocatable resources."""
    allocatable = (obj.get("status") or {}).get("allocatable")
    kept: dict[str, Any] = {
        **_head(obj),
        "metadata": metadata(obj.get("metadata")),
    }
    if allocatable is not None:
        kept["status"] = {"allocatable": _strings(allocatable)}
    return kept


def namespace(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What kerf keeps of a namespace: its name, labels and kerf's annotations (pause)."""
    return {
        **_head(obj),
        "metadata": metadata(obj.get("metadata")),
    }


def custom_resource_definition(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What kerf keeps of one of its CRDs: its name and whether it is being deleted (the
    schemas, most of the object, are the API server's business)."""
    return {**_head(obj), "metadata": metadata(obj.get("metadata"), labels=False)}


def hpa(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What kerf keeps of a HorizontalPodAutoscaler: its target and its metrics."""
    spec = obj.get("spec") or {}
    return {
        **_head(obj),
        "metadata": metadata(obj.get("metadata"), labels=False),
        "spec": _copy(spec, ("scaleTargetRef", "metrics", "targetCPUUtilizationPercentage")),
    }


def vpa(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What kerf keeps of a VerticalPodAutoscaler: its target, update mode, container
    policies, RecommendationProvided condition and which resources it recommends."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    policies = [
        _copy(p, ("containerName", "mode", "controlledResources", "controlledValues"))
        for p in (spec.get("resourcePolicy") or {}).get("containerPolicies") or []
    ]
    recommended = [
        {
            "containerName": r.get("containerName"),
            "target": dict.fromkeys(r.get("target") or {}, ""),
        }
        for r in (status.get("recommendation") or {}).get("containerRecommendations") or []
    ]
    return {
        **_head(obj),
        "metadata": metadata(obj.get("metadata"), labels=False),
        "spec": {
            **_copy(spec, ("targetRef",)),
            "updatePolicy": _copy(spec.get("updatePolicy") or {}, ("updateMode",)),
            "resourcePolicy": {"containerPolicies": policies},
        },
        "status": {
            "conditions": [
                _copy(c, ("type", "status"))
                for c in status.get("conditions") or []
                if c.get("type") == "RecommendationProvided"
            ],
            "recommendation": {"containerRecommendations": recommended},
        },
    }


def _interned(value: Any) -> Any:
    if isinstance(value, dict):
        return {_intern(k): _interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interned(v) for v in value]
    return _intern(value)


def kerf_object(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What kerf keeps of one of its own custom resources before validating it into a
    model: everything but the metadata kerf does not read (owner references, managed
    fields, other annotations), strings interned (a RightsizingRecommendation's status
    repeats policy names, annotation keys and quantities from its neighbours')."""
    return {
        **_interned({k: v for k, v in raw.items() if k != "metadata"}),
        "metadata": kerf_metadata(raw),
    }


def kerf_metadata(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What kerf keeps of one of its own custom resources' metadata."""
    meta = raw.get("metadata") or {}
    kept = metadata(meta)
    kept.pop("ownerReferences", None)
    if "generation" in meta:
        kept["generation"] = meta["generation"]
    return kept


#: One frozenset per distinct set of field names, shared by every model that has it.
_FIELD_SETS: dict[frozenset[str], frozenset[str]] = {}


def share_field_sets(model: BaseModel) -> BaseModel:
    """Let `model` and the models inside it share their sets of explicitly set field
    names (`__pydantic_fields_set__`) with every other model of the same fields.

    Pydantic keeps one such set per model instance, ~500 bytes each: half of what a
    RightsizingRecommendation weighs, repeated 18 times per record. kerf never reads them
    (no `exclude_unset`), and the shared ones are frozen, so an assignment to a field of a
    view model fails loudly instead of changing its neighbours' sets.
    """
    stack: list[Any] = [model]
    while stack:
        value = stack.pop()
        if isinstance(value, BaseModel):
            names = frozenset(value.__pydantic_fields_set__)
            object.__setattr__(
                value, "__pydantic_fields_set__", _FIELD_SETS.setdefault(names, names)
            )
            stack.extend(value.__dict__.values())
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return model


PROJECTIONS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "Pod": pod,
    "ReplicaSet": replica_set,
    "Node": node,
    "Namespace": namespace,
    "HorizontalPodAutoscaler": hpa,
    "VerticalPodAutoscaler": vpa,
    "CustomResourceDefinition": custom_resource_definition,
    **dict.fromkeys(WORKLOAD_KINDS, workload),
}


def project(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """What the view keeps of an object (`PROJECTIONS` by kind; other kinds whole, without
    `metadata.managedFields`)."""
    projection = PROJECTIONS.get(str(obj.get("kind")))
    if projection is not None:
        return projection(obj)
    meta = obj.get("metadata")
    if isinstance(meta, Mapping) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj
