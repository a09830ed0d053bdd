"""The reconciler's manifests: part of the base, hardened, and RBAC with exactly its verbs.

The whole base (reconciler included) is validated strictly against the Kubernetes schemas
by `tests/webhook/test_manifests.py`; this file checks what is particular to the reconciler.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.model.crd import ACTED_ON_KINDS, STORED_KINDS, plural
from tests.webhook.test_manifests import MANIFESTS, one, render

NAMESPACE = "kerf-system"
READ = ("get", "list", "watch")


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render(MANIFESTS)


def grants(role: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    """Every (apiGroup, resource, verb, resourceName or '*') a Role or ClusterRole grants."""
    out = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames", ["*"]):
                        out.add((group, resource, verb, name))
    return out


def expand(group: str, resources: list[str], verbs: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {(group, r, v, "*") for r in resources for v in verbs}


def test_cluster_role_grants_exactly_what_the_reconciler_uses(
    objects: list[dict[str, Any]],
) -> None:
    kerf_kinds = sorted(plural(kind) for kind in ACTED_ON_KINDS)
    stored_kinds = sorted(plural(kind) for kind in STORED_KINDS)
    expected = (
        expand("", ["pods", "nodes", "namespaces", "configmaps"], READ)
        | expand("", ["limitranges", "resourcequotas"], ("list", "watch"))
        | expand("apps", ["replicasets", "deployments", "statefulsets", "daemonsets"], READ)
        | expand("batch", ["jobs", "cronjobs"], READ)
        | expand("autoscaling", ["horizontalpodautoscalers"], READ)
        | expand("autoscaling.k8s.io", ["verticalpodautoscalers"], ("list", "watch"))
        | expand("policy", ["poddisruptionbudgets"], READ)
        | expand("argoproj.io", ["rollouts"], READ)
        | expand("rightsizing.kubex.ai", kerf_kinds, READ)
        | expand("rightsizing.kubex.ai", stored_kinds, ("list", "watch"))
        | expand("apps", ["deployments", "statefulsets", "daemonsets"], ("patch",))
        | expand("batch", ["jobs", "cronjobs"], ("patch",))
        | expand("argoproj.io", ["rollouts"], ("patch",))
        | expand("", ["pods/resize"], ("patch",))
        | expand("", ["pods/eviction"], ("create",))
        | expand("rightsizing.kubex.ai", ["rightsizingrecommendations"], ("create", "patch"))
        | expand(
            "rightsizing.kubex.ai",
            [
                "rightsizingrecommendations/status",
                "rollbackpolicies/status",
                "clusterrollbackpolicies/status",
                "globalconfigurations/status",
                *(f"{kind}/status" for kind in stored_kinds),
            ],
            ("patch",),
        )
        | expand("", ["events"], ("create",))
        | expand("coordination.k8s.io", ["leases"], READ)
        | expand("apiextensions.k8s.io", ["customresourcedefinitions"], ("list", "watch"))
    )
    assert grants(one(objects, "ClusterRole", "kerf-reconciler")) == expected


def test_every_kerf_kind_is_readable(objects: list[dict[str, Any]]) -> None:
    crd_plurals = {
        o["spec"]["names"]["plural"] for o in objects if o["kind"] == "CustomResourceDefinition"
    }
    readable = {
        resource
        for group, resource, verb, _ in grants(one(objects, "ClusterRole", "kerf-reconciler"))
        if group == "rightsizing.kubex.ai" and verb == "watch"
    }
    assert crd_plurals and readable == crd_plurals


def test_the_lease_role_keeps_to_the_leases_of_kerf_s_namespace(
    objects: list[dict[str, Any]],
) -> None:
    """Member and bucket Leases: found by label, created, renewed and given up, and a
    member Lease deleted once its replica is gone; a member Lease is named after its pod,
    so no resourceName can narrow the grant."""
    role = one(objects, "Role", "kerf-reconciler-lease")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert grants(role) == expand(
        "coordination.k8s.io",
        ["leases"],
        ("get", "list", "create", "update", "delete"),
    )


def test_bindings_name_the_reconciler_service_account(objects: list[dict[str, Any]]) -> None:
    account = one(objects, "ServiceAccount", "kerf-reconciler")
    assert account["metadata"]["namespace"] == NAMESPACE
    for kind, name, role_kind in (
        ("ClusterRoleBinding", "kerf-reconciler", "ClusterRole"),
        ("RoleBinding", "kerf-reconciler-lease", "Role"),
    ):
        binding = one(objects, kind, name)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": name,
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "kerf-reconciler", "namespace": NAMESPACE}
        ]
    deployment = one(objects, "Deployment", "kerf-reconciler")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "kerf-reconciler"


def test_deployment_is_hardened_probed_and_shares_the_buckets(
    objects: list[dict[str, Any]],
) -> None:
    deployment = one(objects, "Deployment", "kerf-reconciler")
    assert deployment["metadata"]["namespace"] == NAMESPACE
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert container["command"] == ["kerf"]
    assert container["args"][0] == "reconciler"
    assert "--metrics-port=8080" in container["args"]
    assert "--shards=64" in container["args"]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    [port] = container["ports"]
    assert port["containerPort"] == 8080
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert get["port"] in (port["name"], 8080)
        assert get.get("scheme", "HTTP") == "HTTP"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"]["cpu"]
    assert container["resources"]["requests"]["memory"]
    assert container["resources"]["limits"]["memory"]


def test_the_reconciler_is_labelled_as_a_kerf_component(objects: list[dict[str, Any]]) -> None:
    for kind, name in (
        ("Deployment", "kerf-reconciler"),
        ("ServiceAccount", "kerf-reconciler"),
        ("ClusterRole", "kerf-reconciler"),
    ):
        labels = one(objects, kind, name)["metadata"]["labels"]
        assert labels["app.kubernetes.io/part-of"] == "kerf"
        assert labels["app.kubernetes.io/component"] == "reconciler"
