"""What Kubex's examples do once the real API server has stored them: the defaults a Kubex
client expects to read back, Kubex's validation kept, and kerf's decisions over the objects
as the server returns them (the tie between a StaticPolicy and a ClusterStaticPolicy, a
`labelSelector` on the workload's labels, a namespace's `pause-until`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.model.crd import DEFAULT_WORKLOAD_TYPES, StrategySafetyChecks
from app.outcome.explain import explain
from app.store.statedir import load_view
from harness.kubectl import Kubectl, KubectlFailed
from harness.wait import wait_until
from tests.compat.examples import EXAMPLES

pytestmark = pytest.mark.e2e

BY_NAME = {e.name: e for e in EXAMPLES}
#: Kubex's strategy safetyChecks (kubex-crds 1.11.0), each defaulted by its CRD
KUBEX_SAFETY_CHECKS = {
    "blockResizeOnVpaControlledResources",
    "enableHpaFilter",
    "enableLimitRangeFilter",
    "enablePauseUntilAnnotationCheck",
    "enablePodLimitRangeFilter",
    "enableResourceQuotaFilter",
    "enableVpaFilter",
    "minCpuChangePercent",
    "minMemoryChangePercent",
    "minReadyDuration",
    "nodeCpuHeadroom",
    "nodeMemoryHeadroom",
    "requireNodeAllocatable",
    "requireOwnerPodsReady",
    "resizeRetryInterval",
    "respectWorkloadMaxUnavailable",
    "retainGuaranteedQOS",
}
#: Advanced-Configuration.md, "`pause-until` - Block Entire Pod": a paused namespace
PAUSED_NAMESPACE = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {
        "name": "payments",
        "annotations": {
            "rightsizing.kubex.ai/pause-until": "infinite",
            "rightsizing.kubex.ai/pause-reason": "quarter-end freeze",
        },
    },
}
STOREFRONT_API = {"app.kubernetes.io/part-of": "storefront", "tier": "api"}


def apply(admin: Kubectl, *names: str) -> None:
    for name in names:
        admin("apply", "-f", "-", stdin=BY_NAME[name].text)


def cluster_twin() -> dict[str, Any]:
    """Static-Policies.md's namespaced policy as a ClusterStaticPolicy of equal weight
    over team-a (and payments), with other values: a tie between two kinds."""
    namespaced = BY_NAME["Static-Policies--example-namespaced-static-policy"].obj
    return {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "ClusterStaticPolicy",
        "metadata": {"name": "team-a-cluster-twin"},
        "spec": {
            "scope": {
                **namespaced["spec"]["scope"],
                "namespaceSelector": {"operator": "In", "values": ["team-a", "payments"]},
            },
            "resources": {
                "containers": {
                    "api": {
                        "requests": {"cpu": "400m", "memory": "1Gi"},
                        "limits": {"cpu": "2", "memory": "2Gi"},
                    }
                }
            },
            "weight": namespaced["spec"]["weight"],
            "automationStrategyRef": {"name": "getting-started-strategy"},
        },
    }


def deployment(namespace: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    """One `api` container; `labels` on the Deployment itself, STOREFRONT_API on its pods."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, **STOREFRONT_API}},
                "spec": {
                    "containers": [
                        {
                            "name": "api",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {
                                "requests": {"cpu": "600m", "memory": "1Gi"},
                                "limits": {"cpu": "2", "memory": "2Gi"},
                            },
                        }
                    ]
                },
            },
        },
    }


@pytest.fixture(scope="module")
def stored(admin: Kubectl) -> Iterator[Kubectl]:
    """Kubex's examples and the workloads above, stored for real."""
    apply(
        admin,
        "Automation-Strategies--example-namespaced-strategy",
        "Getting-Started--step-5-create-your-first",
        "Getting-Started--step-5-create-your-first-2",
        "Static-Policies--example-namespaced-static-policy",
        "Rollback-Policies--example-namespaced-rollback-policy",
        "Global-Configuration--example",
    )
    admin.apply([PAUSED_NAMESPACE, cluster_twin()])
    admin.apply(
        [
            deployment("team-a", "api", STOREFRONT_API),  # the workload's labels match
            deployment("team-a", "web", {}),  # only its pods' labels do
            deployment("payments", "pay", STOREFRONT_API),
        ]
    )
    yield admin


def spec_of(admin: Kubectl, *args: str) -> dict[str, Any]:
    return dict(admin.json(*args)["spec"])


def test_a_strategy_without_safety_checks_reads_back_with_them_defaulted(
    stored: Kubectl,
) -> None:
    spec = spec_of(stored, "clusterautomationstrategy", "getting-started-strategy")
    assert set(spec["safetyChecks"]) >= KUBEX_SAFETY_CHECKS
    assert spec["safetyChecks"] == StrategySafetyChecks().model_dump(by_alias=True)
    assert spec["podEviction"] == {"enabled": True, "retryPodDisruptionBudget": True}
    # What the example sets stays; the rest of enablement is filled in.
    assert spec["enablement"]["cpu"]["limits"]["downsize"] is False
    assert spec["enablement"]["cpu"]["requests"]["upsize"] is True


def test_a_strategys_own_safety_checks_are_kept_and_the_rest_defaulted(stored: Kubectl) -> None:
    checks = spec_of(stored, "-n", "team-a", "automationstrategy", "team-a-balanced")[
        "safetyChecks"
    ]
    assert checks["minCpuChangePercent"] == 10 and checks["resizeRetryInterval"] == "1m"
    assert checks["blockResizeOnVpaControlledResources"] is False  # not in the example
    # kerf's default on purpose (SPEC §2); Kubex's is false (docs/coming-from-kubex.md)
    assert checks["retainGuaranteedQOS"] is True


def test_policies_read_back_with_kubexs_defaults(stored: Kubectl) -> None:
    proactive = spec_of(stored, "clusterproactivepolicy", "getting-started-apps")
    assert proactive["safetyChecks"] == {"maxAnalysisAgeDays": 5}
    assert proactive["weight"] == 0
    assert proactive["scope"]["workloadTypes"] == list(DEFAULT_WORKLOAD_TYPES)
    rollback = spec_of(stored, "-n", "production", "rollbackpolicy", "production-rollback")
    assert rollback["enableMonitoringReopen"] is True
    glob = spec_of(stored, "globalconfiguration", "global-config")
    assert glob["proposalSyncEnabled"] is False and glob["proposalSyncInterval"] == "5m"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("recommendationReloadInterval", "30s", "recommendationReloadInterval must be at least 1m"),
        ("proposalSyncInterval", "59s", "proposalSyncInterval must be at least 1m"),
    ],
)
def test_kubexs_interval_bounds_are_enforced_by_the_server(
    stored: Kubectl, field: str, value: str, message: str
) -> None:
    example = BY_NAME["Global-Configuration--example"].obj
    changed = {**example, "spec": {**example["spec"], field: value}}
    with pytest.raises(KubectlFailed, match=message):
        stored("apply", "--dry-run=server", "-f", "-", stdin=json.dumps(changed))


def decisions(admin: Kubectl, workdir: Path) -> dict[str, dict[str, Any]]:
    """kerf's admission decision for each pod, over the objects the server returns."""
    wait_until(
        lambda: all(
            admin.json("-n", ns, "pods", "-l", f"app={name}")["items"]
            for ns, name in (("team-a", "api"), ("team-a", "web"), ("payments", "pay"))
        ),
        "the Deployments' pods",
    )
    objects: list[dict[str, Any]] = []
    for kind in ("namespaces", "clusterautomationstrategies", "clusterstaticpolicies"):
        objects += admin.json(kind)["items"]
    objects += admin.json("policyevaluations")["items"]
    for kind in ("automationstrategies", "staticpolicies", "deployments", "replicasets", "pods"):
        objects += admin.json(kind, "-A")["items"]
    (workdir / "cluster.yaml").write_text(yaml.safe_dump_all(objects))
    result = explain(load_view([workdir]), now=datetime.now(UTC), forced="admission")
    return {pod["owner"]["name"]: pod for pod in result["pods"] if pod["owner"]}


def winners(pod: dict[str, Any]) -> set[tuple[str, str]]:
    return {(s["policyKind"], s["policyName"]) for s in pod["selected"]}


def test_the_tie_the_label_selector_and_a_paused_namespace(stored: Kubectl, tmp_path: Path) -> None:
    pods = decisions(stored, tmp_path)
    # Equal priority (90) and weight (100), exact container on both, different kinds: the
    # seed's last rule, the lexically smaller key, picks "cwstatic.…" over "static.…".
    assert winners(pods["api"]) == {("ClusterStaticPolicy", "team-a-cluster-twin")}
    assert pods["api"]["containers"]["api"]["requests"]["cpu"] == "400m"
    # labelSelector selects workloads (Kubex's CRDs say so): web's pods match, web does not.
    assert pods["web"]["selected"] == [] and pods["web"]["outcome"] == "skipped"
    # The namespace's pause-until: infinite holds every pod in it.
    assert (pods["pay"]["outcome"], pods["pay"]["reason"]) == ("blocked", "Paused")


def test_favouring_namespace_policies_makes_the_namespaced_one_win(
    stored: Kubectl, tmp_path: Path
) -> None:
    # Policy-Evaluation.md, "Favor Namespace Policies Over Cluster Policies"
    evaluation = BY_NAME["Policy-Evaluation--default-behavior"].obj
    precedence = {p["type"]: p["priority"] for p in evaluation["spec"]["precedence"]}
    precedence.update(
        StaticPolicy=100, ProactivePolicy=90, ClusterStaticPolicy=80, ClusterProactivePolicy=70
    )
    favoured = {
        **evaluation,
        "spec": {"precedence": [{"type": t, "priority": p} for t, p in precedence.items()]},
    }
    stored.apply(favoured)
    try:
        pods = decisions(stored, tmp_path)
    finally:
        stored("delete", "policyevaluation", "policy-evaluation")
    assert winners(pods["api"]) == {("StaticPolicy", "team-a-fixed-resources")}
    assert pods["api"]["containers"]["api"]["requests"]["cpu"] == "500m"
