"""`autoscaling/v1` HorizontalPodAutoscalers as a view of the `autoscaling/v2` storage.

kubectl 1.32 `autoscale` creates v1 objects; kubesim stores v2, as the real server does,
and converts like it: `targetCPUUtilizationPercentage` is the cpu `Utilization` resource
metric; v2 fields v1 cannot show (other metrics, `behavior`, status conditions and
current metrics) travel in `autoscaling.alpha.kubernetes.io/*` annotations, so a v1
read-modify-write loses none of them.
"""

from __future__ import annotations

from typing import Any

import orjson

from kubesim.store import clone

Obj = dict[str, Any]
METRICS = "autoscaling.alpha.kubernetes.io/metrics"
BEHAVIOR = "autoscaling.alpha.kubernetes.io/behavior"
CONDITIONS = "autoscaling.alpha.kubernetes.io/conditions"
CURRENT_METRICS = "autoscaling.alpha.kubernetes.io/current-metrics"


def _is_cpu_utilization(metric: Any) -> bool:
    if not isinstance(metric, dict) or not isinstance(metric.get("resource"), dict):
        return False
    resource = metric["resource"]
    return (
        metric.get("type") == "Resource"
        and resource.get("name") == "cpu"
        and isinstance(resource.get("target"), dict)
        and resource["target"].get("type") == "Utilization"
    )


def _resource_name(metric: Any) -> Any:
    resource = metric.get("resource") if isinstance(metric, dict) else None
    return resource.get("name") if isinstance(resource, dict) else None


def _take(annotations: dict[str, str], key: str, kind: type) -> Any:
    """The decoded annotation, removed; a hand-edited one that is not JSON of `kind`
    stays where it was."""
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, kind):
        return None
    del annotations[key]
    return value


def to_v2(obj: Obj) -> Obj:
    """An autoscaling/v1 object in v2 form (for storage)."""
    out = clone(obj)
    out["apiVersion"] = "autoscaling/v2"
    meta = out.setdefault("metadata", {})
    if not isinstance(meta, dict) or not isinstance(meta.get("annotations") or {}, dict):
        return out  # validation refuses the malformed metadata with the usual message
    annotations = dict(meta.get("annotations") or {})
    spec = out.get("spec")
    if isinstance(spec, dict):
        metrics = [m for m in _take(annotations, METRICS, list) or [] if not _is_cpu_utilization(m)]
        cpu = spec.pop("targetCPUUtilizationPercentage", None)
        if cpu is not None:
            cpu_metric = {"name": "cpu", "target": {"type": "Utilization"}}
            cpu_metric["target"]["averageUtilization"] = cpu
            metrics.insert(0, {"type": "Resource", "resource": cpu_metric})
        if metrics:
            spec["metrics"] = metrics
        behavior = _take(annotations, BEHAVIOR, dict)
        if behavior is not None:
            spec["behavior"] = behavior
    status = out.get("status")
    if isinstance(status, dict):
        current = [
            m for m in _take(annotations, CURRENT_METRICS, list) or [] if _resource_name(m) != "cpu"
        ]
        cpu_now = status.pop("currentCPUUtilizationPercentage", None)
        if cpu_now is not None:
            current.insert(
                0,
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "current": {"averageUtilization": cpu_now}},
                },
            )
        if current:
            status["currentMetrics"] = current
        conditions = _take(annotations, CONDITIONS, list)
        if conditions is not None:
            status["conditions"] = conditions
    _set_annotations(meta, annotations)
    return out


def from_v2(obj: Obj) -> Obj:
    """A stored v2 object in autoscaling/v1 form."""
    out = clone(obj)
    out["apiVersion"] = "autoscaling/v1"
    meta = out.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    spec = out.get("spec") if isinstance(out.get("spec"), dict) else {}
    metrics = spec.pop("metrics", None)
    metrics = metrics if isinstance(metrics, list) else []
    cpu = next((m for m in metrics if _is_cpu_utilization(m)), None)
    if cpu is not None:
        spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"].get("averageUtilization")
    others = [m for m in metrics if m is not cpu]
    if others:
        annotations[METRICS] = orjson.dumps(others).decode()
    if "behavior" in spec:
        annotations[BEHAVIOR] = orjson.dumps(spec.pop("behavior")).decode()
    status = out.get("status")
    if isinstance(status, dict):
        current = status.pop("currentMetrics", None)
        current = current if isinstance(current, list) else []
        for metric in current:
            now = metric["resource"].get("current") if _resource_name(metric) == "cpu" else None
            if isinstance(now, dict) and "averageUtilization" in now:
                status["currentCPUUtilizationPercentage"] = now["averageUtilization"]
        others_now = [m for m in current if _resource_name(m) != "cpu"]
        if others_now:
            annotations[CURRENT_METRICS] = orjson.dumps(others_now).decode()
        if status.get("conditions"):
            annotations[CONDITIONS] = orjson.dumps(status.pop("conditions")).decode()
        status.pop("conditions", None)
    _set_annotations(meta, annotations)
    return out


def _set_annotations(meta: Obj, annotations: dict[str, str]) -> None:
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
