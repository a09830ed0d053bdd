"""ResourceQuota for pods, as kube-apiserver 1.35 and the quota controller keep it.

The admission plugin (validating, last) charges each quota whose scopes match a created or
resized pod and refuses the pod with the real 403 when `status.used` plus its usage would
pass `status.hard`; the controller (`sync`) keeps `status` as the real one does: `hard`
copied from the spec, `used` recounted from the namespace's pods. Only the resources pods
use are counted (the real controller also counts services, claims and object counts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from kubesim import pods
from kubesim.clock import parse_rfc3339
from kubesim.errors import forbidden
from kubesim.quantity import Amount
from kubesim.resources import ResourceType
from kubesim.selectors import from_label_selector
from kubesim.store import Obj, Store, clone

QUOTAS = ("", "resourcequotas")
PODS = ("", "pods")
Amounts = dict[str, Amount]

_POD_RESOURCES = frozenset(
    {
        "count/pods",
        "pods",
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
    }
)
#: A quota tracking one of these makes every container set it (an old mistake kept for
#: compatibility, in the real evaluator's words).
_MUST_SPECIFY = frozenset(
    {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
)
_DEVICE_CLASS = "deviceclass.resource.kubernetes.io/"
_ZERO = Amount(Fraction(0))


def handles(operation: str, subresource: str, pod: Obj, old: Obj | None) -> bool:
    """Pod create, `pods/resize`, and a pod update that moves it between the Terminating
    and NotTerminating scopes (the real evaluator's Handles)."""
    if subresource == "resize":
        return operation == "UPDATE"
    if subresource:
        return False
    if operation == "UPDATE" and old is not None:
        return _terminating(old) != _terminating(pod)
    return operation == "CREATE"


def charge(store: Store, rt: ResourceType, pod: Obj, old: Obj | None, now: datetime) -> list[Obj]:
    """The namespace's quotas with `status.used` charged for `pod` (for an update, with
    what it adds over `old`), or a 403 when one would be exceeded. The caller stores them,
    unless it is a dry run."""
    meta = pod["metadata"]
    name = meta.get("name", "")
    matched: list[Obj] = []
    for quota in store.iter(QUOTAS, meta.get("namespace", "")):
        if not matches(quota, pod):
            continue
        status = quota.get("status") or {}
        tracked = _tracked(status.get("hard") or {})
        missing = _missing(tracked, pod)
        if missing:
            raise forbidden(rt, name, f"failed quota: {quota['metadata']['name']}: {missing}")
        used = status.get("used") or {}
        if any(r not in used for r in tracked):
            raise forbidden(
                rt,
                name,
                f"status unknown for quota: {quota['metadata']['name']}, resources: "
                + ",".join(sorted(tracked)),
            )
        matched.append(quota)
    if not matched:
        return []
    new_usage = usage(pod, now)
    increase = new_usage
    if old is not None:
        old_usage = usage(old, now)
        increase = {
            k: max(new_usage.get(k, _ZERO) - old_usage.get(k, _ZERO), _ZERO, key=_value)
            for k in set(new_usage) | set(old_usage)
        }
    charged: list[Obj] = []
    for quota in matched:
        delta = increase if old is not None and matches(quota, old) else new_usage
        hard = _amounts((quota.get("status") or {}).get("hard"))
        used = _amounts((quota.get("status") or {}).get("used"))
        requested = {k: v for k, v in delta.items() if k in hard and v.value != 0}
        if not requested:
            continue
        total = {**used, **{k: used[k] + v if k in used else v for k, v in requested.items()}}
        exceeded = sorted(k for k in requested if total[k].value > hard[k].value)
        if exceeded:
            raise forbidden(
                rt,
                name,
                f"exceeded quota: {quota['metadata']['name']}, "
                f"requested: {_pretty(requested, exceeded)}, used: {_pretty(used, exceeded)}, "
                f"limited: {_pretty(hard, exceeded)}",
            )
        updated = clone(quota)
        updated["status"]["used"] = {k: str(v) for k, v in total.items()}
        charged.append(updated)
    return charged


def sync(store: Store, quota: Obj, now: datetime) -> Obj | None:
    """The quota with the status the real controller writes (`hard` from the spec, `used`
    recounted from the pods in its scopes), or None when that changes nothing."""
    spec_hard = _amounts((quota.get("spec") or {}).get("hard"))
    status = quota.get("status") or {}
    counted = _tracked(spec_hard)
    recount: Amounts = dict.fromkeys(counted, _ZERO)
    for pod in store.iter(PODS, quota["metadata"].get("namespace", "")):
        if all(_scope_matches(s, pod) for s in _selectors(quota)):
            for k, v in usage(pod, now).items():
                if k in recount:
                    recount[k] = recount[k] + v
    # Usage the controller does not count (other kinds) keeps its last observed value.
    used = {k: v for k, v in {**_amounts(status.get("used")), **recount}.items() if k in spec_hard}
    hard_before = _amounts(status.get("hard"))
    if (
        "hard" in status
        and "used" in status
        and _equal(hard_before, spec_hard)
        and _equal(_amounts(status.get("used")), used)
    ):
        return None
    updated = clone(quota)
    updated["status"] = {
        "hard": {k: str(v) for k, v in spec_hard.items()},
        "used": {k: str(v) for k, v in used.items()},
    }
    return updated


def matches(quota: Obj, pod: Obj) -> bool:
    """Whether `quota` covers `pod`: it tracks a pod resource and every scope holds."""
    tracked = _tracked((quota.get("status") or {}).get("hard") or {})
    return bool(tracked) and all(_scope_matches(s, pod) for s in _selectors(quota))


def usage(pod: Obj, now: datetime) -> Amounts:
    """What a pod uses of quota (PodUsageFunc): it always counts as an object; its compute
    resources count until it ends or its deletion grace runs out."""
    result: Amounts = {"count/pods": Amount(Fraction(1))}
    if not _charged(pod, now):
        return result
    requests, limits = _pod_requests(pod), _pod_limits(pod)
    result["pods"] = Amount(Fraction(1))
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            result[name] = result[f"requests.{name}"] = requests[name]
        if name in limits:
            result[f"limits.{name}"] = limits[name]
    for name, amount in requests.items():
        if name.startswith("hugepages-"):
            result[name] = result[f"requests.{name}"] = amount
        if _extended(name):
            result[f"requests.{name}"] = amount
    return result


# ----------------------------------------------------------------- what a quota tracks


def _tracked(hard: Iterable[str]) -> list[str]:
    """The hard resources the pod evaluator counts (its MatchingResources)."""
    return [
        name
        for name in hard
        if name in _POD_RESOURCES
        or name.startswith(("hugepages-", "requests.hugepages-"))
        or (
            name.startswith("requests.")
            and (not _native(name) or name.startswith(f"requests.{_DEVICE_CLASS}"))
        )
    ]


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _extended(name: str) -> bool:
    """An extended resource a pod requests (example.com/gpu), charged as `requests.<name>`."""
    return (not _native(name) and not name.startswith("requests.")) or name.startswith(
        _DEVICE_CLASS
    )


def _missing(tracked: list[str], pod: Obj) -> str:
    """The real evaluator's Constraints: with cpu or memory tracked, every container must
    set it, unless the pod sets its own `spec.resources`."""
    if _pod_level_set(pod, "requests", "limits"):
        return ""
    required = _MUST_SPECIFY.intersection(tracked)
    absent: dict[str, set[str]] = {}
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        have = {"pods"}
        for name in ("cpu", "memory"):
            if name in (resources.get("requests") or {}):
                have |= {name, f"requests.{name}"}
            if name in (resources.get("limits") or {}):
                have.add(f"limits.{name}")
        for name in required - have:
            absent.setdefault(name, set()).add(str(container.get("name", "")))
    if not absent:
        return ""
    parts = [f"{name} for: {','.join(sorted(absent[name]))}" for name in sorted(absent)]
    return "must specify " + "; ".join(parts)


# ----------------------------------------------------------------- scopes


def _selectors(quota: Obj) -> list[Obj]:
    spec = quota.get("spec") or {}
    selectors = [{"scopeName": s, "operator": "Exists"} for s in spec.get("scopes") or []]
    return selectors + list((spec.get("scopeSelector") or {}).get("matchExpressions") or [])


def _scope_matches(selector: Obj, pod: Obj) -> bool:
    """One scope, as the real evaluator reads it (only PriorityClass looks at the operator)."""
    scope = selector.get("scopeName")
    spec = pod.get("spec") or {}
    if scope in ("Terminating", "NotTerminating"):
        return _terminating(pod) == (scope == "Terminating")
    if scope in ("BestEffort", "NotBestEffort"):
        qos = (pod.get("status") or {}).get("qosClass") or pods.qos_class(pod)
        return (qos == "BestEffort") == (scope == "BestEffort")
    if scope == "PriorityClass":
        priority_class = spec.get("priorityClassName") or ""
        if selector.get("operator") == "Exists":
            return bool(priority_class)
        requirement = {
            "key": "PriorityClass",
            "operator": selector.get("operator"),
            "values": selector.get("values") or [],
        }
        labels = {"PriorityClass": priority_class} if priority_class else {}
        return from_label_selector({"matchExpressions": [requirement]}).matches(labels)
    if scope == "CrossNamespacePodAffinity":
        return _cross_namespace_affinity(spec.get("affinity") or {})
    return False


def _terminating(pod: Obj) -> bool:
    deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    return isinstance(deadline, int) and deadline >= 0


def _cross_namespace_affinity(affinity: Obj) -> bool:
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind) or {}
        required = terms.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        preferred = [
            t.get("podAffinityTerm") or {}
            for t in terms.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        ]
        if any(t.get("namespaces") or "namespaceSelector" in t for t in [*required, *preferred]):
            return True
    return False


# ----------------------------------------------------------------- a pod's requests and limits


def _charged(pod: Obj, now: datetime) -> bool:
    """Not ended, and not stuck terminating past its grace period (QuotaV1Pod)."""
    if pods.is_terminal(pod):
        return False
    meta = pod["metadata"]
    grace = meta.get("deletionGracePeriodSeconds")
    if meta.get("deletionTimestamp") and grace is not None:
        return now <= parse_rfc3339(meta["deletionTimestamp"]) + timedelta(seconds=grace)
    return True


def _pod_requests(pod: Obj) -> Amounts:
    """resourcehelper.PodRequests as quota calls it: each running container's larger of
    desired, actuated and allocated requests (actuated and allocated alone while its
    resize is infeasible), the pod's own `spec.resources` in place of the sum, and the
    overhead on top."""
    statuses = _container_statuses(pod)
    infeasible = _resize_infeasible(pod)

    def of(container: Obj, running: bool) -> Amounts:
        spec = _amounts((container.get("resources") or {}).get("requests"))
        status = statuses.get(container.get("name", "")) if running else None
        if status is None or status.get("resources") is None:
            return spec
        actuated = _amounts(status["resources"].get("requests"))
        allocated = _amounts(status.get("allocatedResources"))
        return _widest(actuated, allocated) if infeasible else _widest(spec, actuated, allocated)

    total = pods.aggregate(pod, of)
    spec = pod.get("spec") or {}
    if _pod_level_set(pod, "requests"):
        total.update(_pod_level(spec, "requests"))
    for name, amount in _amounts(spec.get("overhead")).items():
        total[name] = total[name] + amount if name in total else amount
    return total


def _pod_limits(pod: Obj) -> Amounts:
    """resourcehelper.PodLimits as quota calls it: each running container's larger of
    desired and actuated limits (actuated alone while its resize is infeasible), the pod's
    own `spec.resources`, and the overhead added to the limits that are set."""
    statuses = _container_statuses(pod)
    infeasible = _resize_infeasible(pod)

    def of(container: Obj, running: bool) -> Amounts:
        spec = _amounts((container.get("resources") or {}).get("limits"))
        status = statuses.get(container.get("name", "")) if running else None
        if status is None or status.get("resources") is None:
            return spec
        actuated = _amounts(status["resources"].get("limits"))
        return dict(actuated) if infeasible else _widest(spec, actuated)

    total = pods.aggregate(pod, of)
    spec = pod.get("spec") or {}
    if _pod_level_set(pod, "requests", "limits"):
        total.update(_pod_level(spec, "limits"))
    for name, amount in _amounts(spec.get("overhead")).items():
        if name in total and total[name].value != 0:
            total[name] = total[name] + amount
    return total


def _container_statuses(pod: Obj) -> dict[str, Obj]:
    status = pod.get("status") or {}
    return {
        s.get("name", ""): s
        for key in ("containerStatuses", "initContainerStatuses")
        for s in status.get(key) or []
    }


def _resize_infeasible(pod: Obj) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodResizePending":
            return bool(condition.get("reason") == "Infeasible")
    return False


def _pod_level(spec: Obj, section: str) -> Amounts:
    values = _amounts((spec.get("resources") or {}).get(section))
    return {k: v for k, v in values.items() if k in ("cpu", "memory") or k.startswith("hugepages-")}


def _pod_level_set(pod: Obj, *sections: str) -> bool:
    spec = pod.get("spec") or {}
    return any(_pod_level(spec, section) for section in sections)


# ----------------------------------------------------------------- resource lists


def _amounts(values: Mapping[str, Any] | None) -> Amounts:
    return {k: Amount.of(v) for k, v in (values or {}).items()}


def _widest(first: Amounts, *others: Amounts) -> Amounts:
    result = dict(first)
    for other in others:
        for name, amount in other.items():
            if name not in result or amount.value > result[name].value:
                result[name] = amount
    return result


def _value(amount: Amount) -> Fraction:
    return amount.value


def _equal(a: Amounts, b: Amounts) -> bool:
    return a.keys() == b.keys() and all(a[k].value == b[k].value for k in a)


def _pretty(values: Amounts, names: list[str]) -> str:
    return ",".join(f"{k}={values[k]}" for k in names if k in values)
