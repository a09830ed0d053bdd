"""No patch the webhook answers makes a pod the API server's LimitRanger would refuse
(hypothesis): for a generated LimitRange that the pod's manifest keeps to, the patched pod
keeps to it too. The check here is written from the API server's rules on its own, not
with kerf's code."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.decide.admission import admit_pod
from app.model.quantities import parse_resource
from tests.app import builders as b
from webhook.patch import plan_patch

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
UNITS = {"cpu": "m", "memory": "Mi"}
TOPS = {"cpu": 4000, "memory": 8192}


def amount(resource: str, text: str) -> int:
    return parse_resource(resource, text)


def refusals(pod: dict[str, Any], limit_range: dict[str, Any]) -> list[str]:
    """What LimitRanger says of the pod: each container's min, max and ratio, and the
    pod's totals (app containers and sidecars summed)."""
    found: list[str] = []
    spec = pod["spec"]
    containers = [*spec.get("initContainers", []), *spec["containers"]]
    totals: dict[str, dict[str, int]] = {"requests": {}, "limits": {}}
    for c in containers:
        res = c.get("resources") or {}
        for fld in ("requests", "limits"):
            for r, q in (res.get(fld) or {}).items():
                totals[fld][r] = totals[fld].get(r, 0) + amount(r, q)
    for item in limit_range["spec"]["limits"]:
        if item["type"] == "Container":
            for c in containers:
                res = c.get("resources") or {}
                found += _judge(
                    c["name"],
                    item,
                    {r: amount(r, q) for r, q in (res.get("requests") or {}).items()},
                    {r: amount(r, q) for r, q in (res.get("limits") or {}).items()},
                )
        else:
            found += _judge("pod", item, totals["requests"], totals["limits"])
    return found


def _judge(who: str, item: dict[str, Any], req: dict[str, int], lim: dict[str, int]) -> list[str]:
    out = []
    for r, q in (item.get("min") or {}).items():
        if r not in req or req[r] < amount(r, q) or (r in lim and lim[r] < amount(r, q)):
            out.append(f"{who} min {r}")
    for r, q in (item.get("max") or {}).items():
        if r not in lim or lim[r] > amount(r, q) or (r in req and req[r] > amount(r, q)):
            out.append(f"{who} max {r}")
    for r, q in (item.get("maxLimitRequestRatio") or {}).items():
        if not req.get(r) or not lim.get(r) or Fraction(lim[r], req[r]) > Fraction(q):
            out.append(f"{who} ratio {r}")
    return out


@st.composite
def bounded(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """Container resources and a LimitRange they keep to."""
    res: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    container: dict[str, dict[str, str]] = {}
    pod: dict[str, dict[str, str]] = {}
    for r, unit in UNITS.items():
        request = draw(st.integers(10, TOPS[r]))
        limit = draw(st.integers(request, 2 * TOPS[r]))
        res["requests"][r], res["limits"][r] = f"{request}{unit}", f"{limit}{unit}"
        if draw(st.booleans()):
            container.setdefault("min", {})[r] = f"{draw(st.integers(1, request))}{unit}"
        if draw(st.booleans()):
            container.setdefault("max", {})[r] = f"{draw(st.integers(limit, 3 * limit))}{unit}"
        if draw(st.booleans()):
            ratio = -(-limit // request) + draw(st.integers(0, 2))
            container.setdefault("maxLimitRequestRatio", {})[r] = str(ratio)
        if draw(st.booleans()):
            pod.setdefault("max", {})[r] = f"{draw(st.integers(limit, 3 * limit))}{unit}"
    items = []
    if container:
        items.append({"type": "Container", **container})
    if pod:
        items.append({"type": "Pod", **pod})
    limit_range = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "bounds", "namespace": b.NS},
        "spec": {"limits": items},
    }
    return res, limit_range


@st.composite
def policy_values(draw: st.DrawFn) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for fld in ("requests", "limits"):
        for r, unit in UNITS.items():
            if draw(st.booleans()):
                out[fld][r] = f"{draw(st.integers(1, 3 * TOPS[r]))}{unit}"
    if not out["requests"] and not out["limits"]:
        out["requests"]["cpu"] = f"{draw(st.integers(1, 3 * TOPS['cpu']))}m"
    return out


@SETTINGS
@given(bounded(), policy_values(), st.integers(10, 100))
def test_no_admitted_patch_takes_a_pod_past_a_limit_range(
    manifest: tuple[dict[str, Any], dict[str, Any]],
    values: dict[str, dict[str, str]],
    max_change: int,
) -> None:
    res, limit_range = manifest
    containers = {"app": res}
    pod = b.pod(containers=containers)
    assert refusals(pod, limit_range) == []
    view = b.view(
        *b.base_objects(containers=containers),
        b.static(containers={"app": values}, guardrails={"maxChangePercent": max_change}),
        b.node(cpu="64", memory="256Gi"),
        limit_range,
    )
    result = admit_pod(view, pod, b.NS, b.NOW, memo=False)
    patched = jsonpatch.apply_patch(pod, plan_patch(pod, result).ops)
    assert refusals(patched, limit_range) == [], (result.reason, result.message)
