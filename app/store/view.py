"""The cluster view: the objects decisions need, in memory and indexed.

Fed from a state directory (`app/store/statedir.py`) or from watches (webhook, reconciler).
The view is a store: it keeps the objects, indexes them (pods by owner and node,
policies by namespace, autoscalers by namespace) and answers queries; it plans nothing
and caches no derived value. Planning a workload's policies is `app/policy/plans.py`, what
nodes offer `app/store/allocatable.py`, a namespace's parsed bounds `app/store/namespace_bounds.py`,
all over this view. What decisions keep between pods (plans, the admission memo, input
versions, parsed pods, values derived from one input version) is owned by
`app.store.decision_cache.DecisionCaches`: the view tells it what changed, and which input
versions a change ended (`app.store.inputs.reach`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, cast, overload

from app.model.crd import (
    STORED_KINDS,
    GlobalConfiguration,
    GlobalConfigurationSpec,
    KerfResource,
    RightsizingRecommendation,
)
from app.model.kube_types import (
    HPADict,
    LimitRangeDict,
    NamespaceDict,
    NodeDict,
    ObjectDict,
    PodDict,
    ResourceQuotaDict,
    TargetRefDict,
    VPADict,
    as_pod,
    node_name,
)
from app.model.kubex_rows import DEFAULT_CONFIGMAP as KUBEX_CONFIGMAP
from app.model.owners import WorkloadRef, controller_ref, resolve_owner
from app.model.quantities import QuantityError
from app.model.recommendations import RecommendationRow, is_recommendation_configmap
from app.model.records import record_name, record_targets, stored
from app.model.workloads import WORKLOAD_KINDS, Workload, pod_template, target_containers
from app.store.decision_cache import DecisionCaches, Plan
from app.store.inputs import (
    AUTOSCALERS,
    BOUNDS,
    KERF,
    NAMESPACE,
    NO_REACH,
    NODE_USAGE,
    NODES,
    OOM_EVIDENCE,
    PODS,
    RECORD,
    SOURCES,
    DeclaredRecord,
    Input,
    Reach,
    check_read,
    reach,
    record_matters,
    workload_stamp_keys,
)
from app.store.namespace_bounds import BOUND_KINDS, pod_shape, pod_totals
from app.store.slim import (
    project,
    reference,
    share_field_sets,
    share_resources,
    share_with_sibling,
)
from app.store.sources import (
    NamespaceFilter,
    RecommendationSources,
    SourceKey,
    SourceState,
    WorkloadSources,
)

#: what `ClusterView.recommendations` is asked
RecommendationAsk = Literal["rows", "news", "record", "sources", "is-source"]
ObjectKey = tuple[str, str, str]  # (kind, namespace, name); namespace "" when cluster-scoped
#: a namespace's bound, as the view keeps it
Bound = LimitRangeDict | ResourceQuotaDict
#: any object `get` answers
KubeObject = PodDict | NamespaceDict | NodeDict | ObjectDict
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
INTERMEDIATE_OWNER_KINDS = frozenset({"ReplicaSet", "Job"})
#: Plain Kubernetes kinds the view keeps (besides workloads and kerf CRs).
CORE_KINDS = frozenset(
    {
        "Pod",
        "Node",
        "Namespace",
        "ReplicaSet",
        "HorizontalPodAutoscaler",
        "VerticalPodAutoscaler",
        "ConfigMap",
        "PodDisruptionBudget",
        *BOUND_KINDS,
    }
)
#: the input a read of a plain object of a kind is, when a decision stage reads it by key
_READ_BY_KIND: dict[str, Input] = {
    "Namespace": NAMESPACE,
    "Node": NODES,
    **{kind: BOUNDS for kind in BOUND_KINDS},
}


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    """(kind, namespace, name) of a Kubernetes object dict."""
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))


def _pod_key(pod: PodDict) -> tuple[str, str]:
    """(namespace, name) of a pod, as the view keys it."""
    meta = pod.get("metadata") or {}
    return (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))


def _intermediate_owner(pod: PodDict) -> ObjectKey | None:
    """(kind, namespace, name) of the ReplicaSet or Job a pod's controller reference names:
    the object its resolved owner depends on."""
    ref = controller_ref(pod)
    if ref is None or ref.get("kind") not in INTERMEDIATE_OWNER_KINDS:
        return None
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    return (str(ref.get("kind")), namespace, str(ref.get("name", "")))


def _names(ref: TargetRefDict | None, workload: Workload) -> bool:
    """Whether an autoscaler's target reference names the workload."""
    return ref is not None and ref.get("kind") == workload.kind and ref.get("name") == workload.name


def node_requests_of(pod: PodDict) -> tuple[int, int]:
    """(cpu millicores, memory bytes) a pod takes from its node, counted as the kubelet
    admits it and the scheduler places it (`pod_totals`: sidecars summed, each plain init
    container with the sidecars before it, the larger) plus its RuntimeClass's overhead."""
    shape = pod_shape(pod, {})
    totals = pod_totals(shape, "requests")
    return (
        totals.get("cpu", 0) + shape.overhead.get("cpu", 0),
        totals.get("memory", 0) + shape.overhead.get("memory", 0),
    )


DEFAULT_CONFIG = GlobalConfigurationSpec()


class ClusterView:
    """In-memory, indexed cluster state for decisions (no API call in any query)."""

    def __init__(
        self,
        *,
        own_namespace: str = "kerf-system",
        kubex_source: SourceKey | None = None,
        rows_of: NamespaceFilter = None,
    ) -> None:
        """`rows_of`: the namespaces whose recommendation rows are kept (None: all)."""
        self.own_namespace = own_namespace
        #: (namespace, name) of Kubex's recommendation ConfigMap (default: Kubex's name in
        #: kerf's namespace), a source without the label
        self.kubex_source = kubex_source or (own_namespace, KUBEX_CONFIGMAP)
        self.synced = False
        #: when the view was last known complete (initial sync, then each relist)
        self.synced_at: datetime | None = None
        #: a caller may decide on another thread than the one the watches write on (the
        #: webhook decides on its event loop, other callers need not): every update and
        #: every decision holds this lock (re-entrant: a decision nests reads)
        self.lock = threading.RLock()
        self.warnings: list[str] = []
        self._kerf: dict[ObjectKey, KerfResource] = {}
        self._ns_policies: dict[str, dict[ObjectKey, KerfResource]] = {}
        self._cluster_policies: dict[ObjectKey, KerfResource] = {}
        self._workloads: dict[ObjectKey, Workload] = {}
        self._objects: dict[ObjectKey, ObjectDict] = {}
        self._pods: dict[tuple[str, str], PodDict] = {}
        #: pods by resolved owner, as `_pods_by_controller` keeps them
        self._pods_by_owner: dict[ObjectKey, tuple[tuple[str, str], ...]] = {}
        #: the resolved owner of every pod of the view (a bare pod has none); resolved when
        #: the pod arrives and again when the ReplicaSet or Job it names changes
        self._pod_owner: dict[tuple[str, str], WorkloadRef] = {}
        #: pods by the intermediate owner (ReplicaSet, Job) their controller reference names
        #: (tuples: a controller has few pods, and the collector stops tracking a tuple of
        #: strings, which keeps full collections of a large view short)
        self._pods_by_controller: dict[ObjectKey, tuple[tuple[str, str], ...]] = {}
        self._hpas: dict[str, dict[str, HPADict]] = {}
        #: VerticalPodAutoscalers by namespace (an optional input: the CRD is often absent)
        self._vpas: dict[str, dict[str, VPADict]] = {}
        self._sources = RecommendationSources(kubex=self.kubex_source, keeps=rows_of)
        #: plans, the admission memo, input versions, parsed pods (see its docstring)
        self.caches: DecisionCaches[Plan] = DecisionCaches()
        self._node_totals: dict[str, list[int]] = {}
        #: LimitRanges and ResourceQuotas by namespace
        self._bound_objects: dict[str, dict[tuple[str, str], Bound]] = {}
        #: while on (tests turn it on), a read of an input by a stage that does not
        #: declare it raises `UndeclaredInput` (`app.store.inputs`)
        self.check_reads = False
        #: (name, declared inputs) of the stage being decided, while `check_reads` is on
        self.reading: tuple[str, tuple[Input, ...]] | None = None

    # ------------------------------------------------------------------ updates

    def mark_synced(self, at: datetime) -> None:
        """Record that the view now reflects the whole source."""
        self.synced = True
        self.synced_at = at

    def apply(self, obj: Mapping[str, Any]) -> Reach:
        """Insert or replace one object (a kerf CR must already be a model); returns what
        the change may touch (`app.store.inputs.reach`), whose input versions it has ended."""
        if isinstance(obj, KerfResource):
            key = (obj.kind, obj.metadata.namespace or "", obj.metadata.name)
        else:
            key = object_key(obj)
        with self.lock:
            old = self._stored(*key)
            before = NO_REACH if old is None else reach(self, *key, old, obj, of=old, before=True)
            self._apply(obj)
            new = self._stored(*key)
            return self._ended(before | reach(self, *key, old, new, of=new))

    def delete(self, kind: str, namespace: str, name: str) -> Reach:
        """Forget one object (unknown objects are ignored); returns what the change may
        touch, as `apply` does."""
        with self.lock:
            old = self._stored(kind, namespace, name)
            if old is None:
                return reach(self, kind, namespace, name, None, None, of=None)
            before = reach(self, kind, namespace, name, old, None, of=old, before=True)
            self._delete(kind, namespace, name)
            return self._ended(before | reach(self, kind, namespace, name, old, None, of=None))

    def _stored(self, kind: str, namespace: str, name: str) -> Any:
        """The object the view keeps under a key (a recommendation ConfigMap: its key
        while it is a source), or None."""
        if kind == "Pod":
            return self._pods.get((namespace, name))
        if kind in AUTOSCALERS.kinds:
            table = self._hpas if kind == "HorizontalPodAutoscaler" else self._vpas
            return table.get(namespace, {}).get(name)
        if kind in BOUND_KINDS:
            return self._bound_objects.get(namespace, {}).get((kind, name))
        if kind == "ConfigMap":
            key = (namespace, name)
            return key if self.recommendations("is-source", key) else None
        found = self._kerf.get((kind, namespace, name))
        return found if found is not None else self._objects.get((kind, namespace, name))

    def _ended(self, found: Reach) -> Reach:
        """Give every input version the change ended a new one."""
        for key in found.stamps:
            self.caches.touch(key)
        return found

    def _apply(self, obj: Mapping[str, Any]) -> None:
        if isinstance(obj, KerfResource):
            self._apply_kerf(obj)
            return
        obj = project(obj)  # only what kerf reads is kept (app/store/slim.py)
        kind, namespace, name = key = object_key(obj)
        if kind in WORKLOAD_KINDS:
            pods = self._pods_by_owner.get(key)
            if pods:  # its template's resources are its pods' while they ask alike
                asked = target_containers(self._pods[pods[0]])
                share_resources(
                    cast(dict[str, Any], pod_template(obj)),
                    {name: c.get("resources") for name, c in asked.items()},
                )
            self._workloads[key] = Workload.from_object(obj, owned=True)  # a fresh projection
            self._objects[key] = cast(ObjectDict, reference(obj))  # the Workload holds the rest
            self._drop_plan(key)
            if kind in INTERMEDIATE_OWNER_KINDS:
                self._reresolve_owners(key)
        elif kind == "Pod":
            pod = as_pod(obj)
            self._remove_pod(namespace, name)
            controller = _intermediate_owner(pod)
            siblings: tuple[tuple[str, str], ...] = ()
            if controller is not None:
                siblings = self._pods_by_controller.get(controller, ())
                if siblings:  # its parts equal to a sibling's are the sibling's (app/store/slim.py)
                    share_with_sibling(cast(dict[str, Any], pod), self._pods[siblings[0]])
                self._pods_by_controller[controller] = (*siblings, (namespace, name))
            self._pods[(namespace, name)] = pod
            self._index_owner((namespace, name), pod)
            owner = self._pod_owner.get((namespace, name))
            workload = self._workloads.get(owner.key) if owner and not siblings else None
            if workload is not None:  # the first pod of a workload asks as its template
                share_resources(cast(dict[str, Any], pod), workload.containers)
            self._count_on_node(pod, 1)
        elif kind == "HorizontalPodAutoscaler":
            self._hpas.setdefault(namespace, {})[name] = cast(HPADict, obj)
        elif kind == "VerticalPodAutoscaler":
            self._vpas.setdefault(namespace, {})[name] = cast(VPADict, obj)
        elif kind in BOUND_KINDS:
            self._bound_objects.setdefault(namespace, {})[(kind, name)] = cast(Bound, obj)
        elif kind == "ConfigMap":
            if not (is_recommendation_configmap(obj) or (namespace, name) == self.kubex_source):
                return  # not a recommendation source
            # Each ConfigMap on its own (app/store/sources.py): one that does not load keeps its
            # rows and stops only the workloads it feeds (HubUnreachable).
            state = self._sources.apply(obj)
            self.warnings.extend([state.failure] if state.failure else [])
            self.warnings.extend(bad.warning for bad in state.invalid)
            self._drop_plans()
        else:
            self._objects[key] = cast(ObjectDict, obj)
            if kind in INTERMEDIATE_OWNER_KINDS:
                self._reresolve_owners(key)

    def _delete(self, kind: str, namespace: str, name: str) -> None:
        key = (kind, namespace, name)
        if key in self._kerf:
            if kind == "RightsizingRecommendation":
                self._record_changed(key, self._kerf[key], None)
            self._remove_kerf(key)
        elif kind == "Pod":
            self._remove_pod(namespace, name)
        elif kind == "HorizontalPodAutoscaler":
            self._hpas.get(namespace, {}).pop(name, None)
        elif kind == "VerticalPodAutoscaler":
            self._vpas.get(namespace, {}).pop(name, None)
        elif kind in BOUND_KINDS:
            self._bound_objects.get(namespace, {}).pop((kind, name), None)
        elif kind == "ConfigMap":
            if self._sources.delete(namespace, name):
                self._drop_plans()
        else:
            self._workloads.pop(key, None)
            self._objects.pop(key, None)
            self._drop_plan(key)
            for stamp in workload_stamp_keys(key):
                self.caches.forget_stamp(stamp)
            if kind in INTERMEDIATE_OWNER_KINDS:
                self._reresolve_owners(key)

    def _apply_kerf(self, obj: KerfResource) -> None:
        key = (obj.kind, obj.metadata.namespace or "", obj.metadata.name)
        if isinstance(obj, RightsizingRecommendation):
            # compared before it is stored: the new status is parsed already
            self._record_changed(key, self._kerf.get(key), obj)
            obj = stored(obj)  # its status as JSON bytes (app/model/records.py)
        share_field_sets(obj)  # half a record's weight (app/store/slim.py)
        self._remove_kerf(key)
        self._kerf[key] = obj
        self._kerf_changed(key)
        spec = getattr(obj, "spec", None)
        if not type(obj).acted_on or spec is None or not hasattr(spec, "scope"):
            return  # strategies, singletons, recommendations: looked up by key
        if type(obj).cluster_scoped:
            self._cluster_policies[key] = obj
        else:
            self._ns_policies.setdefault(key[1], {})[key] = obj

    def _remove_kerf(self, key: ObjectKey) -> None:
        if self._kerf.pop(key, None) is None:
            return
        self._cluster_policies.pop(key, None)
        self._ns_policies.get(key[1], {}).pop(key, None)
        self._kerf_changed(key)

    def _kerf_changed(self, key: ObjectKey) -> None:
        if key[0] in STORED_KINDS:
            return  # kept for the reconciler to tell once; no decision reads them
        if key[0] == "RightsizingRecommendation":
            return  # `_record_changed`, which compares the two versions
        self._drop_plans()
        self.caches.drop_settings()

    def _drop_plan(self, key: ObjectKey) -> None:
        self.caches.drop_plan(key)

    def _drop_plans(self) -> None:
        self.caches.drop_plans()

    def _record_changed(self, key: ObjectKey, old: object, new: object) -> None:
        """A RightsizingRecommendation came, changed or went (None: absent): only the plan
        of the workload it is named after reads it (`recommendations("record", …)`), and
        only the fields `RECORD_FIELDS` declares. The reconciler writes one per change:
        dropping every plan for each cost the next pass of every workload a rebuilt plan,
        and dropping its own for a status that changed nothing the decisions read cost the
        pass over the write's echo a rebuilt plan and every pod decided again."""
        if not record_matters(old, new):
            return
        for target in record_targets(key[1], key[2]):
            self._drop_plan(target)

    def _remove_pod(self, namespace: str, name: str) -> None:
        old = self._pods.pop((namespace, name), None)
        self.caches.drop_parsed((namespace, name))
        if old is not None:
            self._unindex_owner((namespace, name))
            controller = _intermediate_owner(old)
            if controller is not None:
                self._forget_controlled(controller, (namespace, name))
            self._count_on_node(old, -1)

    def _count_on_node(self, pod: PodDict, sign: Literal[1, -1]) -> None:
        """Add a pod's requests to its node's totals (sign 1), or take them back (-1): a
        pod on a node that has not ended counts. What it took is computed again from the
        pod when it goes rather than kept per pod: the same pod gives the same amounts."""
        node = node_name(pod)
        if not node or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return
        try:
            cpu, memory = node_requests_of(pod)
        except QuantityError as exc:  # the API server refuses these; never crash on one
            if sign > 0:
                namespace, name = _pod_key(pod)
                self.warnings.append(f"Pod {namespace}/{name}: {exc}")
            return
        totals = self._node_totals.setdefault(node, [0, 0])
        totals[0] += sign * cpu
        totals[1] += sign * memory

    def _forget_controlled(self, controller: ObjectKey, pod_key: tuple[str, str]) -> None:
        rest = tuple(k for k in self._pods_by_controller.get(controller, ()) if k != pod_key)
        if rest:
            self._pods_by_controller[controller] = rest
        else:  # ReplicaSets come and go with every rollout: drop their entries
            self._pods_by_controller.pop(controller, None)

    def _index_owner(self, pod_key: tuple[str, str], pod: PodDict) -> None:
        owner = resolve_owner(pod, self)
        if owner is not None:
            known = self._workloads.get(owner.key)
            if known is not None:
                owner = known.ref  # one shared identity per workload, not one per pod
            self._pods_by_owner[owner.key] = (*self._pods_by_owner.get(owner.key, ()), pod_key)
            self._pod_owner[pod_key] = owner

    def _unindex_owner(self, pod_key: tuple[str, str]) -> None:
        owner = self._pod_owner.pop(pod_key, None)
        if owner is not None:
            rest = tuple(k for k in self._pods_by_owner.get(owner.key, ()) if k != pod_key)
            if rest:
                self._pods_by_owner[owner.key] = rest
            else:
                self._pods_by_owner.pop(owner.key, None)
                # No pod left, so no evidence: the absent version says just that, and a
                # later one is a new version, never an earlier one.
                self.caches.forget_stamp((OOM_EVIDENCE.name, owner.key))

    def _reresolve_owners(self, controller: ObjectKey) -> None:
        """A ReplicaSet or Job arrived, changed or went: the pods it controls may now
        belong to another workload (a pod seen before its ReplicaSet was named from its
        hash label)."""
        for pod_key in self._pods_by_controller.get(controller, ()):
            pod = self._pods[pod_key]
            before = reach(self, "Pod", *pod_key, pod, pod, of=pod, before=True)
            self._unindex_owner(pod_key)
            self._index_owner(pod_key, pod)
            self._ended(before | reach(self, "Pod", *pod_key, pod, pod, of=pod))

    # ------------------------------------------------------------------ queries

    def _read(self, *declared: Input) -> None:
        """A stage reads an input (any of `declared`): it must declare it."""
        check_read(self.reading, *declared)

    # A kind named as a literal answers its TypedDict, any other ObjectDict. mypy calls a
    # literal overload beside a `str` one unsafe: a `str` that holds "Pod" gets the wider
    # ObjectDict, which is what such a caller reads it as.
    @overload
    def get(  # type: ignore[overload-overlap]
        self, kind: Literal["Pod"], namespace: str, name: str
    ) -> PodDict | None: ...

    @overload
    def get(  # type: ignore[overload-overlap]
        self, kind: Literal["Namespace"], namespace: str, name: str
    ) -> NamespaceDict | None: ...

    @overload
    def get(  # type: ignore[overload-overlap]
        self, kind: Literal["Node"], namespace: str, name: str
    ) -> NodeDict | None: ...

    @overload
    def get(self, kind: str, namespace: str, name: str) -> ObjectDict | None: ...

    def get(self, kind: str, namespace: str, name: str) -> KubeObject | None:
        """A plain object (Pod, ReplicaSet, Job, workload, Node, Namespace …) by key
        (namespace "" for cluster kinds)."""
        if kind == "Pod":
            return self._pods.get((namespace, name))
        if self.check_reads and kind in _READ_BY_KIND:
            self._read(_READ_BY_KIND[kind])
        return self._objects.get((kind, namespace, name))

    @overload
    def objects(  # type: ignore[overload-overlap]
        self, kind: Literal["Node"], namespace: None = None
    ) -> list[NodeDict]: ...

    @overload
    def objects(  # type: ignore[overload-overlap]
        self, kind: Literal["LimitRange"], namespace: str | None
    ) -> list[LimitRangeDict]: ...

    @overload
    def objects(  # type: ignore[overload-overlap]
        self, kind: Literal["ResourceQuota"], namespace: str | None
    ) -> list[ResourceQuotaDict]: ...

    @overload
    def objects(self, kind: str, namespace: str | None = None) -> list[ObjectDict]: ...

    def objects(
        self, kind: str, namespace: str | None = None
    ) -> Sequence[NodeDict | Bound | ObjectDict]:
        """Every plain object of a kind the view keeps by key (Node, Namespace, LimitRange,
        ResourceQuota …), or of a namespace's."""
        if self.check_reads and kind in _READ_BY_KIND:
            self._read(_READ_BY_KIND[kind])
        if kind in BOUND_KINDS:
            if namespace is not None and not self._bound_objects.get(namespace):
                return []  # most namespaces: asked before every decision
            spaces = [namespace] if namespace is not None else list(self._bound_objects)
            return [
                obj
                for ns in spaces
                for (k, _), obj in self._bound_objects.get(ns, {}).items()
                if k == kind
            ]
        return [
            obj
            for (k, ns, _), obj in self._objects.items()
            if k == kind and (namespace is None or ns == namespace)
        ]

    def kerf_objects(self, kind: str) -> list[KerfResource]:
        """Every kerf custom resource of a kind."""
        return [obj for (k, _, _), obj in self._kerf.items() if k == kind]

    def kerf_object(self, kind: str, namespace: str, name: str) -> KerfResource | None:
        """A kerf custom resource by key (namespace "" for cluster kinds)."""
        return self._kerf.get((kind, namespace, name))

    @property
    def global_config(self) -> GlobalConfigurationSpec:
        """GlobalConfiguration spec (defaults when the singleton is absent)."""
        if self.check_reads:
            self._read(KERF)
        obj = self._kerf.get(("GlobalConfiguration", "", "global-config"))
        return obj.spec if isinstance(obj, GlobalConfiguration) else DEFAULT_CONFIG

    def policies(self, namespace: str | None) -> list[KerfResource]:
        """The namespaced policies of a namespace, or (None) every cluster policy: which
        of them a workload's namespace admits is `app.policy.plans.policies_for`."""
        if self.check_reads:
            self._read(KERF)
        if namespace is None:
            return list(self._cluster_policies.values())
        return list(self._ns_policies.get(namespace, {}).values())

    def workload(self, ref: WorkloadRef) -> Workload | None:
        """A known workload."""
        return self._workloads.get(ref.key)

    def workloads(self) -> Iterable[Workload]:
        """Every workload in the view."""
        return self._workloads.values()

    @overload
    def pods(self) -> Iterable[PodDict]: ...

    @overload
    def pods(self, owner: WorkloadRef) -> list[PodDict]: ...

    def pods(self, owner: WorkloadRef | None = None) -> Iterable[PodDict]:
        """Every pod in the view, or the known pods of a workload."""
        if owner is None:
            return self._pods.values()
        if self.check_reads:
            self._read(OOM_EVIDENCE, PODS)
        return [self._pods[key] for key in self._pods_by_owner.get(owner.key, ())]

    def owner_of(self, pod: PodDict) -> WorkloadRef | None:
        """The workload that owns a pod: kept for the pod objects of the view (resolved
        again whenever the ReplicaSet or Job they name changes), resolved for others."""
        key = _pod_key(pod)
        if self._pods.get(key) is pod:
            return self._pod_owner.get(key)
        return resolve_owner(pod, self)

    def node_requests(self, node: str) -> tuple[int, int]:
        """Sum of (cpu millicores, memory bytes) requested by non-terminal pods on a node."""
        if self.check_reads:
            self._read(NODE_USAGE)
        cpu, memory = self._node_totals.get(node, (0, 0))
        return cpu, memory

    @overload
    def autoscalers(
        self, kind: Literal["HorizontalPodAutoscaler"], workload: Workload
    ) -> list[HPADict]: ...

    @overload
    def autoscalers(
        self, kind: Literal["VerticalPodAutoscaler"], workload: Workload
    ) -> list[VPADict]: ...

    def autoscalers(self, kind: str, workload: Workload) -> list[HPADict] | list[VPADict]:
        """The HorizontalPodAutoscalers or VerticalPodAutoscalers (`kind`) whose target
        reference names the workload."""
        if self.check_reads:
            self._read(AUTOSCALERS)
        if kind == "HorizontalPodAutoscaler":
            hpas = self._hpas.get(workload.namespace, {}).values()
            return [
                h for h in hpas if _names((h.get("spec") or {}).get("scaleTargetRef"), workload)
            ]
        vpas = self._vpas.get(workload.namespace, {}).values()
        return [v for v in vpas if _names((v.get("spec") or {}).get("targetRef"), workload)]

    @overload
    def recommendations(
        self, ask: Literal["rows"], of: WorkloadRef
    ) -> Mapping[str, RecommendationRow]: ...

    @overload
    def recommendations(self, ask: Literal["news"], of: WorkloadRef) -> WorkloadSources: ...

    @overload
    def recommendations(
        self, ask: Literal["record"], of: WorkloadRef
    ) -> RightsizingRecommendation | None: ...

    @overload
    def recommendations(self, ask: Literal["sources"]) -> list[SourceState]: ...

    @overload
    def recommendations(self, ask: Literal["is-source"], of: SourceKey) -> bool: ...

    def recommendations(
        self, ask: RecommendationAsk, of: WorkloadRef | SourceKey | None = None
    ) -> object:
        """What the view holds of recommendations, as asked:

        - `rows` of a workload: its recommendation rows by container, without those Kubex
          holds while GlobalConfiguration's `respectKubexAutomation` is on;
        - `news` of a workload: what the recommendation ConfigMaps say about it beyond its
          rows (those that failed, its skipped rows, the containers Kubex holds);
        - `record` of a workload: the RightsizingRecommendation kerf keeps for it;
        - `sources`: the state of every recommendation ConfigMap, by namespace and name;
        - `is-source` of a (namespace, name): whether the view reads that ConfigMap as a
          recommendation source.
        """
        if ask == "sources":
            return sorted(self._sources.states(), key=lambda s: s.key)
        if ask == "is-source":
            assert isinstance(of, tuple)
            return of == self.kubex_source or self._sources.knows(*of)
        assert isinstance(of, WorkloadRef)
        if ask == "record":
            if self.check_reads:
                self._read(RECORD)
            found = self._kerf.get(
                ("RightsizingRecommendation", of.namespace, record_name(of.kind, of.name))
            )
            if not isinstance(found, RightsizingRecommendation):
                return None
            if self.check_reads and self.reading is not None:
                return cast(RightsizingRecommendation, DeclaredRecord(found))
            return found
        if self.check_reads:
            self._read(SOURCES)
        respect = self.global_config.respect_kubex_automation
        if ask == "rows":
            return self._sources.rows_for(of.key, respect_kubex=respect)
        return self._sources.about(of.key, respect_kubex=respect)
