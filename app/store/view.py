"""The cluster view: the objects decisions need, in memory and indexed.

Fed from a state directory (`app/store/statedir.py`) or from watches (webhook, reconciler).
Policies are indexed by namespace (namespaced kinds) and by the namespaces a cluster
policy's selector admits (computed once per namespace), so deciding for a pod never scans
every policy. Planning a workload's policies is `app/policy/plans.py`, over this view. What
decisions keep between pods (plans, the admission memo, input versions, parsed pods) is
owned by `app.store.decision_cache.DecisionCaches`: the view tells it what changed, and which
input versions a change ended (`app.store.inputs.reach`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from app.model.crd import (
    STORED_KINDS,
    GlobalConfiguration,
    GlobalConfigurationSpec,
    KerfResource,
    RightsizingRecommendation,
)
from app.model.kubex_rows import DEFAULT_CONFIGMAP as KUBEX_CONFIGMAP
from app.model.owners import WorkloadRef, controller_ref, resolve_owner
from app.model.quantities import QuantityError, parse_resource
from app.model.recommendations import RecommendationRow, is_recommendation_configmap
from app.model.records import record_name, record_targets, stored
from app.model.workloads import (
    WORKLOAD_KINDS,
    Workload,
)
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
    Input,
    Reach,
    UndeclaredInput,
    reach,
    workload_stamp_keys,
)
from app.store.namespace_bounds import (
    BOUND_KINDS,
    NamespaceBounds,
    parse_bounds,
    pod_shape,
    pod_totals,
)
from app.store.scope import match_namespace
from app.store.slim import project, reference, share_field_sets
from app.store.sources import RecommendationSources, SourceKey, SourceState, WorkloadSources

ObjectKey = tuple[str, str, str]  # (kind, namespace, name); namespace "" when cluster-scoped
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


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    """(kind, namespace, name) of a Kubernetes object dict."""
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))


def _pod_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of a pod, as the view keys it."""
    meta = pod.get("metadata") or {}
    return (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))


def _intermediate_owner(pod: Mapping[str, Any]) -> ObjectKey | None:
    """(kind, namespace, name) of the ReplicaSet or Job a pod's controller reference names:
    the object its resolved owner depends on."""
    ref = controller_ref(pod)
    if ref is None or ref.get("kind") not in INTERMEDIATE_OWNER_KINDS:
        return None
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    return (str(ref.get("kind")), namespace, str(ref.get("name", "")))


def node_requests_of(pod: Mapping[str, Any]) -> tuple[int, int]:
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
        self, *, own_namespace: str = "kerf-system", kubex_source: SourceKey | None = None
    ) -> None:
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
        self._cluster_for_ns: dict[str, list[KerfResource]] = {}
        self._workloads: dict[ObjectKey, Workload] = {}
        self._objects: dict[ObjectKey, Mapping[str, Any]] = {}
        self._pods: dict[tuple[str, str], Mapping[str, Any]] = {}
        self._pods_by_node: dict[str, dict[tuple[str, str], tuple[int, int]]] = {}
        self._pods_by_owner: dict[ObjectKey, dict[tuple[str, str], Mapping[str, Any]]] = {}
        #: the resolved owner of every pod of the view (a bare pod has none); resolved when
        #: the pod arrives and again when the ReplicaSet or Job it names changes
        self._pod_owner: dict[tuple[str, str], WorkloadRef] = {}
        #: pods by the intermediate owner (ReplicaSet, Job) their controller reference names
        #: (tuples: a controller has few pods, and the collector stops tracking a tuple of
        #: strings, which keeps full collections of a large view short)
        self._pods_by_controller: dict[ObjectKey, tuple[tuple[str, str], ...]] = {}
        self._allocatable: dict[str, tuple[Mapping[str, Any], tuple[int, int]]] = {}
        #: the largest CPU and memory any node offers, worked out again after a Node
        #: changes (None: not known yet)
        self._largest: tuple[int, int] | None = None
        self._hpas: dict[str, dict[str, Mapping[str, Any]]] = {}
        #: VerticalPodAutoscalers by namespace (an optional input: the CRD is often absent)
        self._vpas: dict[str, dict[str, Mapping[str, Any]]] = {}
        self._sources = RecommendationSources(kubex=self.kubex_source)
        #: plans, the admission memo, input versions, parsed pods (see its docstring)
        self.caches: DecisionCaches[Plan] = DecisionCaches()
        self._node_totals: dict[str, list[int]] = {}
        #: LimitRanges and ResourceQuotas by namespace, and their parsed form (dropped when
        #: one of the namespace's changes)
        self._bound_objects: dict[str, dict[tuple[str, str], Mapping[str, Any]]] = {}
        self._bounds: dict[str, NamespaceBounds] = {}
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
            return (namespace, name) if self.is_recommendation_source(namespace, name) else None
        found = self._kerf.get((kind, namespace, name))
        return found if found is not None else self._objects.get((kind, namespace, name))

    def _ended(self, found: Reach) -> Reach:
        """Give every input version the change ended a new one."""
        for key in found.stamps:
            self.caches.touch(key)
        return found

    def is_recommendation_source(self, namespace: str, name: str) -> bool:
        """Whether the view reads a ConfigMap as a recommendation source."""
        return (namespace, name) == self.kubex_source or self._sources.knows(namespace, name)

    def _apply(self, obj: Mapping[str, Any]) -> None:
        if isinstance(obj, KerfResource):
            self._apply_kerf(obj)
            return
        obj = project(obj)  # only what kerf reads is kept (app/store/slim.py)
        kind, namespace, name = key = object_key(obj)
        if kind in WORKLOAD_KINDS:
            self._workloads[key] = Workload.from_object(obj, owned=True)  # a fresh projection
            self._objects[key] = reference(obj)  # the Workload holds the rest
            self._drop_plan(key)
            if kind in INTERMEDIATE_OWNER_KINDS:
                self._reresolve_owners(key)
        elif kind == "Pod":
            self._remove_pod(namespace, name)
            self._pods[(namespace, name)] = obj
            controller = _intermediate_owner(obj)
            if controller is not None:
                pods = self._pods_by_controller.get(controller, ())
                self._pods_by_controller[controller] = (*pods, (namespace, name))
            self._index_owner((namespace, name), obj)
            node = (obj.get("spec") or {}).get("nodeName")
            if node and (obj.get("status") or {}).get("phase") not in TERMINAL_PHASES:
                try:
                    cpu, memory = node_requests_of(obj)
                except QuantityError as exc:  # the API server refuses these; never crash on one
                    self.warnings.append(f"Pod {namespace}/{name}: {exc}")
                    cpu = memory = 0
                self._pods_by_node.setdefault(node, {})[(namespace, name)] = (cpu, memory)
                totals = self._node_totals.setdefault(node, [0, 0])
                totals[0] += cpu
                totals[1] += memory
        elif kind == "HorizontalPodAutoscaler":
            self._hpas.setdefault(namespace, {})[name] = obj
        elif kind == "VerticalPodAutoscaler":
            self._vpas.setdefault(namespace, {})[name] = obj
        elif kind in BOUND_KINDS:
            self._bound_objects.setdefault(namespace, {})[(kind, name)] = obj
            self._bounds.pop(namespace, None)
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
            self._objects[key] = obj
            if kind == "Node":
                self._largest = None
            if kind == "Namespace":
                self._cluster_for_ns.pop(name, None)
            elif kind in INTERMEDIATE_OWNER_KINDS:
                self._reresolve_owners(key)

    def _delete(self, kind: str, namespace: str, name: str) -> None:
        key = (kind, namespace, name)
        if key in self._kerf:
            self._remove_kerf(key)
        elif kind == "Pod":
            self._remove_pod(namespace, name)
        elif kind == "HorizontalPodAutoscaler":
            self._hpas.get(namespace, {}).pop(name, None)
        elif kind == "VerticalPodAutoscaler":
            self._vpas.get(namespace, {}).pop(name, None)
        elif kind in BOUND_KINDS:
            if self._bound_objects.get(namespace, {}).pop((kind, name), None) is not None:
                self._bounds.pop(namespace, None)
        elif kind == "ConfigMap":
            if self._sources.delete(namespace, name):
                self._drop_plans()
        else:
            self._workloads.pop(key, None)
            if self._objects.pop(key, None) is not None and kind == "Node":
                self._largest = None
            self._drop_plan(key)
            for stamp in workload_stamp_keys(key):
                self.caches.forget_stamp(stamp)
            if kind in INTERMEDIATE_OWNER_KINDS:
                self._reresolve_owners(key)

    def _apply_kerf(self, obj: KerfResource) -> None:
        if isinstance(obj, RightsizingRecommendation):
            obj = stored(obj)  # its status as JSON bytes (app/model/records.py)
        share_field_sets(obj)  # half a record's weight (app/store/slim.py)
        key = (obj.kind, obj.metadata.namespace or "", obj.metadata.name)
        self._remove_kerf(key)
        self._kerf[key] = obj
        self._kerf_changed(key)
        spec = getattr(obj, "spec", None)
        if not type(obj).acted_on or spec is None or not hasattr(spec, "scope"):
            return  # strategies, singletons, recommendations: looked up by key
        if type(obj).cluster_scoped:
            self._cluster_policies[key] = obj
            self._cluster_for_ns.clear()
        else:
            self._ns_policies.setdefault(key[1], {})[key] = obj

    def _remove_kerf(self, key: ObjectKey) -> None:
        if self._kerf.pop(key, None) is None:
            return
        self._cluster_policies.pop(key, None)
        self._ns_policies.get(key[1], {}).pop(key, None)
        self._cluster_for_ns.clear()
        self._kerf_changed(key)

    def _kerf_changed(self, key: ObjectKey) -> None:
        if key[0] in STORED_KINDS:
            return  # kept for the reconciler to tell once; no decision reads them
        if key[0] == "RightsizingRecommendation":
            self._record_changed(key)
            return
        self._drop_plans()
        self.caches.drop_settings()

    def _drop_plan(self, key: ObjectKey) -> None:
        self.caches.drop_plan(key)

    def _drop_plans(self) -> None:
        self.caches.drop_plans()

    def _record_changed(self, key: ObjectKey) -> None:
        """A RightsizingRecommendation came, changed or went: only the plan of the workload
        it is named after reads it (`recommendation_for`); the reconciler writes one per
        change, and dropping every plan for each cost the next pass of every workload a
        rebuilt plan."""
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
            node = (old.get("spec") or {}).get("nodeName")
            usage = self._pods_by_node.get(node, {}).pop((namespace, name), None) if node else None
            if node and usage is not None:
                totals = self._node_totals[node]
                totals[0] -= usage[0]
                totals[1] -= usage[1]

    def _forget_controlled(self, controller: ObjectKey, pod_key: tuple[str, str]) -> None:
        rest = tuple(k for k in self._pods_by_controller.get(controller, ()) if k != pod_key)
        if rest:
            self._pods_by_controller[controller] = rest
        else:  # ReplicaSets come and go with every rollout: drop their entries
            self._pods_by_controller.pop(controller, None)

    def _index_owner(self, pod_key: tuple[str, str], pod: Mapping[str, Any]) -> None:
        owner = resolve_owner(pod, self)
        if owner is not None:
            known = self._workloads.get(owner.key)
            if known is not None:
                owner = known.ref  # one shared identity per workload, not one per pod
            self._pods_by_owner.setdefault(owner.key, {})[pod_key] = pod
            self._pod_owner[pod_key] = owner

    def _unindex_owner(self, pod_key: tuple[str, str]) -> None:
        owner = self._pod_owner.pop(pod_key, None)
        if owner is not None:
            pods = self._pods_by_owner.get(owner.key, {})
            pods.pop(pod_key, None)
            if not pods:
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
        stage = self.reading
        if stage is not None and not any(d in stage[1] for d in declared):
            names = " or ".join(d.name for d in declared)
            raise UndeclaredInput(f"stage {stage[0]} reads {names} and does not declare it")

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """A plain object (ReplicaSet, Job, workload, Node, Namespace …) by key."""
        return self._objects.get((kind, namespace, name))

    def kerf_objects(self, kind: str) -> list[KerfResource]:
        """Every kerf custom resource of a kind."""
        return [obj for (k, _, _), obj in self._kerf.items() if k == kind]

    def kerf_object(self, kind: str, namespace: str, name: str) -> KerfResource | None:
        """A kerf custom resource by key (namespace "" for cluster kinds)."""
        return self._kerf.get((kind, namespace, name))

    def recommendation_sources(self) -> list[SourceState]:
        """The state of every recommendation ConfigMap, ordered by namespace and name."""
        return sorted(self._sources.states(), key=lambda s: s.key)

    @property
    def global_config(self) -> GlobalConfigurationSpec:
        """GlobalConfiguration spec (defaults when the singleton is absent)."""
        if self.check_reads:
            self._read(KERF)
        obj = self._kerf.get(("GlobalConfiguration", "", "global-config"))
        return obj.spec if isinstance(obj, GlobalConfiguration) else DEFAULT_CONFIG

    def policies_for_namespace(self, namespace: str) -> list[KerfResource]:
        """Policies that may match a workload in a namespace (scope not yet checked)."""
        if self.check_reads:
            self._read(KERF)
        cluster = self._cluster_for_ns.get(namespace)
        if cluster is None:
            cluster = [
                p for p in self._cluster_policies.values() if _namespace_admits(p, namespace)
            ]
            if self._known_namespace(namespace):
                self._cluster_for_ns[namespace] = cluster
        return [*self._ns_policies.get(namespace, {}).values(), *cluster]

    def workload(self, ref: WorkloadRef) -> Workload | None:
        """A known workload."""
        return self._workloads.get(ref.key)

    def workloads(self) -> Iterable[Workload]:
        """Every workload in the view."""
        return self._workloads.values()

    def pods(self) -> Iterable[Mapping[str, Any]]:
        """Every pod in the view."""
        return self._pods.values()

    def pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """A pod by namespace and name."""
        return self._pods.get((namespace, name))

    def pods_of(self, ref: WorkloadRef) -> list[Mapping[str, Any]]:
        """The known pods of a workload."""
        if self.check_reads:
            self._read(OOM_EVIDENCE, PODS)
        return list(self._pods_by_owner.get(ref.key, {}).values())

    def namespace_object(self, name: str) -> Mapping[str, Any] | None:
        """A Namespace object."""
        if self.check_reads:
            self._read(NAMESPACE)
        return self._objects.get(("Namespace", "", name))

    def node_allocatable(self, name: str) -> tuple[int, int] | None:
        """(cpu millicores, memory bytes) a node offers, parsed once per Node object."""
        if self.check_reads:
            self._read(NODES)
        node = self._objects.get(("Node", "", name))
        if node is None:
            return None
        cached = self._allocatable.get(name)
        if cached is None or cached[0] is not node:
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            try:
                amounts = (
                    parse_resource("cpu", allocatable.get("cpu", "0")),
                    parse_resource("memory", allocatable.get("memory", "0")),
                )
            except QuantityError as exc:
                self.warnings.append(f"Node {name}: {exc}")
                amounts = (0, 0)
            cached = self._allocatable[name] = (node, amounts)
        return cached[1]

    def largest_allocatable(self) -> tuple[int, int] | None:
        """The largest (cpu millicores, memory bytes) any node offers (each the largest
        over the nodes), or None when the view holds no node."""
        if self.check_reads:
            self._read(NODES)
        if self._largest is None:
            nodes = [n for (k, _, n) in self._objects if k == "Node"]
            amounts = [a for a in map(self.node_allocatable, nodes) if a is not None]
            if not amounts:
                return None
            self._largest = (max(a[0] for a in amounts), max(a[1] for a in amounts))
        return self._largest

    def namespace_bounds(self, namespace: str) -> NamespaceBounds:
        """The namespace's LimitRanges and ResourceQuotas, parsed once per change of any."""
        if self.check_reads:
            self._read(BOUNDS)
        found = self._bounds.get(namespace)
        if found is None:
            found, warnings = parse_bounds(self._bound_objects.get(namespace, {}).values())
            self.warnings.extend(warnings)
            self._bounds[namespace] = found
        return found

    def node_requests(self, node: str) -> tuple[int, int]:
        """Sum of (cpu millicores, memory bytes) requested by non-terminal pods on a node."""
        if self.check_reads:
            self._read(NODE_USAGE)
        cpu, memory = self._node_totals.get(node, (0, 0))
        return cpu, memory

    def hpas_for(self, workload: Workload) -> list[Mapping[str, Any]]:
        """HPAs whose scaleTargetRef is the workload."""
        if self.check_reads:
            self._read(AUTOSCALERS)
        return [
            hpa
            for hpa in self._hpas.get(workload.namespace, {}).values()
            if ((hpa.get("spec") or {}).get("scaleTargetRef") or {}).get("kind") == workload.kind
            and ((hpa.get("spec") or {}).get("scaleTargetRef") or {}).get("name") == workload.name
        ]

    def vpas_for(self, workload: Workload) -> list[Mapping[str, Any]]:
        """VerticalPodAutoscalers whose targetRef is the workload."""
        if self.check_reads:
            self._read(AUTOSCALERS)
        return [
            vpa
            for vpa in self._vpas.get(workload.namespace, {}).values()
            if ((vpa.get("spec") or {}).get("targetRef") or {}).get("kind") == workload.kind
            and ((vpa.get("spec") or {}).get("targetRef") or {}).get("name") == workload.name
        ]

    def rows_for(self, ref: WorkloadRef) -> Mapping[str, RecommendationRow]:
        """The recommendation rows of a workload, by container: without those Kubex holds
        while GlobalConfiguration's `respectKubexAutomation` is on."""
        if self.check_reads:
            self._read(SOURCES)
        respect = self.global_config.respect_kubex_automation
        return self._sources.rows_for(ref.key, respect_kubex=respect)

    def recommendation_for(self, ref: WorkloadRef) -> RightsizingRecommendation | None:
        """The RightsizingRecommendation kerf keeps for a workload."""
        if self.check_reads:
            self._read(RECORD)
        found = self._kerf.get(
            ("RightsizingRecommendation", ref.namespace, record_name(ref.kind, ref.name))
        )
        return found if isinstance(found, RightsizingRecommendation) else None

    def owner_of(self, pod: Mapping[str, Any]) -> WorkloadRef | None:
        """The workload that owns a pod: kept for the pod objects of the view (resolved
        again whenever the ReplicaSet or Job they name changes), resolved for others."""
        key = _pod_key(pod)
        if self._pods.get(key) is pod:
            return self._pod_owner.get(key)
        return resolve_owner(pod, self)

    def recommendation_news(self, ref: WorkloadRef) -> WorkloadSources:
        """What the recommendation ConfigMaps say about a workload beyond its rows: those
        that failed, its skipped rows, the containers Kubex holds."""
        if self.check_reads:
            self._read(SOURCES)
        respect = self.global_config.respect_kubex_automation
        return self._sources.about(ref.key, respect_kubex=respect)

    def _known_namespace(self, namespace: str) -> bool:
        """Whether the view holds this Namespace. Only such names key the per-namespace
        caches: an admission request names any namespace it likes, and must not grow them."""
        return ("Namespace", "", namespace) in self._objects


def _namespace_admits(policy: KerfResource, namespace: str) -> bool:
    scope = getattr(policy.spec, "scope", None)  # type: ignore[attr-defined]
    if scope is None:  # cluster singletons and strategies carry no scope
        return False
    return match_namespace(scope.namespace_selector, namespace)
