"""Small builders for decision-library tests: policies, workloads, pods, views.

Every builder returns what the state dir would hold (kerf CRs as validated models, plain
Kubernetes objects as dicts), so tests go through the same code as `kerf explain`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from app.decide import PodDecision, decide_pod
from app.model.crd import KerfResource, parse_object
from app.store.view import ClusterView

API = "rightsizing.kubex.ai/v1alpha1"
NS = "shop"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
T0 = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)

Res = Mapping[str, Mapping[str, str]]  # {"requests": {...}, "limits": {...}}


def ts(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _meta(name: str, namespace: str | None, created: datetime | None, **extra: Any) -> dict:
    meta: dict[str, Any] = {"name": name, **extra}
    if namespace:
        meta["namespace"] = namespace
    if created is not None:
        meta["creationTimestamp"] = ts(created)
    return meta


def kerf(
    kind: str,
    name: str,
    spec: Mapping[str, Any] | None,
    *,
    namespace: str | None = NS,
    created: datetime | None = None,
    **meta: Any,
) -> KerfResource:
    doc: dict[str, Any] = {
        "apiVersion": API,
        "kind": kind,
        "metadata": _meta(name, namespace, created, **meta),
    }
    if spec is not None:
        doc["spec"] = dict(spec)
    return parse_object(doc)


def _scope(kind: str, scope: Mapping[str, Any] | None) -> dict[str, Any]:
    out = dict(scope or {})
    if kind.startswith("Cluster") or kind == "ContainerArgsPolicy":
        out.setdefault("namespaceSelector", {"operator": "In", "values": ["*"]})
    return out


def _ns_for(kind: str, namespace: str) -> str | None:
    return None if kind.startswith("Cluster") or kind == "ContainerArgsPolicy" else namespace


def static(
    name: str = "web-static",
    containers: Mapping[str, Res] | None = None,
    *,
    kind: str = "StaticPolicy",
    weight: int = 0,
    created: datetime | None = T0,
    namespace: str = NS,
    strategy: str = "default",
    mode: str = "auto",
    guardrails: Mapping[str, Any] | None = None,
    scope: Mapping[str, Any] | None = None,
) -> KerfResource:
    """A Static policy; `containers` defaults to app: 250m/256Mi requests."""
    spec: dict[str, Any] = {
        "automationStrategyRef": {"name": strategy},
        "resources": {
            "containers": dict(
                containers or {"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}}
            )
        },
        "scope": _scope(kind, scope),
        "weight": weight,
        "mode": mode,
    }
    if guardrails is not None:
        spec["guardrails"] = dict(guardrails)
    return kerf(kind, name, spec, namespace=_ns_for(kind, namespace), created=created)


def proactive(
    name: str = "web-proactive",
    *,
    kind: str = "ProactivePolicy",
    weight: int = 0,
    created: datetime | None = T0,
    namespace: str = NS,
    strategy: str = "default",
    mode: str = "auto",
    guardrails: Mapping[str, Any] | None = None,
    scope: Mapping[str, Any] | None = None,
    max_age_days: int | None = None,
    recommender: Mapping[str, Any] | None = None,
) -> KerfResource:
    spec: dict[str, Any] = {
        "automationStrategyRef": {"name": strategy},
        "scope": _scope(kind, scope),
        "weight": weight,
        "mode": mode,
    }
    if guardrails is not None:
        spec["guardrails"] = dict(guardrails)
    if max_age_days is not None:
        spec["safetyChecks"] = {"maxAnalysisAgeDays": max_age_days}
    if recommender is not None:
        spec["recommender"] = dict(recommender)
    return kerf(kind, name, spec, namespace=_ns_for(kind, namespace), created=created)


def strategy(
    name: str = "default", *, namespace: str = NS, cluster: bool = False, **spec: Any
) -> KerfResource:
    """An AutomationStrategy (camelCase spec keywords: enablement=…, inPlaceResize=…)."""
    kind = "ClusterAutomationStrategy" if cluster else "AutomationStrategy"
    return kerf(kind, name, spec, namespace=None if cluster else namespace)


def rollback_policy(
    name: str = "rb",
    *,
    kind: str = "RollbackPolicy",
    weight: int = 0,
    created: datetime | None = T0,
    target: str = "manifest",
    namespace: str = NS,
    time_period: str = "1m",
    multiply: int = 2,
    max_attempts: int = 3,
    scope: Mapping[str, Any] | None = None,
) -> KerfResource:
    spec = {
        "scope": _scope(kind, scope),
        "monitoringPeriod": "5m",
        "rollbackTarget": target,
        "adoptionThresholdPercent": 80,
        "backoff": {
            "timePeriod": time_period,
            "multiplyByTurn": multiply,
            "maxAttempts": max_attempts,
        },
        "weight": weight,
    }
    return kerf(kind, name, spec, namespace=_ns_for(kind, namespace), created=created)


def args_policy(
    name: str,
    containers: Mapping[str, list[Mapping[str, Any]]],
    *,
    weight: int = 0,
    created: datetime | None = T0,
    scope: Mapping[str, Any] | None = None,
) -> KerfResource:
    spec = {
        "containers": {c: {"args": list(ops)} for c, ops in containers.items()},
        "scope": _scope("ContainerArgsPolicy", scope),
        "weight": weight,
    }
    return kerf("ContainerArgsPolicy", name, spec, namespace=None, created=created)


def global_config(**spec: Any) -> KerfResource:
    return kerf("GlobalConfiguration", "global-config", spec, namespace=None)


def policy_evaluation(**priorities: int) -> KerfResource:
    return kerf(
        "PolicyEvaluation",
        "policy-evaluation",
        {"precedence": [{"type": t, "priority": p} for t, p in priorities.items()]},
        namespace=None,
    )


def recommendation(
    workload: str = "web",
    *,
    kind: str = "Deployment",
    namespace: str = NS,
    last_applied: Mapping[str, Res] | None = None,
    applied_at: datetime | None = None,
    rollback_at: datetime | None = None,
    rollback_resources: Iterable[str] = ("cpu",),
    annotations: Mapping[str, str] | None = None,
    proposal: str | None = None,
) -> KerfResource:
    """A RightsizingRecommendation with lastApplied / lastRollback status; `proposal`: the
    last change carried out that approved proposal, its approval used up."""
    status: dict[str, Any] = {}
    if last_applied is not None or applied_at is not None:
        status["lastApplied"] = {
            "at": ts(applied_at or NOW - timedelta(days=10)),
            "method": "inPlace",
            "containers": {c: dict(v) for c, v in (last_applied or {}).items()},
        }
    if proposal is not None:
        status["lastApplied"]["proposal"] = proposal
        status["approvedProposal"] = proposal
    if rollback_at is not None:
        status["lastRollback"] = {"at": ts(rollback_at), "resources": list(rollback_resources)}
    doc = {
        "apiVersion": API,
        "kind": "RightsizingRecommendation",
        "metadata": _meta(
            f"{kind.lower()}-{workload}", namespace, None, annotations=dict(annotations or {})
        ),
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": kind, "name": workload}},
        "status": status,
    }
    return parse_object(doc)


# ----------------------------------------------------------------- Kubernetes objects


def _container(name: str, res: Res | None, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": f"img/{name}"}
    if res is not None:
        c["resources"] = {k: dict(v) for k, v in res.items()}
    c.update(extra)
    return c


APP_RES: Res = {
    "requests": {"cpu": "400m", "memory": "512Mi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}


def deployment(
    name: str = "web",
    *,
    namespace: str = NS,
    replicas: int = 3,
    containers: Mapping[str, Res | None] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    labels = dict(labels or {"app": name})
    spec_containers = [_container(n, r) for n, r in (containers or {"app": APP_RES}).items()]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": spec_containers}},
        },
    }


def pod(
    name: str = "web-7d4b9-aaaaa",
    *,
    workload: str = "web",
    namespace: str = NS,
    containers: Mapping[str, Res | None] | None = None,
    extra: Mapping[str, Mapping[str, Any]] | None = None,
    node: str | None = None,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    statuses: list[dict] | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    """A pod of Deployment `workload` (through an unknown ReplicaSet `<workload>-7d4b9`)."""
    extra = extra or {}
    spec: dict[str, Any] = {
        "containers": [
            _container(n, r, **extra.get(n, {}))
            for n, r in (containers or {"app": APP_RES}).items()
        ]
    }
    if node:
        spec["nodeName"] = node
    pod_labels = {"app": workload, "pod-template-hash": "7d4b9", **(labels or {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": pod_labels,
            "annotations": dict(annotations or {}),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{workload}-7d4b9",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": {"phase": phase, "containerStatuses": statuses or []},
    }


def namespace(name: str = NS, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
    }


def node(name: str = "node-a", cpu: str = "4", memory: str = "16Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def vpa(
    workload: str = "web",
    *,
    name: str | None = None,
    namespace: str = NS,
    mode: str | None = "Auto",
    recommends: Mapping[str, list[str]] | None = None,
    policies: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A VerticalPodAutoscaler of Deployment `workload` (autoscaling.k8s.io/v1): in `mode`
    (None: unset), recommending `recommends` ({container: [resources]}, default app's cpu
    and memory; {} for none: RecommendationProvided False), with container `policies`."""
    recommends = {"app": ["cpu", "memory"]} if recommends is None else recommends
    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": workload}
    }
    if mode is not None:
        spec["updatePolicy"] = {"updateMode": mode}
    if policies is not None:
        spec["resourcePolicy"] = {"containerPolicies": policies}
    status: dict[str, Any] = {
        "conditions": [
            {"type": "RecommendationProvided", "status": "True" if recommends else "False"}
        ]
    }
    if recommends:
        status["recommendation"] = {
            "containerRecommendations": [
                {"containerName": c, "target": dict.fromkeys(resources, "100m")}
                for c, resources in recommends.items()
            ]
        }
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name or f"{workload}-vpa", "namespace": namespace},
        "spec": spec,
        "status": status,
    }


def hpa(
    workload: str = "web",
    resource: str = "cpu",
    *,
    namespace: str = NS,
    target_type: str = "Utilization",
) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": f"{workload}-hpa", "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": workload},
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": resource,
                        "target": {"type": target_type, "averageUtilization": 70},
                    },
                }
            ],
        },
    }


def row(
    container: str = "app",
    *,
    workload: str = "web",
    namespace: str = NS,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    analyzed_at: datetime | None = None,
    coverage_hours: float = 240,
    confidence: float = 0.93,
    throttling: float | None = 0.02,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "namespace": namespace,
        "ownerKind": "Deployment",
        "ownerName": workload,
        "container": container,
        "requests": dict(requests or {"cpu": "250m", "memory": "256Mi"}),
        "analyzedAt": ts(analyzed_at or NOW - timedelta(days=1)),
        "coverageHours": coverage_hours,
        "samples": 20160,
        "confidence": confidence,
    }
    if limits is not None:
        data["limits"] = dict(limits)
    if throttling is not None:
        data["cpuThrottlingRatio"] = throttling
    return data


def configmap(*rows: Mapping[str, Any], name: str = "recs", namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"rightsizing.kubex.ai/recommendations": "true"},
        },
        "data": {"recommendations.json": orjson.dumps({"recommendations": list(rows)}).decode()},
    }


def oom_status(container: str = "app", finished: datetime | None = None) -> dict[str, Any]:
    return {
        "name": container,
        "restartCount": 1,
        "lastState": {
            "terminated": {
                "reason": "OOMKilled",
                "exitCode": 137,
                "finishedAt": ts(finished or NOW - timedelta(hours=1)),
            }
        },
    }


# ----------------------------------------------------------------- views and decisions


def view(*objects: Any, own_namespace: str = "kerf-system") -> ClusterView:
    """A synced view of the objects (same path as the state dir loader)."""
    v = ClusterView(own_namespace=own_namespace)
    v.check_reads = True  # a stage that reads an input it does not declare fails
    for obj in objects:
        v.apply(obj)
    v.synced = True
    return v


def base_objects(
    *,
    replicas: int = 3,
    containers: Mapping[str, Res | None] | None = None,
    ns_annotations: Mapping[str, str] | None = None,
    workload_annotations: Mapping[str, str] | None = None,
) -> list[Any]:
    """Namespace `shop`, strategy `default`, Deployment `web`."""
    return [
        namespace(annotations=ns_annotations),
        strategy(),
        deployment(replicas=replicas, containers=containers, annotations=workload_annotations),
    ]


def decide(
    v: ClusterView, p: Mapping[str, Any], path: str = "running", *, now: datetime = NOW
) -> PodDecision:
    return decide_pod(v, p, now=now, path=path)  # type: ignore[arg-type]


def final(decision: PodDecision, container: str = "app") -> dict[str, dict[str, str]]:
    """The container's resources after the decision."""
    return decision.containers[container]


def reasons(decision: PodDecision) -> dict[str, str]:
    """Dropped parts as {"container.field.resource": reason}."""
    return {f"{t.container}.{t.field}.{t.resource}": r for t, r in decision.dropped}


def break_recommendations(v: ClusterView, name: str = "recs", namespace: str = NS) -> None:
    """Make the recommendation source unreachable: its ConfigMap stops being JSON."""
    v.apply(configmap(name=name, namespace=namespace) | {"data": {"recommendations.json": "{"}})
