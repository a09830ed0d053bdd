"""The kustomize base renders and every object validates (SPEC §9 Manifests).

kubectl is required, not optional: install it with `scripts/get-kubectl.sh` (it lands in
`.tools/bin/kubectl`) or point `$KUBECTL` at a kubectl 1.35 binary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from app.model.crd import STORED_KINDS, parse_object, plural
from tools.crdgen import validate_against_crd
from webhook.certs import kustomize_ca_bundle_patch

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
KERF_API = "rightsizing.kubex.ai/v1alpha1"
READ = {"get", "list", "watch"}


def kubectl() -> str:
    candidate = os.environ.get("KUBECTL") or str(ROOT / ".tools" / "bin" / "kubectl")
    if not (Path(candidate).is_file() or shutil.which(candidate)):
        pytest.fail(
            f"kubectl not found at {candidate}: run scripts/get-kubectl.sh or set $KUBECTL",
            pytrace=False,
        )
    return candidate


def render(path: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [kubectl(), "kustomize", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render(MANIFESTS)


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_every_kubernetes_object_validates_strictly(objects: list[dict[str, Any]]) -> None:
    version = kubernetes_validate.latest_version()
    checked = 0
    for obj in objects:
        if obj["apiVersion"] == KERF_API:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")
        checked += 1
    assert checked >= 10


def test_kerf_defaults_fit_the_models_and_the_crds(objects: list[dict[str, Any]]) -> None:
    kerf = [o for o in objects if o["apiVersion"] == KERF_API]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in kerf) == [
        ("GlobalConfiguration", "global-config"),
        ("PolicyEvaluation", "policy-evaluation"),
    ]
    for obj in kerf:
        parse_object(obj, "manifests/defaults")
        assert validate_against_crd(obj) == [], obj["kind"]
        assert "namespace" not in obj["metadata"], "cluster singletons have no namespace"


def test_mutating_webhook_is_safe_for_the_cluster(objects: list[dict[str, Any]]) -> None:
    config = one(objects, "MutatingWebhookConfiguration", "kerf-webhook")
    [hook] = config["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "None"
    assert hook["timeoutSeconds"] <= 5
    assert hook["reinvocationPolicy"] == "IfNeeded"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    [excluded] = hook["namespaceSelector"]["matchExpressions"]
    assert excluded["key"] == "kubernetes.io/metadata.name"
    assert excluded["operator"] == "NotIn"
    assert {"kube-system", "kerf-system"} <= set(excluded["values"])
    [condition] = hook["matchConditions"]
    assert condition["expression"] == (
        "!has(object.metadata.annotations) || "
        "!('kubernetes.io/config.mirror' in object.metadata.annotations)"
    )


def test_webhook_reaches_the_service_and_pods(objects: list[dict[str, Any]]) -> None:
    [hook] = one(objects, "MutatingWebhookConfiguration", "kerf-webhook")["webhooks"]
    target = hook["clientConfig"]["service"]
    service = one(objects, "Service", target["name"])
    assert service["metadata"]["namespace"] == target["namespace"] == "kerf-system"
    assert target["path"] == "/mutate"
    [port] = [p for p in service["spec"]["ports"] if p["port"] == target["port"]]
    deployment = one(objects, "Deployment", "kerf-webhook")
    template = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    [container] = template["spec"]["containers"]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}


def test_webhook_deployment_is_hardened_and_available(objects: list[dict[str, Any]]) -> None:
    deployment = one(objects, "Deployment", "kerf-webhook")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    assert spec["replicas"] == 2
    assert pod["affinity"]["podAntiAffinity"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"] and container["resources"]["limits"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert volumes["tls"]["secret"]["secretName"] == "kerf-webhook-tls"
    tls_dir = mounts["tls"]["mountPath"]
    assert f"--tls-cert={tls_dir}/tls.crt" in container["args"]
    assert f"--tls-key={tls_dir}/tls.key" in container["args"]
    pdb = one(objects, "PodDisruptionBudget", "kerf-webhook")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= (
        spec["template"]["metadata"]["labels"].items()
    )


def test_rbac_is_read_only_except_the_lease(objects: list[dict[str, Any]]) -> None:
    cluster_role = one(objects, "ClusterRole", "kerf-webhook")
    for rule in cluster_role["rules"]:
        assert set(rule["verbs"]) <= READ, rule
    # VPACoupled's input, read as a watch only.
    assert {
        "apiGroups": ["autoscaling.k8s.io"],
        "resources": ["verticalpodautoscalers"],
        "verbs": ["list", "watch"],
    } in cluster_role["rules"]
    kerf_rule = next(r for r in cluster_role["rules"] if r["apiGroups"] == ["rightsizing.kubex.ai"])
    plurals = {
        o["spec"]["names"]["plural"] for o in objects if o["kind"] == "CustomResourceDefinition"
    }
    # The Kubex kinds kerf only stores are the reconciler's to read, not the webhook's.
    stored = {plural(kind) for kind in STORED_KINDS}
    assert stored <= plurals and plurals - stored == set(kerf_rule["resources"])
    role = one(objects, "Role", "kerf-webhook-lease")
    assert role["metadata"]["namespace"] == "kerf-system"
    for rule in role["rules"]:
        assert rule["resources"] == ["leases"]
        assert rule.get("resourceNames", ["kerf-webhook"]) == ["kerf-webhook"]
        assert set(rule["verbs"]) <= {"create", "get", "update"}
    for kind, name in (
        ("ClusterRoleBinding", "kerf-webhook"),
        ("RoleBinding", "kerf-webhook-lease"),
    ):
        [subject] = one(objects, kind, name)["subjects"]
        assert subject == {
            "kind": "ServiceAccount",
            "name": "kerf-webhook",
            "namespace": "kerf-system",
        }


def test_certs_patch_sets_the_ca_bundle_in_an_overlay(tmp_path: Path) -> None:
    (tmp_path / "ca-bundle.yaml").write_text(kustomize_ca_bundle_patch("Q0FCVU5ETEU="))
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"resources: [{os.path.relpath(MANIFESTS, tmp_path)}]\n"
        "patches: [{path: ca-bundle.yaml}]\n"
    )
    objects = render(tmp_path)
    [hook] = one(objects, "MutatingWebhookConfiguration", "kerf-webhook")["webhooks"]
    assert hook["clientConfig"]["caBundle"] == "Q0FCVU5ETEU="
    assert hook["clientConfig"]["service"]["path"] == "/mutate"
    assert hook["failurePolicy"] == "Ignore"
