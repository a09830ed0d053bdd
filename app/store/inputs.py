"""What a decision reads, declared once: the inputs, and what is derived from them.

Each decision stage names the inputs it reads (`app/decide/checks.py` `Check.reads`,
`PLAN_READS` for the policy plan, `OWNER_READS` for the pod's owner); each input is one
`Input` here: the kinds, which objects of them (`Which`), the paths that read it and
which changes of those objects matter. Three things follow from these declarations and
are never listed anywhere else:

- **the admission memo's validity** (`admission_versions`): one version per input the
  admission path reads beyond its plan;
- **the reconciler's quiet-pass check** (`running_inputs`): the objects and versions a
  running-path decision of a workload reads; equal (by identity) means it would decide
  the same;
- **the requeue routing** (`reach`): which workloads a change of an object may touch,
  and which input versions it ends;
- **what a record change invalidates** (`RECORD_FIELDS`, `record_matters`): the fields
  of a RightsizingRecommendation the decisions read; a change of no other keeps the
  workload's plan (the reconciler's own status write is not news to its decisions).

A stage that reads an input it does not declare fails: `ClusterView` checks every read
of an input against the stage being decided while `ClusterView.check_reads` is on
(tests turn it on), and raises `UndeclaredInput`; so does a decision that reads a field
of the record `RECORD_FIELDS` does not declare (`DeclaredRecord`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, Protocol

from app.model.annotations import APPROVE, APPROVE_TARGET
from app.model.crd import ACTED_ON_KINDS
from app.model.kube_types import PodDict, as_pod
from app.model.owners import WorkloadRef
from app.model.records import record_targets
from app.model.workloads import WORKLOAD_KINDS, oom_terminations
from app.store.namespace_bounds import BOUND_KINDS

Path = Literal["admission", "running"]
BOTH: frozenset[Path] = frozenset({"admission", "running"})
ADMISSION: frozenset[Path] = frozenset({"admission"})
RUNNING: frozenset[Path] = frozenset({"running"})

WorkloadKey = tuple[str, str, str]
#: (input name, the workload key, the namespace or () it is kept for)
StampKey = tuple[str, Any]
Obj = Mapping[str, Any]

#: the target reference of each kind that names a workload it acts on
TARGET_REFS = {"HorizontalPodAutoscaler": "scaleTargetRef", "VerticalPodAutoscaler": "targetRef"}


class Which(Enum):
    """Which objects of its kinds an input is, relative to the workload decided."""

    WORKLOAD = "the workload itself"
    RECORD = "the RightsizingRecommendation named after the workload"
    EVERY = "every object of the kind"
    SOURCES = "the recommendation ConfigMaps (labelled, or Kubex's)"
    NAMESPACE = "the Namespace the workload is in"
    NAMESPACED = "every object of the kind in the workload's namespace"
    TARGETING = "the objects of the kind whose target reference names the workload"
    PODS = "the workload's pods"
    NODE = "the decided pod's node and the pods on it"
    CONTROLLERS = "the ReplicaSet or Job a pod's controller reference names"


@dataclass(frozen=True, slots=True)
class Input:
    """One input of the decisions: its kinds, which objects of them, the paths that read
    it, and which changes of those objects matter."""

    name: str
    kinds: frozenset[str]
    which: Which
    paths: frozenset[Path] = BOTH
    #: whether a change (the object before, after; None when absent) is one the
    #: decisions see (None: every change is)
    matters: Callable[[Obj | None, Obj | None], bool] | None = None
    #: why a change of it is not watched (None: watched); the reconciler then reads it
    #: afresh at the workload's steady horizon
    unwatched: str | None = None


def _oom_evidence(pod: Obj | None) -> bool:
    return pod is not None and next(oom_terminations(as_pod(pod)), None) is not None


def _allocatable(node: Obj | None) -> Any:
    return None if node is None else (node.get("status") or {}).get("allocatable")


WORKLOAD = Input("workload", frozenset(WORKLOAD_KINDS), Which.WORKLOAD)
#: every change queues the workload (its pass reports the whole status); only those of
#: `RECORD_FIELDS` drop its plan (`ClusterView`)
RECORD = Input("record", frozenset({"RightsizingRecommendation"}), Which.RECORD)
KERF = Input(
    "kerf-objects",
    frozenset(k for k in ACTED_ON_KINDS if k != "RightsizingRecommendation"),
    Which.EVERY,
)
SOURCES = Input("recommendation-sources", frozenset({"ConfigMap"}), Which.SOURCES)
NAMESPACE = Input("namespace", frozenset({"Namespace"}), Which.NAMESPACE)
BOUNDS = Input("namespace-bounds", frozenset(BOUND_KINDS), Which.NAMESPACED)
AUTOSCALERS = Input("autoscalers", frozenset(TARGET_REFS), Which.TARGETING)
#: a new pod has no status yet: its OOM evidence is its siblings'
OOM_EVIDENCE = Input(
    "oom-evidence",
    frozenset({"Pod"}),
    Which.PODS,
    ADMISSION,
    matters=lambda old, new: _oom_evidence(old) or _oom_evidence(new),
)
PODS = Input("pods", frozenset({"Pod"}), Which.PODS, RUNNING)
NODES = Input(
    "node-allocatable",
    frozenset({"Node"}),
    Which.EVERY,
    # a node that comes or goes changes the largest, even one with no allocatable yet
    matters=lambda old, new: old is None or new is None or _allocatable(old) != _allocatable(new),
)
NODE_USAGE = Input(
    "node-usage",
    frozenset({"Pod"}),
    Which.NODE,
    RUNNING,
    unwatched="every pod event of a node would queue every workload on it; room freed by "
    "another workload's pod is found at the steady horizon",
)
CONTROLLERS = Input(
    "controllers",
    frozenset({"ReplicaSet", "Job"}),
    Which.CONTROLLERS,
    unwatched="a controller that moves its pods to another workload is followed by the "
    "pods' own events (the view resolves their owners again)",
)

#: every input of the decisions
INPUTS: tuple[Input, ...] = (
    WORKLOAD,
    RECORD,
    KERF,
    SOURCES,
    NAMESPACE,
    BOUNDS,
    AUTOSCALERS,
    OOM_EVIDENCE,
    PODS,
    NODES,
    NODE_USAGE,
    CONTROLLERS,
)
#: what the policy plan of a workload reads (`ClusterView.plan_for`, the plan facts): the
#: view drops the plan when any of them changes (the record: a field of `RECORD_FIELDS`),
#: so a plan's identity versions them
PLAN_READS: tuple[Input, ...] = (WORKLOAD, RECORD, KERF, SOURCES)
#: what resolving a pod's workload reads
OWNER_READS: tuple[Input, ...] = (WORKLOAD, CONTROLLERS)


class UndeclaredInput(Exception):
    """A stage read an input it does not declare."""


def check_read(reading: tuple[str, tuple[Input, ...]] | None, *declared: Input) -> None:
    """A stage (`reading`: its name and declared inputs, None when no stage is being
    decided) reads an input (any of `declared`): it must declare it."""
    if reading is not None and not any(d in reading[1] for d in declared):
        names = " or ".join(d.name for d in declared)
        raise UndeclaredInput(f"stage {reading[0]} reads {names} and does not declare it")


#: What the decisions read of a workload's RightsizingRecommendation, as attribute paths
#: (annotations by key): the plan facts (the last applied change and rollback), audit
#: (the approval annotations, the proposal an approval was used for), the rollback
#: monitor (the last applied change) and the pass's plan (the eviction recorded and not
#: reported). A record without them reads as no record. `DeclaredRecord` checks the reads
#: of the decision stages and the plan facts.
RECORD_FIELDS: tuple[tuple[str, ...], ...] = (
    ("metadata", "annotations", APPROVE),
    ("metadata", "annotations", APPROVE_TARGET),
    ("status", "last_applied"),
    ("status", "last_rollback"),
    ("status", "approved_proposal"),
    ("status", "pending_eviction"),
)


def _field(obj: Any, path: tuple[str, ...]) -> Any:
    for step in path:
        if obj is None:
            return None
        obj = obj.get(step) if isinstance(obj, Mapping) else getattr(obj, step, None)
    return obj


def _declared(record: Any) -> tuple[Any, ...]:
    """The values of `RECORD_FIELDS` in a record (None: absent), its status read once (the
    view's records parse it when read)."""
    if record is None:
        return (None,) * len(RECORD_FIELDS)
    parts: dict[str, Any] = {}
    for head, *_ in RECORD_FIELDS:
        if head not in parts:
            parts[head] = getattr(record, head, None)
    return tuple([_field(parts[path[0]], path[1:]) for path in RECORD_FIELDS])


def record_matters(old: Any, new: Any) -> bool:
    """Whether a change of a record (None: absent) changes a field the decisions read:
    the workload's plan, whose facts read them, is kept otherwise."""
    return _declared(old) != _declared(new)


class DeclaredRecord:
    """A record as a decision reads it while reads are checked (`ClusterView.check_reads`):
    reading a field `RECORD_FIELDS` does not declare raises `UndeclaredInput`, since a
    change of it would keep the plan whose decisions read it."""

    __slots__ = ("_obj", "_path")

    def __init__(self, obj: Any, path: tuple[str, ...] = ()) -> None:
        self._obj = obj
        self._path = path

    def __getattr__(self, name: str) -> Any:
        return self._read(name, getattr(self._obj, name))

    def get(self, key: str, default: Any = None) -> Any:
        """A key of a mapping field (the annotations)."""
        return self._read(key, self._obj.get(key, default))

    def __bool__(self) -> bool:
        return bool(self._obj)

    def _read(self, name: str, value: Any) -> Any:
        path = (*self._path, name)
        if not any(f[: len(path)] == path for f in RECORD_FIELDS):
            raise UndeclaredInput(
                f"a decision reads the record's {'.'.join(path)}, which RECORD_FIELDS does "
                "not declare"
            )
        if path in RECORD_FIELDS or value is None:
            return value
        if isinstance(value, Mapping):
            return _DeclaredMap(value, path)
        return DeclaredRecord(value, path)


class _DeclaredMap(dict[str, Any]):
    """A mapping field of the record (the annotations) as a checked decision reads it: a
    dict, as the compiled decision stages require of it, whose keys are checked as
    `DeclaredRecord` checks fields (compiled code reads a dict's items directly; the
    pure build, which the tests also run, checks them)."""

    def __init__(self, value: Mapping[str, Any], path: tuple[str, ...]) -> None:
        super().__init__(value)
        self._path = path

    def get(self, key: str, default: Any = None) -> Any:
        """The value of a declared key."""
        self._check(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def _check(self, key: str) -> None:
        if (*self._path, key) not in RECORD_FIELDS:
            raise UndeclaredInput(
                f"a decision reads the record's {'.'.join(self._path)}[{key}], which "
                "RECORD_FIELDS does not declare"
            )


@dataclass(frozen=True, slots=True)
class Reach:
    """What a change of one object may touch: every workload, those of some namespaces,
    some workloads; and the input versions it ends."""

    every: bool = False
    namespaces: frozenset[str] = frozenset()
    workloads: frozenset[WorkloadKey] = frozenset()
    stamps: frozenset[StampKey] = frozenset()

    def __or__(self, other: Reach) -> Reach:
        return Reach(
            self.every or other.every,
            self.namespaces | other.namespaces,
            self.workloads | other.workloads,
            self.stamps | other.stamps,
        )


NO_REACH = Reach()


class Lookup(Protocol):
    """What `reach` needs of the view."""

    def owner_of(self, pod: PodDict) -> WorkloadRef | None: ...

    def recommendations(self, ask: Literal["is-source"], of: tuple[str, str]) -> bool: ...


def target_of(obj: Obj) -> WorkloadKey | None:
    """The workload an object's target reference names (HPA, VPA)."""
    ref = (obj.get("spec") or {}).get(TARGET_REFS.get(str(obj.get("kind")), "")) or {}
    meta = obj.get("metadata") or {}
    if not ref.get("kind") or not ref.get("name"):
        return None
    return (str(ref["kind"]), str(meta.get("namespace") or ""), str(ref["name"]))


_WATCHED_BY_KIND: dict[str, tuple[Input, ...]] = {}
for _input in INPUTS:
    if _input.unwatched is None:
        for _kind in _input.kinds:
            _WATCHED_BY_KIND[_kind] = (*_WATCHED_BY_KIND.get(_kind, ()), _input)


def reach(
    lookup: Lookup,
    kind: str,
    namespace: str,
    name: str,
    old: Obj | None,
    new: Obj | None,
    *,
    of: Obj | None,
    before: bool = False,
) -> Reach:
    """What a change of one object may touch, from the watched inputs of its kind: `old`
    and `new` are the object before and after (None when absent) and tell whether the
    change matters; the workloads are found from `of`, one of them, against the view as
    it is. The view asks after the change for the new object, and (`before`) before it
    for the old one: then only the inputs whose workloads depend on the object."""
    found = NO_REACH
    for declared in _WATCHED_BY_KIND.get(kind, ()):
        if before and declared.which not in _OF_THE_OBJECT:
            continue
        if declared.matters is not None and not declared.matters(old, new):
            continue
        found = found | _reach_of(declared, lookup, kind, namespace, name, of)
    return found


#: the inputs whose workloads a change reaches depend on the object's own content (or on
#: whether the view reads it at all), not on its key alone
_OF_THE_OBJECT = frozenset({Which.TARGETING, Which.PODS, Which.SOURCES})


def _reach_of(
    declared: Input, lookup: Lookup, kind: str, namespace: str, name: str, of: Obj | None
) -> Reach:
    which = declared.which
    if which is Which.WORKLOAD:
        return Reach(workloads=frozenset({(kind, namespace, name)}))
    if which is Which.RECORD:
        return Reach(workloads=frozenset(record_targets(namespace, name)))
    if which is Which.EVERY:
        return Reach(every=True, stamps=_stamps(declared, ()))
    if which is Which.SOURCES:
        return Reach(every=lookup.recommendations("is-source", (namespace, name)))
    if which in (Which.NAMESPACE, Which.NAMESPACED):
        scope = name if which is Which.NAMESPACE else namespace
        return Reach(namespaces=frozenset({scope}), stamps=_stamps(declared, scope))
    if which is Which.TARGETING:
        target = target_of(of) if of is not None else None
        if target is None:
            return NO_REACH
        return Reach(workloads=frozenset({target}), stamps=_stamps(declared, target))
    if which is Which.PODS:
        owner = lookup.owner_of(as_pod(of)) if of is not None else None
        if owner is None:
            return NO_REACH
        return Reach(workloads=frozenset({owner.key}), stamps=_stamps(declared, owner.key))
    raise AssertionError(f"{declared.name} is not watched")  # NODE, CONTROLLERS


def _versioned(declared: Input) -> bool:
    """Whether an input has versions of its own: not when the plan versions it
    (`PLAN_READS`), nor the workload's pods, which a pass compares themselves."""
    return declared not in PLAN_READS and declared.unwatched is None and declared is not PODS


def _stamps(declared: Input, scope: Any) -> frozenset[StampKey]:
    return frozenset({(declared.name, scope)}) if _versioned(declared) else frozenset()


def _scope(which: Which) -> str:
    """What an input's version is kept per: the cluster, the namespace or the workload."""
    if which is Which.EVERY:
        return "cluster"
    if which in (Which.NAMESPACE, Which.NAMESPACED):
        return "namespace"
    return "workload"  # TARGETING, PODS


def _stamp_keys(path: Path) -> Callable[[WorkloadRef], tuple[StampKey, ...]]:
    """The keys of the versions a path reads for a workload (built on the admission path
    for every pod: one comprehension over the declared inputs)."""
    declared = [(i.name, _scope(i.which)) for i in INPUTS if path in i.paths and _versioned(i)]

    def keys(workload: WorkloadRef) -> tuple[StampKey, ...]:
        scopes = {"cluster": (), "namespace": workload.namespace, "workload": workload.key}
        return tuple([(name, scopes[scope]) for name, scope in declared])

    return keys


def workload_stamp_keys(workload: WorkloadKey) -> list[StampKey]:
    """The version keys kept for one workload (dropped when it goes)."""
    return [
        (i.name, workload)
        for i in INPUTS
        if _versioned(i) and i.which in (Which.TARGETING, Which.PODS)
    ]


class Versions(Protocol):
    """What the derived versions read of the view."""

    def stamps(self, keys: tuple[StampKey, ...]) -> tuple[object, ...]: ...


class RunningView(Protocol):
    """What `running_inputs` reads of the view."""

    @property
    def caches(self) -> Versions: ...

    def get(self, kind: str, namespace: str, name: str) -> Obj | None: ...

    def pods(self, owner: WorkloadRef) -> list[PodDict]: ...


_ADMISSION_KEYS = _stamp_keys("admission")
_RUNNING_KEYS = _stamp_keys("running")


def admission_versions(versions: Versions, workload: WorkloadRef) -> tuple[object, ...]:
    """The versions of what an admission decision for a workload's pod reads beyond its
    plan and the pod (a memoised answer lives in its plan, keyed by the pod template),
    from the view's decision caches. Equal (identical) versions mean equal inputs."""
    return versions.stamps(_ADMISSION_KEYS(workload))


def running_inputs(view: RunningView, workload: WorkloadRef, plan: object) -> tuple[object, ...]:
    """What a running-path pass over a workload reads: the workload object and its plan
    (which versions the record, the kerf objects and the recommendation sources), the
    versions of the other watched inputs, and the pods. A pass over identical inputs
    decides the same."""
    obj = view.get(*workload.key)
    pods: Iterable[Obj] = view.pods(workload) if "running" in PODS.paths else ()
    return (obj, plan, *view.caches.stamps(_RUNNING_KEYS(workload)), *pods)


def same_inputs(before: tuple[object, ...], now: tuple[object, ...]) -> bool:
    """Whether two `running_inputs` are of the same objects and versions."""
    return len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True))
