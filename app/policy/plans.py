"""Planning a workload's policies, over the view: which policies match it, the values
they give, the settings its kerf objects decide.

A `WorkloadPlan` is what the policy sync yields for one workload, ready for selection.
It is kept by the view's decision caches (`app/store/decision_cache.py`) until one of its
inputs (`app.store.inputs.PLAN_READS`) changes, so its identity versions them: the reconciler's
quiet-pass check and the admission memo rest on that.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from app.model.annotations import recommendation_fingerprint
from app.model.crd import KerfResource, PolicyEvaluation
from app.model.workloads import Workload
from app.policy.guardrails import GuardrailSettings, resolve_guardrails
from app.policy.rollback import rollback_state
from app.policy.selection import (
    ArgsSelection,
    Candidate,
    Target,
    extract_candidates,
    priorities,
    select,
    select_args,
)
from app.policy.sync import PROACTIVE_KINDS, SyncResult, policy_matches, sync_workload
from app.store.inputs import PLAN_READS
from app.store.scope import match_namespace, matches_any_pattern
from app.store.sources import NO_NEWS, WorkloadSources

if TYPE_CHECKING:
    from app.store.view import ClusterView

T = TypeVar("T")

#: container-name sets a plan keeps selections and facts for; pods of one workload share
#: one or two (a skip-containers annotation makes another)
MAX_NAME_SETS = 8
#: Kinds whose annotations derive from the policy alone (and the workload's containers):
#: the workloads one of them matches share their plans' parts (`_Parts`). The values of
#: the other kinds come from each workload's recommendation rows, rollback or GPU metrics,
#: and each new version of those would make new parts, shared with no other workload.
SHARED_KINDS = frozenset({"StaticPolicy", "ClusterStaticPolicy", "ContainerArgsPolicy"})
#: How many distinct policy syncs the plans share the parts of, the most recently used.
SHARED_PARTS = 2048


@dataclass(frozen=True, slots=True)
class _Parts:
    """What a plan derives from its policy sync alone: equal for every workload whose sync
    is (the same annotations, from the same policies), so such plans share one (~1.5 KB:
    the annotations, their policies, the candidates)."""

    sync: SyncResult
    candidates: list[Candidate]
    args: ArgsSelection | None
    fingerprint: str
    warnings: list[str]


@dataclass(frozen=True, slots=True)
class WorkloadPlan:
    """What the policy sync yields for one workload, ready for selection."""

    sync: SyncResult
    candidates: list[Candidate]
    args: ArgsSelection | None
    fingerprint: str = ""
    warnings: list[str] = field(default_factory=list)
    #: failed recommendation ConfigMaps that feed the workload, its skipped rows and the
    #: containers Kubex holds (only while a proactive policy matches it: other workloads
    #: take no values from them)
    sources: WorkloadSources = NO_NEWS
    #: selections by the tuple of container names (pods of a workload share them)
    selections: dict[tuple[str, ...], dict[Target, Candidate]] = field(default_factory=dict)
    #: what decisions derive from this plan alone (valid as long as the plan is)
    memo: dict[Any, Any] = field(default_factory=dict)

    def select_for(self, containers: tuple[str, ...]) -> dict[Target, Candidate]:
        """The selection for these containers, computed once per workload and names (for
        the first `MAX_NAME_SETS` sets of names: the names come from the pod, and a pod
        sent to the webhook can name its containers anything)."""
        found = self.selections.get(containers)
        if found is None:
            found = select(self.candidates, containers)
            if len(self.selections) < MAX_NAME_SETS:
                self.selections[containers] = found
        return found


def plan_for(view: ClusterView, workload: Workload) -> WorkloadPlan:
    """The policy sync result and candidates of a workload, kept by the view's decision
    caches until one of its inputs changes (a workload the view does not hold, stood in
    for by its pod's labels, gets a plan of its own each time)."""
    return read_as_plan(view, lambda: _plan_for(view, workload))


def read_as_plan(view: ClusterView, build: Callable[[], T]) -> T:
    """`build`, which derives what a plan keeps (the plan, its facts), reading only what
    the plan declares (`PLAN_READS`) while the view checks reads."""
    if not view.check_reads:
        return build()
    reading, view.reading = view.reading, ("plan", PLAN_READS)
    try:
        return build()
    finally:
        view.reading = reading


def _plan_for(view: ClusterView, workload: Workload) -> WorkloadPlan:
    caches = view.caches
    key = workload.ref.key
    held = view.workload(workload.ref)
    # the view's caches hold only what this function keeps in them
    cached = cast("WorkloadPlan | None", caches.plan(key))
    if cached is not None and (held is None or held is workload):
        caches.use_plan(key, cached)
        return cached
    config = view.global_config
    sync = sync_workload(
        workload,
        policies_for(view, workload),
        view.recommendations("rows", workload.ref),
        rollback_state(view, workload),
        multi_policy=config.multi_policy_container_rightsizing_enabled,
    )
    shared = held is not None and all(p.kind in SHARED_KINDS for p in sync.sources.values())
    parts = _shared_parts(view, sync) if shared else _parts(view, sync)
    plan = WorkloadPlan(
        parts.sync,
        parts.candidates,
        parts.args,
        parts.fingerprint,
        parts.warnings,
        _sources_about(view, workload),
    )
    if held is not None:
        caches.keep_plan(key, plan)
    return plan


def _parts(view: ClusterView, sync: SyncResult) -> _Parts:
    candidates, warnings = extract_candidates(
        sync.annotations, sync.sources, policy_priorities(view)
    )
    args, args_warnings = select_args(sync.annotations, sync.sources)
    fingerprint = recommendation_fingerprint(sync.annotations)
    return _Parts(sync, candidates, args, fingerprint, [*warnings, *args_warnings])


def _shared_parts(view: ClusterView, sync: SyncResult) -> _Parts:
    """The parts of an equal sync met before, else this one's, kept until a kerf object
    changes (the policies and priorities they derive from)."""
    table: OrderedDict[Any, _Parts] | None = view.caches.setting(("plan-parts",))
    if table is None:
        table = OrderedDict()
        view.caches.keep_setting(("plan-parts",), table)
    # The policies by name: the table is dropped when any of them changes.
    key = (
        tuple(sync.annotations.items()),
        tuple((k, p.kind, p.metadata.namespace, p.metadata.name) for k, p in sync.sources.items()),
    )
    found = table.get(key)
    if found is not None:
        table.move_to_end(key)
        return found
    found = table[key] = _parts(view, sync)
    if len(table) > SHARED_PARTS:
        table.popitem(last=False)
    return found


def _sources_about(view: ClusterView, workload: Workload) -> WorkloadSources:
    """What the recommendation ConfigMaps say about a workload that a proactive policy
    matches (the others take no values from them)."""
    news = view.recommendations("news", workload.ref)
    if news is NO_NEWS:
        return news
    for policy in policies_for(view, workload):
        if policy.kind in PROACTIVE_KINDS and policy_matches(policy, workload):
            return news
    return NO_NEWS


def policies_for(view: ClusterView, workload: Workload) -> list[KerfResource]:
    """Policies that may match a workload (scope not yet checked): the namespaced
    policies of its namespace and the cluster policies whose namespace selector admits
    that name (found once per namespace of a workload the view holds, until a kerf
    object changes: a stand-in workload's namespace is any name a pod sends)."""
    namespace = workload.namespace
    cluster: list[KerfResource] | None = view.caches.setting(("cluster-policies", namespace))
    if cluster is None:
        cluster = [p for p in view.policies(None) if _namespace_admits(p, namespace)]
        if view.workload(workload.ref) is not None:
            view.caches.keep_setting(("cluster-policies", namespace), cluster)
    return [*view.policies(namespace), *cluster]


def _namespace_admits(policy: KerfResource, namespace: str) -> bool:
    scope = getattr(policy.spec, "scope", None)  # type: ignore[attr-defined]
    if scope is None:  # cluster singletons and strategies carry no scope
        return False
    return match_namespace(scope.namespace_selector, namespace)


def policy_priorities(view: ClusterView) -> dict[str, int]:
    """Policy-type priorities from PolicyEvaluation (defaults when absent), kept until a
    kerf object changes."""
    found: dict[str, int] | None = view.caches.setting(("priorities",))
    if found is None:
        obj = view.kerf_object("PolicyEvaluation", "", "policy-evaluation")
        found = priorities(obj if isinstance(obj, PolicyEvaluation) else None)
        view.caches.keep_setting(("priorities",), found)
    return found


def guardrails(view: ClusterView, policy: KerfResource | None) -> GuardrailSettings:
    """A policy's guardrails with every layer merged, kept until a kerf object changes."""
    config = view.global_config  # read first: a stage that reads settings declares KERF
    key = (policy.kind, policy.metadata.namespace or "", policy.metadata.name) if policy else None
    settings: GuardrailSettings | None = view.caches.setting(("guardrails", key))
    if settings is None:
        own = getattr(getattr(policy, "spec", None), "guardrails", None)
        settings = resolve_guardrails(config.guardrail_defaults, own)
        view.caches.keep_setting(("guardrails", key), settings)
    return settings


def protected_by_pattern(view: ClusterView, workload: Workload) -> bool:
    """Whether GlobalConfiguration.protectedNamespacePatterns names a workload's
    namespace, kept per namespace of a workload the view holds (a stand-in workload's
    namespace is any name a pod sends) until a kerf object changes."""
    config = view.global_config  # read first: a stage that reads settings declares KERF
    namespace = workload.namespace
    found: bool | None = view.caches.setting(("protected", namespace))
    if found is None:
        found = matches_any_pattern(config.protected_namespace_patterns, namespace)
        if view.workload(workload.ref) is not None:
            view.caches.keep_setting(("protected", namespace), found)
    return found
