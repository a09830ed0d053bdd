"""Values past the namespace's LimitRanges or ResourceQuotas: the API server would refuse
the pod (admission) or the resize (running), so they are dropped, never written."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from app.decide.context import PASS, Action, Context, Result, final_resources, stop
from app.decide.results import Filtered
from app.model.kube_types import PodDict
from app.model.workloads import Resources
from app.store.inputs import BOUNDS, check_read
from app.store.namespace_bounds import (
    Breach,
    NamespaceBounds,
    limit_range_breaches,
    parse_bounds,
    pod_shape,
    quota_breaches,
)
from app.store.view import ClusterView

LIMIT_RANGE_VIOLATION = "LimitRangeViolation"
RESOURCE_QUOTA_EXCEEDED = "ResourceQuotaExceeded"

#: the breaches of a pod with these resources
Judge = Callable[[Mapping[str, Resources]], list[Breach]]


def filter_limit_ranges(ctx: Context) -> Result:
    """LimitRangeViolation: drop the changes that take a container or the pod past a
    LimitRange's min, max or limit-to-request ratio."""
    ranges = _bounds(ctx).limit_ranges
    if not ranges or not ctx.actions:
        return PASS
    containers = ctx.check_on("enable_limit_range_filter")
    pod = ctx.check_on("enable_pod_limit_range_filter")
    if not (containers or pod):
        return PASS

    def judge(resources: Mapping[str, Resources]) -> list[Breach]:
        shape = pod_shape(ctx.pod, resources)
        return limit_range_breaches(ranges, shape, containers=containers, pod=pod)

    return _drop_breaches(ctx, LIMIT_RANGE_VIOLATION, judge)


def filter_quotas(ctx: Context) -> Result:
    """ResourceQuotaExceeded: drop the increases that take the namespace past a quota
    that applies to the pod (its scopes hold), counting what is already used."""
    quotas = _bounds(ctx).quotas
    if not quotas or not ctx.check_on("enable_resource_quota_filter") or not ctx.actions:
        return PASS
    base = pod_shape(ctx.pod, ctx.current)

    def judge(resources: Mapping[str, Resources]) -> list[Breach]:
        final = pod_shape(ctx.pod, resources)
        return quota_breaches(quotas, base, final, charged=ctx.running)

    return _drop_breaches(ctx, RESOURCE_QUOTA_EXCEEDED, judge)


def namespace_bounds(view: ClusterView, namespace: str) -> NamespaceBounds:
    """The namespace's LimitRanges and ResourceQuotas, parsed once per version of them
    (kept by the view's decision caches; a namespace with none keeps nothing, so a
    request naming any namespace it likes grows nothing)."""
    if view.check_reads:
        check_read(view.reading, BOUNDS)
    stamp = (BOUNDS.name, namespace)
    found: NamespaceBounds | None = view.caches.derived(stamp, ())
    if found is None:
        limit_ranges = view.objects("LimitRange", namespace)
        quotas = view.objects("ResourceQuota", namespace)
        found, warnings = parse_bounds(limit_ranges, quotas)
        view.warnings.extend(warnings)
        if limit_ranges or quotas:
            view.caches.keep_derived(stamp, (), found)
    return found


def _bounds(ctx: Context) -> NamespaceBounds:
    return namespace_bounds(ctx.view, ctx.workload.namespace)


def _drop_breaches(ctx: Context, reason: str, judge: Judge) -> Result:
    """Drop the changes behind each breach the pod's own values do not have, until none
    is left; a bound the pod already goes past is not kerf's to mend."""
    known = {b.key for b in judge(ctx.current)}
    breaches = [b for b in judge(ctx.final()) if b.key not in known]
    if not breaches:
        return PASS  # the common case: the values stand as they are
    actions = ctx.actions
    filtered: list[Filtered] = []
    told: list[str] = []
    while breaches:
        behind = _actions_behind(ctx, actions, breaches)
        filtered.extend(Filtered(a.target, reason, _why(a, breaches)) for a in behind)
        actions = [a for a in actions if a not in behind]
        told.extend(b.message for b in breaches if b.message not in told)
        if not actions:
            break
        final = final_resources(ctx.current, actions)
        breaches = [b for b in judge(final) if b.key not in known]
    dropped = tuple((f.target, reason) for f in filtered)
    held = None if actions else stop(reason, "; ".join(told))
    return Result(actions, dropped, tuple(filtered), block=held)


def _why(action: Action, breaches: list[Breach]) -> str:
    """The bound an action was dropped for: one that counts its field, its container's
    own before the pod's."""
    t = action.target
    named = [b for b in breaches if b.resource == t.resource]
    counted = [b for b in named if t.field in _fields_of(b.bound)] or named
    mine = [b for b in counted if b.container == t.container] or counted or breaches
    return mine[0].message


def _actions_behind(ctx: Context, actions: list[Action], breaches: list[Breach]) -> list[Action]:
    """The actions that make the breaches: every change of a container's resource the
    bound names (its request and limit go together, so neither outgrows the other),
    for the pod's totals those that move the way the bound forbids. When none can be
    named, all of them: a value the API server refuses is never written."""
    pairs: set[tuple[str, str]] = set()
    for breach in breaches:
        for action in actions:
            t = action.target
            if t.resource != breach.resource:
                continue
            if breach.container is not None:
                if t.container == breach.container:
                    pairs.add((t.container, t.resource))
            elif t.field in _fields_of(breach.bound) and _moves(ctx, action, breach.direction):
                pairs.add((t.container, t.resource))
    behind = [a for a in actions if (a.target.container, a.target.resource) in pairs]
    return behind or list(actions)


def _fields_of(bound: str) -> tuple[str, ...]:
    """The fields a pod-wide bound counts: a LimitRange's min, max and ratio both, a
    quota's `limits.*` the limits, its `requests.*` and plain names the requests."""
    if bound in ("min", "max", "ratio"):
        return ("requests", "limits")
    return ("limits",) if bound.startswith("limits.") else ("requests",)


def _moves(ctx: Context, action: Action, direction: str) -> bool:
    t = action.target
    own = ctx.current[t.container][t.field].get(t.resource)
    if direction == "up":
        return own is None or action.desired > own
    if direction == "down":
        return own is not None and action.desired < own
    return True


def breaches_bounds(
    view: ClusterView,
    pod: PodDict,
    namespace: str,
    current: Mapping[str, Resources],
    proposed: Mapping[str, Resources],
) -> bool:
    """Whether values a pod is to be admitted with go past a bound its manifest's values
    do not (every filter on): checked where values reach a new pod without the
    filters, as a blocked change's baseline does."""
    bounds = namespace_bounds(view, namespace)
    if not (bounds.limit_ranges or bounds.quotas):
        return False

    def judge(resources: Mapping[str, Resources]) -> set[tuple[str, str | None, str, str]]:
        shape = pod_shape(pod, resources)
        found = limit_range_breaches(bounds.limit_ranges, shape, containers=True, pod=True)
        found += quota_breaches(bounds.quotas, pod_shape(pod, current), shape, charged=False)
        return {b.key for b in found}

    return bool(judge(proposed) - judge(current))
