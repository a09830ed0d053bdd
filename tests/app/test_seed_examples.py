"""The selection examples of seed policy-evaluation.txt, end to end through `kerf explain`
on state files — the path other tools (and operators) use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kerf.cli import main

NOW = "2026-11-29T12:00:00Z"
API = "rightsizing.kubex.ai/v1alpha1"

BASE = """
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: rightsizing.kubex.ai/v1alpha1
kind: AutomationStrategy
metadata: {name: default, namespace: shop}
spec: {}
---
apiVersion: rightsizing.kubex.ai/v1alpha1
kind: ClusterAutomationStrategy
metadata: {name: default}
spec: {}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-7d4b9-aaaaa
  namespace: shop
  labels: {app: web, pod-template-hash: 7d4b9}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-7d4b9, controller: true}]
spec:
  containers:
    - name: app
      image: web:1
      resources: {requests: {cpu: 400m, memory: 512Mi}, limits: {cpu: "1", memory: 1Gi}}
"""

ROW = {
    "namespace": "shop",
    "ownerKind": "Deployment",
    "ownerName": "web",
    "container": "app",
    "requests": {"cpu": "300m"},
    "analyzedAt": "2026-11-28T10:00:00Z",
    "coverageHours": 400,
    "samples": 40000,
    "confidence": 0.95,
}


def deployment(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "labels": {"app": "web"},
            "annotations": annotations or {},
        },
        "spec": {
            "replicas": 3,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "web:1",
                            "resources": {
                                "requests": {"cpu": "400m", "memory": "512Mi"},
                                "limits": {"cpu": "1", "memory": "1Gi"},
                            },
                        }
                    ]
                },
            },
        },
    }


#: the two signals every GpuReactivePolicy names (Kubex's format)
GPU_METRICS = {
    signal: {
        "prometheus": {
            "metric": metric,
            "namespaceLabel": "namespace",
            "podLabel": "pod",
            "containerLabel": "container",
        }
    }
    for signal, metric in (("compute", "DCGM_FI_PROF_SM_ACTIVE"), ("memory", "gpu_memory"))
}


def policy(
    kind: str, name: str, weight: int, created: str = "2026-11-01T10:00:00Z", **spec: Any
) -> dict:
    cluster = kind.startswith("Cluster")
    meta: dict[str, Any] = {"name": name, "creationTimestamp": created}
    if not cluster:
        meta["namespace"] = "shop"
    scope: dict[str, Any] = {"labelSelector": {"matchLabels": {"app": "web"}}}
    if cluster:
        scope["namespaceSelector"] = {"operator": "In", "values": ["shop"]}
    body = {"scope": scope, "weight": weight, **spec}
    if "Rollback" not in kind:
        body["automationStrategyRef"] = {"name": "default"}
    if "GpuReactive" in kind:
        body["metrics"] = GPU_METRICS
    return {"apiVersion": API, "kind": kind, "metadata": meta, "spec": body}


def recommendations(*rows: dict) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "recs",
            "namespace": "shop",
            "labels": {"rightsizing.kubex.ai/recommendations": "true"},
        },
        "data": {"recommendations.json": orjson.dumps({"recommendations": list(rows)}).decode()},
    }


def explain(tmp_path: Path, capsys: pytest.CaptureFixture[str], *objects: dict) -> dict:
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "case.yaml").write_text(yaml.safe_dump_all(objects))
    assert main(["explain", "-f", str(tmp_path), "--now", NOW, "--for", "admission"]) == 0
    [pod] = orjson.loads(capsys.readouterr().out)["pods"]
    return pod


def winner(pod: dict, resource: str = "cpu", field: str = "requests") -> dict:
    return next(s for s in pod["selected"] if (s["field"], s["resource"]) == (field, resource))


ROLLBACK = {
    "monitoringPeriod": "5m",
    "rollbackTarget": "manifest",
    "adoptionThresholdPercent": 80,
    "backoff": {"timePeriod": "1m", "multiplyByTurn": 2, "maxAttempts": 3},
}


def test_example_1_rollback_wins_by_type_priority(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    published = {
        # the rollback restore and the reactive GPU values are published on the workload
        "rollbackpolicy.rightsizing.kubex.ai/desired-resource-requests": '{"app":{"cpu":"350m"}}',
        "gpureactive.rightsizing.kubex.ai/desired-resource-requests": '{"app":{"cpu":"320m"}}',
    }
    pod = explain(
        tmp_path,
        capsys,
        deployment(published),
        policy("RollbackPolicy", "rb", 50, **ROLLBACK),
        policy("GpuReactivePolicy", "gpu", 10),
        policy("ClusterProactivePolicy", "cluster-pro", 50),
        policy("ProactivePolicy", "pro", 100),
        recommendations(ROW),
    )
    cpu = winner(pod)
    assert (cpu["policyKind"], cpu["policyName"], cpu["value"]) == ("RollbackPolicy", "rb", "350m")
    assert pod["containers"]["app"]["requests"]["cpu"] == "350m"


def test_example_2_same_type_higher_weight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = explain(
        tmp_path,
        capsys,
        deployment(),
        policy("ProactivePolicy", "policy-a", 50),
        policy("ProactivePolicy", "policy-b", 100),
        recommendations(ROW),
    )
    assert winner(pod)["policyName"] == "policy-b"


def test_example_3_equal_custom_priority_weight_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evaluation = {
        "apiVersion": API,
        "kind": "PolicyEvaluation",
        "metadata": {"name": "policy-evaluation"},
        "spec": {
            "precedence": [
                {"type": "ProactivePolicy", "priority": 70},
                {"type": "ClusterProactivePolicy", "priority": 70},
            ]
        },
    }
    pod = explain(
        tmp_path,
        capsys,
        deployment(),
        evaluation,
        policy("ClusterProactivePolicy", "cluster-pro", 50),
        policy("ProactivePolicy", "pro", 100),
        recommendations(ROW),
    )
    assert (winner(pod)["policyKind"], winner(pod)["policyName"]) == ("ProactivePolicy", "pro")


def test_example_4_multi_policy_older_wins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "apiVersion": API,
        "kind": "GlobalConfiguration",
        "metadata": {"name": "global-config"},
        "spec": {"multiPolicyContainerRightsizingEnabled": True},
    }
    pod = explain(
        tmp_path,
        capsys,
        deployment(),
        config,
        policy("ProactivePolicy", "policy-b", 80, "2026-11-01T11:00:00Z"),
        policy("ProactivePolicy", "policy-a", 80, "2026-11-01T10:00:00Z"),
        recommendations(ROW),
    )
    cpu = winner(pod)
    assert cpu["policyName"] == "policy-a"
    assert "/h" in cpu["annotationKey"]


def test_published_gpu_values_need_a_matching_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A stale published key whose policy is gone is not a candidate.
    published = {
        "gpureactive.rightsizing.kubex.ai/desired-resource-requests": '{"app":{"cpu":"320m"}}'
    }
    pod = explain(tmp_path, capsys, deployment(published))
    assert (pod["outcome"], pod["reason"], pod["selected"]) == ("skipped", "NoMatchingPolicy", [])
