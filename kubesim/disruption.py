"""PodDisruptionBudget status (the disruption controller) and the eviction subresource."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from kubesim import pods
from kubesim.apiserver import ApiServer
from kubesim.clock import parse_rfc3339
from kubesim.errors import ApiError, not_found, too_many_requests
from kubesim.resources import ResourceType
from kubesim.selectors import from_label_selector
from kubesim.store import Obj, clone

PDBS = ("policy", "poddisruptionbudgets")
PODS = ("", "pods")
EVICTION_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."
# The disruption controller forgets an eviction it has not seen complete after this long.
_DISRUPTED_POD_TIMEOUT = timedelta(minutes=2)
_SCALED_OWNERS = {
    "ReplicaSet": ("apps", "replicasets"),
    "StatefulSet": ("apps", "statefulsets"),
    "ReplicationController": ("", "replicationcontrollers"),
}


def _scaled(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def matching_pods(api: ApiServer, pdb: Obj) -> list[Obj]:
    """Pods in the budget's namespace its selector matches (policy/v1: empty selects all)."""
    raw = (pdb.get("spec") or {}).get("selector")
    if raw is None:
        return []
    selector = from_label_selector(raw)
    ns = pdb["metadata"]["namespace"]
    return [p for p in api.store.iter(PODS, ns) if selector.matches(p["metadata"].get("labels"))]


def _expected(api: ApiServer, pdb: Obj, matched: list[Obj]) -> int:
    spec = pdb.get("spec") or {}
    if isinstance(spec.get("minAvailable"), int):
        return len(matched)
    # Percentages and maxUnavailable scale with the controllers' desired replicas.
    total, seen, uncontrolled = 0, set(), 0
    for pod in matched:
        ref = next(
            (r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")), None
        )
        key = _SCALED_OWNERS.get(ref.get("kind", "")) if ref else None
        owner = (
            api.store.peek(key, pod["metadata"]["namespace"], ref["name"]) if ref and key else None
        )
        if owner is None:
            uncontrolled += 1
            continue
        if owner["metadata"]["uid"] not in seen:
            seen.add(owner["metadata"]["uid"])
            total += int((owner.get("spec") or {}).get("replicas", 1))
    return total + uncontrolled


def compute_status(api: ApiServer, pdb: Obj) -> Obj:
    """The status the disruption controller would write for `pdb` now."""
    spec = pdb.get("spec") or {}
    status = clone(pdb.get("status") or {})
    matched = [p for p in matching_pods(api, pdb) if not pods.is_terminal(p)]
    now = api.clock.now()
    names = {p["metadata"]["name"] for p in matched}
    disrupted = {
        name: when
        for name, when in (status.get("disruptedPods") or {}).items()
        if name in names and now - parse_rfc3339(when) < _DISRUPTED_POD_TIMEOUT
    }
    healthy = sum(
        1
        for p in matched
        if pods.is_ready(p)
        and not p["metadata"].get("deletionTimestamp")
        and p["metadata"]["name"] not in disrupted
    )
    expected = _expected(api, pdb, matched)
    if "minAvailable" in spec:
        desired = _scaled(spec["minAvailable"], expected)
    elif "maxUnavailable" in spec:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        desired = expected
    allowed = max(0, healthy - desired)
    generation = pdb["metadata"].get("generation", 1)
    old_cond = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None
    )
    cond_status = "True" if allowed > 0 else "False"
    transition = (
        old_cond["lastTransitionTime"]
        if old_cond and old_cond.get("status") == cond_status
        else api.clock.stamp()
    )
    status.update(
        {
            "observedGeneration": generation,
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "conditions": [
                {
                    "type": "DisruptionAllowed",
                    "status": cond_status,
                    "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                    "message": "",
                    "observedGeneration": generation,
                    "lastTransitionTime": transition,
                }
            ],
        }
    )
    if disrupted:
        status["disruptedPods"] = disrupted
    else:
        status.pop("disruptedPods", None)
    return status


def sync_budgets(api: ApiServer) -> None:
    """Recompute and store every PDB's status (skips writes that change nothing)."""
    rt = api.registry.get("policy", "v1", "poddisruptionbudgets")
    assert rt is not None
    for pdb in list(api.store.iter(PDBS)):
        updated = clone(pdb)
        updated["status"] = compute_status(api, pdb)
        api.write_status(rt, updated)


async def evict(
    api: ApiServer,
    pods_rt: ResourceType,
    namespace: str,
    name: str,
    body: Obj,
    *,
    dry_run: bool = False,
) -> Obj:
    """POST pods/{name}/eviction: delete the pod unless a budget forbids it (429)."""
    pod = api.store.peek(PODS, namespace, name)
    if pod is None:
        raise not_found(pods_rt, name)
    budgets = matching_budgets(api, pod)
    if len(budgets) > 1:
        raise ApiError(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )
    phase = (pod.get("status") or {}).get("phase")
    exempt = phase in ("Succeeded", "Failed", "Pending") or bool(
        pod["metadata"].get("deletionTimestamp")
    )
    if budgets and not exempt:
        pdb = budgets[0]
        observed = (pdb.get("status") or {}).get("observedGeneration")
        if observed is None or observed < pdb["metadata"].get("generation", 1):
            # As the real server: a budget the disruption controller has not processed
            # since its last change protects every pod.
            cause = f"The disruption budget {pdb['metadata']['name']} is still being processed by the server."
            raise too_many_requests(
                EVICTION_REFUSED, {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
            )
        status = compute_status(api, pdb)
        unhealthy_ok = not pods.is_ready(pod) and (
            (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
            or status["currentHealthy"] >= status["desiredHealthy"]
        )
        if not unhealthy_ok:
            if status["disruptionsAllowed"] <= 0:
                cause = f"The disruption budget {pdb['metadata']['name']} needs {status['desiredHealthy']} healthy pods and has {status['currentHealthy']} currently"
                raise too_many_requests(
                    EVICTION_REFUSED, {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
                )
            if not dry_run:
                status["disruptionsAllowed"] -= 1
                status.setdefault("disruptedPods", {})[name] = api.clock.stamp()
                updated = clone(pdb)
                updated["status"] = status
                pdb_rt = api.registry.get("policy", "v1", "poddisruptionbudgets")
                assert pdb_rt is not None
                api.write_status(pdb_rt, updated)
    options = (body or {}).get("deleteOptions") or {}
    if not dry_run:
        _mark_disruption_target(api, pods_rt, pod, options)
    await api.delete(pods_rt, namespace, name, options, dry_run=dry_run)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _mark_disruption_target(api: ApiServer, pods_rt: ResourceType, pod: Obj, options: Obj) -> None:
    """As the real server before it deletes an evicted pod: the `DisruptionTarget`
    condition on its status (its last state says an eviction took it), unless the delete's
    uid precondition names another pod."""
    uid = (options.get("preconditions") or {}).get("uid")
    if uid and uid != pod["metadata"]["uid"]:
        return  # the delete refuses it (409)
    updated = clone(pod)
    status = updated.setdefault("status", {})
    others = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
    status["conditions"] = [
        *others,
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
            "lastTransitionTime": api.clock.stamp(),
        },
    ]
    api.write_status(pods_rt, updated)


def matching_budgets(api: ApiServer, pod: Obj) -> list[Obj]:
    """PDBs in the pod's namespace whose selector matches it."""
    labels = pod["metadata"].get("labels")
    return [
        pdb
        for pdb in api.store.iter(PDBS, pod["metadata"]["namespace"])
        if (pdb.get("spec") or {}).get("selector") is not None
        and from_label_selector(pdb["spec"]["selector"]).matches(labels)
    ]
