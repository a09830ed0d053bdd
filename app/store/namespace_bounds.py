"""A namespace's LimitRanges and ResourceQuotas, judged the way the API server's
LimitRanger and ResourceQuota admission judge a pod create or a `pods/resize`.

A value past one of them is refused by the API server: at admission every pod of the
workload is, so its controller can never create one. The decision drops such values
(`app/decide/bounds.py`); this module only says which bounds a pod's values go past.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from app.model.kube_types import LimitRangeDict, PodDict, ResourceQuotaDict
from app.model.quantities import QuantityError, format_resource, parse_quantity, parse_resource
from app.model.workloads import Resources, is_sidecar, resources_of

#: the bounds of a LimitRange item kerf reads
_MIN_MAX: tuple[Literal["min"], Literal["max"]] = ("min", "max")
#: the kinds a namespace bounds its pods with
BOUND_KINDS = ("LimitRange", "ResourceQuota")

Amounts = dict[str, int]
Role = Literal["app", "sidecar", "init"]
#: which way a value must not move to stay inside a bound
Direction = Literal["up", "down", "both"]

#: resources pod-level `spec.resources` may set (the PodLevelResources feature)
_POD_LEVEL = ("cpu", "memory")
#: resources the quota charges by their own name, as requests.<name> and limits.<name>
_QUOTA_STANDARD = ("cpu", "memory", "ephemeral-storage")


@dataclass(frozen=True, slots=True)
class LimitItem:
    """One entry of a LimitRange's `spec.limits` for pods or containers."""

    type: Literal["Container", "Pod"]
    min: Amounts
    max: Amounts
    #: maxLimitRequestRatio, exact
    ratio: dict[str, Fraction]


@dataclass(frozen=True, slots=True)
class LimitRangeBounds:
    namespace: str
    name: str
    items: tuple[LimitItem, ...]


@dataclass(frozen=True, slots=True)
class ScopeRequirement:
    scope: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class QuotaBounds:
    namespace: str
    name: str
    #: by quota resource name (`requests.cpu`, `limits.memory`, `cpu` …), in kerf's units
    hard: Amounts
    used: Amounts
    scopes: tuple[ScopeRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PodShape:
    """What the two admission plugins read of a pod: every container's resources in the
    pod's order, and the pod-level facts quota scopes match on."""

    containers: tuple[tuple[str, Role, Resources], ...]
    pod_level: Resources = field(default_factory=lambda: {"requests": {}, "limits": {}})
    overhead: Amounts = field(default_factory=dict)
    terminating: bool = False
    priority_class: str = ""
    cross_namespace_affinity: bool = False


@dataclass(frozen=True, slots=True)
class Breach:
    """One bound a pod's values go past."""

    #: `LimitRange ns/name` or `ResourceQuota ns/name`
    source: str
    #: the container the bound holds for; None for the pod as a whole
    container: str | None
    resource: str
    #: quota resource name (`requests.cpu` …) or the LimitRange field (`min`, `max`, `ratio`)
    bound: str
    direction: Direction
    message: str

    @property
    def key(self) -> tuple[str, str | None, str, str]:
        return (self.source, self.container, self.resource, self.bound)


@dataclass(frozen=True, slots=True)
class NamespaceBounds:
    limit_ranges: tuple[LimitRangeBounds, ...] = ()
    quotas: tuple[QuotaBounds, ...] = ()


def parse_bounds(
    limit_ranges: Iterable[LimitRangeDict], quotas: Iterable[ResourceQuotaDict]
) -> tuple[NamespaceBounds, list[str]]:
    """A namespace's LimitRanges and ResourceQuotas, each in name order, and what did not
    parse (in name order over both)."""
    parsed: list[tuple[str, LimitRangeBounds | QuotaBounds, list[str]]] = [
        *(_named(obj, parse_limit_range(obj)) for obj in limit_ranges),
        *(_named(obj, parse_quota(obj)) for obj in quotas),
    ]
    parsed.sort(key=lambda p: p[0])
    ranges = [b for _, b, _ in parsed if isinstance(b, LimitRangeBounds)]
    quota_bounds = [b for _, b, _ in parsed if isinstance(b, QuotaBounds)]
    warnings = [w for _, _, bad in parsed for w in bad]
    return NamespaceBounds(tuple(ranges), tuple(quota_bounds)), warnings


def _named(
    obj: LimitRangeDict | ResourceQuotaDict,
    parsed: tuple[LimitRangeBounds | QuotaBounds, list[str]],
) -> tuple[str, LimitRangeBounds | QuotaBounds, list[str]]:
    return (str((obj.get("metadata") or {}).get("name")), *parsed)


def parse_limit_range(obj: LimitRangeDict) -> tuple[LimitRangeBounds, list[str]]:
    """A LimitRange's pod and container items, and a warning per value that does not
    parse (the API server validates them, so only a hand-made view has any)."""
    meta = obj.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    items: list[LimitItem] = []
    warnings: list[str] = []
    for entry in (obj.get("spec") or {}).get("limits") or []:
        kind = entry.get("type")
        if kind not in ("Container", "Pod"):
            continue  # PersistentVolumeClaim items bound no pod
        amounts: dict[str, Amounts] = {}
        for key in _MIN_MAX:
            amounts[key] = {}
            for resource, text in (entry.get(key) or {}).items():
                try:
                    amounts[key][resource] = parse_resource(resource, text)
                except QuantityError as exc:
                    warnings.append(f"LimitRange {namespace}/{name}: {key}.{resource}: {exc}")
        ratio: dict[str, Fraction] = {}
        for resource, text in (entry.get("maxLimitRequestRatio") or {}).items():
            try:
                ratio[resource] = parse_quantity(text)
            except QuantityError as exc:
                warnings.append(f"LimitRange {namespace}/{name}: ratio.{resource}: {exc}")
        role: Literal["Container", "Pod"] = "Container" if kind == "Container" else "Pod"
        items.append(LimitItem(role, amounts["min"], amounts["max"], ratio))
    return LimitRangeBounds(namespace, name, tuple(items)), warnings


def parse_quota(obj: ResourceQuotaDict) -> tuple[QuotaBounds, list[str]]:
    """A ResourceQuota's enforced hard limits (its status, as admission reads them; the
    spec until the quota controller has written one), what is used and its scopes."""
    meta = obj.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    warnings: list[str] = []

    def amounts(values: Mapping[str, Any] | None, what: str) -> Amounts:
        found: Amounts = {}
        for key, text in (values or {}).items():
            try:
                found[key] = parse_resource(_quota_base(key), text)
            except QuantityError as exc:
                warnings.append(f"ResourceQuota {namespace}/{name}: {what}.{key}: {exc}")
        return found

    scopes = [ScopeRequirement(str(s), "Exists") for s in spec.get("scopes") or []]
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        scopes.append(
            ScopeRequirement(
                str(expr.get("scopeName")),
                str(expr.get("operator")),
                tuple(str(v) for v in expr.get("values") or ()),
            )
        )
    hard = amounts(status.get("hard") or spec.get("hard"), "hard")
    return QuotaBounds(namespace, name, hard, amounts(status.get("used"), "used"), tuple(scopes)), (
        warnings
    )


def _quota_base(key: str) -> str:
    """The resource a quota name counts: `requests.cpu` → cpu."""
    for prefix in ("requests.", "limits."):
        if key.startswith(prefix):
            return key[len(prefix) :]
    return key


def pod_shape(pod: PodDict, resources: Mapping[str, Resources]) -> PodShape:
    """The pod as the plugins read it, with `resources` in place of the named
    containers' own."""
    spec = pod.get("spec") or {}
    containers: list[tuple[str, Role, Resources]] = []
    for init in spec.get("initContainers") or []:
        name = str(init.get("name") or "")
        role: Role = "sidecar" if is_sidecar(init) else "init"
        containers.append((name, role, resources.get(name) or resources_of(init)))
    for app in spec.get("containers") or []:
        name = str(app.get("name") or "")
        containers.append((name, "app", resources.get(name) or resources_of(app)))
    affinity = spec.get("affinity") or {}
    return PodShape(
        tuple(containers),
        pod_level=resources_of(spec),
        overhead={r: parse_resource(r, q) for r, q in (spec.get("overhead") or {}).items()},
        terminating=(spec.get("activeDeadlineSeconds") or -1) >= 0,
        priority_class=str(spec.get("priorityClassName") or ""),
        cross_namespace_affinity=_cross_namespace(affinity),
    )


def _cross_namespace(affinity: Mapping[str, Any]) -> bool:
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind) or {}
        required = terms.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        preferred = [
            t.get("podAffinityTerm") or {}
            for t in terms.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        ]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in required):
            return True
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in preferred):
            return True
    return False


def pod_totals(shape: PodShape, fld: str) -> Amounts:
    """The pod's requests or limits as the API server adds them up: app containers and
    sidecars summed, each plain init container with the sidecars started before it, the
    larger of the two; pod-level values replace CPU and memory where set."""
    total: Amounts = {}
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for _, role, res in shape.containers:
        values = res[fld]
        if role == "app":
            _add(total, values)
            continue
        if role == "sidecar":
            _add(total, values)
            _add(sidecars, values)
            running = dict(sidecars)
        else:
            running = dict(sidecars)
            _add(running, values)
        for resource, amount in running.items():
            init_peak[resource] = max(init_peak.get(resource, amount), amount)
    for resource, amount in init_peak.items():
        total[resource] = max(total.get(resource, amount), amount)
    for resource in _POD_LEVEL:
        if resource in shape.pod_level[fld]:
            total[resource] = shape.pod_level[fld][resource]
    return total


def _add(into: Amounts, values: Mapping[str, int]) -> None:
    for resource, amount in values.items():
        into[resource] = into.get(resource, 0) + amount


# ---------------------------------------------------------------------------- LimitRange


def limit_range_breaches(
    ranges: Iterable[LimitRangeBounds], shape: PodShape, *, containers: bool, pod: bool
) -> list[Breach]:
    """Every min, max and limit-to-request ratio the pod's values go past: per container
    (app, sidecar and init containers) and for the pod's totals."""
    breaches: list[Breach] = []
    for bounds in ranges:
        source = f"LimitRange {bounds.namespace}/{bounds.name}"
        for item in bounds.items:
            if item.type == "Container" and containers:
                for name, _, res in shape.containers:
                    breaches.extend(_item_breaches(source, item, name, res))
            elif item.type == "Pod" and pod:
                totals: Resources = {
                    "requests": pod_totals(shape, "requests"),
                    "limits": pod_totals(shape, "limits"),
                }
                breaches.extend(_item_breaches(source, item, None, totals))
    return breaches


def _item_breaches(
    source: str, item: LimitItem, container: str | None, res: Resources
) -> list[Breach]:
    found: list[Breach] = []
    per = "Container" if container is not None else "Pod"
    whose = f"of container {container}" if container is not None else "of the pod"
    requests, limits = res["requests"], res["limits"]

    def breach(resource: str, bound: str, direction: Direction, text: str) -> None:
        found.append(Breach(source, container, resource, bound, direction, f"{source}: {text}"))

    for bound, word, direction, first, second, past in _SIDES:
        for resource, edge in getattr(item, bound).items():
            head = f"{word} {resource} per {per} is {format_resource(resource, edge)}, but"
            must, other = res[first].get(resource), res[second].get(resource)
            if must is None:
                text = f"{head} no {_ONE[first]} is set {whose}"
            elif past(must, edge):
                text = (
                    f"{head} the {_ONE[first]} {whose} would be {format_resource(resource, must)}"
                )
            elif other is not None and past(other, edge):
                text = (
                    f"{head} the {_ONE[second]} {whose} would be {format_resource(resource, other)}"
                )
            else:
                continue
            breach(resource, bound, direction, text)
    for resource, ratio in item.ratio.items():
        request, limit = requests.get(resource) or 0, limits.get(resource) or 0
        if request == 0 or limit == 0 or Fraction(limit, request) > ratio:
            shown = f"{float(Fraction(limit, request)):.2f}" if request and limit else "undefined"
            breach(
                resource,
                "ratio",
                "both",
                f"maximum {resource} limit to request ratio per "
                f"{per} is {_ratio_text(ratio)}, but {whose} it would be {shown}",
            )
    return found


_ONE = {"requests": "request", "limits": "limit"}
#: min and max as LimitRanger checks them: the field that must be set and within the bound,
#: then the other field if set
_SIDES: tuple[tuple[str, str, Direction, str, str, Callable[[int, int], bool]], ...] = (
    ("min", "minimum", "down", "requests", "limits", operator.lt),
    ("max", "maximum", "up", "limits", "requests", operator.gt),
)


def _ratio_text(ratio: Fraction) -> str:
    return str(ratio.numerator) if ratio.denominator == 1 else f"{float(ratio):g}"


# ---------------------------------------------------------------------------- ResourceQuota


def quota_usage(shape: PodShape) -> Amounts:
    """What a pod is charged, by quota resource name, as the quota's pod evaluator
    counts it (overhead included)."""
    requests = pod_totals(shape, "requests")
    limits = pod_totals(shape, "limits")
    for resource, amount in shape.overhead.items():
        requests[resource] = requests.get(resource, 0) + amount
        if resource in limits:
            limits[resource] += amount
    usage: Amounts = {}
    for resource, amount in requests.items():
        if resource in _QUOTA_STANDARD or resource.startswith("hugepages-"):
            usage[resource] = amount
            usage[f"requests.{resource}"] = amount
        elif _extended(resource):
            usage[f"requests.{resource}"] = amount
    for resource, amount in limits.items():
        if resource in _QUOTA_STANDARD:
            usage[f"limits.{resource}"] = amount
    return usage


def _extended(resource: str) -> bool:
    return "/" in resource and not resource.startswith("kubernetes.io/")


def best_effort(shape: PodShape) -> bool:
    """No container requests or limits any CPU or memory."""
    return not any(
        r in res[f]
        for _, _, res in shape.containers
        for f in ("requests", "limits")
        for r in ("cpu", "memory")
    )


def quota_matches(quota: QuotaBounds, shape: PodShape) -> bool:
    """Every scope of the quota holds for the pod."""
    return all(_scope_holds(s, shape) for s in quota.scopes)


def _scope_holds(scope: ScopeRequirement, shape: PodShape) -> bool:
    name = scope.scope
    if name == "Terminating":
        held = shape.terminating
    elif name == "NotTerminating":
        held = not shape.terminating
    elif name == "BestEffort":
        held = best_effort(shape)
    elif name == "NotBestEffort":
        held = not best_effort(shape)
    elif name == "CrossNamespacePodAffinity":
        held = shape.cross_namespace_affinity
    elif name == "PriorityClass":
        return _priority_holds(scope, shape.priority_class)
    else:
        return False
    return held if scope.operator in ("Exists", "In") else not held


def _priority_holds(scope: ScopeRequirement, priority_class: str) -> bool:
    if scope.operator == "Exists":
        return bool(priority_class)
    if scope.operator == "DoesNotExist":
        return not priority_class
    if scope.operator == "In":
        return bool(priority_class) and priority_class in scope.values
    if scope.operator == "NotIn":
        return not priority_class or priority_class not in scope.values
    return False


def quota_breaches(
    quotas: Iterable[QuotaBounds], base: PodShape, final: PodShape, *, charged: bool
) -> list[Breach]:
    """Each quota the pod's final values would exceed where its base values do not use as
    much: `charged` when the quota's `used` already counts the base (a running pod; a new
    pod is not counted yet)."""
    breaches: list[Breach] = []
    after = quota_usage(final)
    for quota in quotas:
        if not quota_matches(quota, final):
            continue
        before = quota_usage(base) if quota_matches(quota, base) else {}
        source = f"ResourceQuota {quota.namespace}/{quota.name}"
        for key, hard in sorted(quota.hard.items()):
            grown = after.get(key, 0) - before.get(key, 0)
            if key not in after or grown <= 0:
                continue
            used = quota.used.get(key, 0)
            total = used + grown if charged else used + after[key]
            if total > hard:
                resource = _quota_base(key)
                breaches.append(
                    Breach(
                        source,
                        None,
                        resource,
                        key,
                        "up",
                        f"{source}: {key} would be {format_resource(resource, total)} of "
                        f"{format_resource(resource, hard)} (used "
                        f"{format_resource(resource, used)})",
                    )
                )
    return breaches
