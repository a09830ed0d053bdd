"""The LimitRanger admission plugin for pods, as kube-apiserver 1.35 runs it.

A namespace's LimitRanges shape the pods created in it: before the mutating webhooks,
containers that leave out a request or a limit get the `Container` items' defaults (named
in the `kubernetes.io/limit-ranger` annotation); after them, the `Container` and `Pod`
items' min, max and maxLimitRequestRatio refuse a pod outside them with the real 403. Both
run on pod create and on `pods/resize`, never on other pod updates, so kerf's tests fail
on kubesim where they would fail on a real cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from kubesim import pods
from kubesim.errors import forbidden
from kubesim.quantity import Amount
from kubesim.resources import ResourceType
from kubesim.store import Obj, Store

LIMIT_RANGES = ("", "limitranges")
ANNOTATION = "kubernetes.io/limit-ranger"
#: Values up to this compare in thousandths, larger ones in units (resource.MaxMilliValue).
_MAX_MILLI = (2**63 - 1) // 1000
#: The resources a pod's own `spec.resources` sets for the whole pod, in the plugin's view.
_POD_LEVEL = ("cpu", "memory")

Amounts = dict[str, Amount]
Constraint = Callable[[str, str, Amount, Amounts, Amounts], str | None]


def applies(operation: str, subresource: str, old: Obj | None) -> bool:
    """Pod create and `pods/resize` only: other pod updates cannot change containers. A pod
    being deleted is left alone."""
    if old is not None and old["metadata"].get("deletionTimestamp"):
        return False
    return (operation, subresource) in (("CREATE", ""), ("UPDATE", "resize"))


def default_pod(store: Store, pod: Obj) -> None:
    """Fill in each LimitRange's `Container` defaults where a container sets none, and say
    so in the annotation (each LimitRange that sets something rewrites it, as the real
    plugin does)."""
    for limit_range in _limit_ranges(store, pod["metadata"].get("namespace", "")):
        requests, limits = _defaults(limit_range)
        notes: list[str] = []
        for list_name, label in (("containers", "container"), ("initContainers", "init container")):
            for container in pod.get("spec", {}).get(list_name) or []:
                notes += _default_container(container, requests, limits, label)
        if notes:
            annotations = pod["metadata"].setdefault("annotations", {})
            annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


def check_pod(store: Store, rt: ResourceType, pod: Obj) -> None:
    """Refuse (403) a pod outside a LimitRange; the first LimitRange it breaks names every
    error of its own."""
    meta = pod["metadata"]
    for limit_range in _limit_ranges(store, meta.get("namespace", "")):
        errors = _errors(limit_range, pod)
        if errors:
            raise forbidden(rt, meta.get("name", ""), _aggregate(errors))


def _limit_ranges(store: Store, namespace: str) -> list[Obj]:
    # The real plugin lists its informer's cache, in no set order; kubesim uses name order.
    return list(store.iter(LIMIT_RANGES, namespace))


def _defaults(limit_range: Obj) -> tuple[dict[str, str], dict[str, str]]:
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if item.get("type") == "Container":
            requests.update(
                {k: str(Amount.of(v)) for k, v in (item.get("defaultRequest") or {}).items()}
            )
            limits.update({k: str(Amount.of(v)) for k, v in (item.get("default") or {}).items()})
    return requests, limits


def _default_container(
    container: Obj, requests: dict[str, str], limits: dict[str, str], label: str
) -> list[str]:
    resources = container.setdefault("resources", {})
    notes: list[str] = []
    for section, defaults, kind in (("requests", requests, "request"), ("limits", limits, "limit")):
        missing = sorted(k for k in defaults if k not in (resources.get(section) or {}))
        if missing:
            resources.setdefault(section, {}).update({k: defaults[k] for k in missing})
            notes.append(f"{', '.join(missing)} {kind} for {label} {container.get('name', '')}")
    return notes


def _errors(limit_range: Obj, pod: Obj) -> list[str]:
    """Every error of one LimitRange, in the real plugin's order: per item, per container
    (app containers, then init containers), min then max then ratio. Within each, the real
    plugin walks a map in random order; kubesim walks resource names in sorted order."""
    spec = pod.get("spec") or {}
    errors: list[str] = []
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        kind = item.get("type")
        if kind == "Container":
            for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
                resources = container.get("resources") or {}
                errors += _item_errors(
                    item,
                    kind,
                    _amounts(resources.get("requests")),
                    _amounts(resources.get("limits")),
                )
        elif kind == "Pod":
            errors += _item_errors(
                item, kind, _pod_total(pod, "requests"), _pod_total(pod, "limits")
            )
    return errors


def _item_errors(item: Obj, kind: str, requests: Amounts, limits: Amounts) -> list[str]:
    errors: list[str] = []
    checks: tuple[tuple[str, Constraint], ...] = (
        ("min", _min),
        ("max", _max),
        ("maxLimitRequestRatio", _ratio),
    )
    for key, check in checks:
        for name, raw in sorted((item.get(key) or {}).items()):
            error = check(kind, name, Amount.of(raw), requests, limits)
            if error:
                errors.append(error)
    return errors


def _pod_total(pod: Obj, section: str) -> Amounts:
    """The plugin's own podRequests/podLimits: the spec alone (no resize status), and the
    pod's `spec.resources` in place of the containers' sum for cpu and memory."""
    total = pods.aggregate(
        pod, lambda c, _running: _amounts((c.get("resources") or {}).get(section))
    )
    pod_level = ((pod.get("spec") or {}).get("resources") or {}).get(section) or {}
    total.update({k: Amount.of(v) for k, v in pod_level.items() if k in _POD_LEVEL})
    return total


def _amounts(values: dict[str, Any] | None) -> Amounts:
    return {k: Amount.of(v) for k, v in (values or {}).items()}


def _away_from_zero(value: Fraction) -> int:
    return (
        -(-value.numerator // value.denominator)
        if value >= 0
        else value.numerator // value.denominator
    )


def _comparable(*amounts: Amount) -> list[int]:
    """The values the plugin compares: thousandths rounded up, or units when one is too
    large for thousandths in an int64 (requestLimitEnforcedValues)."""
    units = [_away_from_zero(a.value) for a in amounts]
    if all(u <= _MAX_MILLI for u in units):
        return [_away_from_zero(a.value * 1000) for a in amounts]
    return units


def _min(kind: str, name: str, enforced: Amount, requests: Amounts, limits: Amounts) -> str | None:
    zero = Amount(Fraction(0))
    request, limit = requests.get(name), limits.get(name)
    req, lim, low = _comparable(request or zero, limit or zero, enforced)
    head = f"minimum {name} usage per {kind} is {enforced}"
    if request is None:
        return f"{head}.  No request is specified"
    if req < low:
        return f"{head}, but request is {request}"
    if limit is not None and lim < low:
        return f"{head}, but limit is {limit}"
    return None


def _max(kind: str, name: str, enforced: Amount, requests: Amounts, limits: Amounts) -> str | None:
    zero = Amount(Fraction(0))
    request, limit = requests.get(name), limits.get(name)
    req, lim, high = _comparable(request or zero, limit or zero, enforced)
    head = f"maximum {name} usage per {kind} is {enforced}"
    if limit is None:
        return f"{head}.  No limit is specified"
    if lim > high:
        return f"{head}, but limit is {limit}"
    if request is not None and req > high:
        return f"{head}, but request is {request}"
    return None


def _ratio(
    kind: str, name: str, enforced: Amount, requests: Amounts, limits: Amounts
) -> str | None:
    zero = Amount(Fraction(0))
    request, limit = requests.get(name), limits.get(name)
    req, lim, _ = _comparable(request or zero, limit or zero, enforced)
    head = f"{name} max limit to request ratio per {kind} is {enforced}"
    if request is None or req == 0:
        return f"{head}, but no request is specified or request is 0"
    if limit is None or lim == 0:
        return f"{head}, but no limit is specified or limit is 0"
    observed = float(lim) / float(req)
    shown = observed
    allowed = float(_away_from_zero(enforced.value))
    if allowed <= _MAX_MILLI:
        observed *= 1000
        allowed = float(_away_from_zero(enforced.value * 1000))
    if observed > allowed:
        return f"{head}, but provided ratio is {shown:f}"
    return None


def _aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate's message: one error alone, several (repeats dropped) in
    brackets."""
    if len(errors) == 1:
        return errors[0]
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
