"""docs/install.md's Helm path (its `rehearse-helm` blocks, verbatim): charts/kerf installed on the real control plane (kube-apiserver
1.35, kerf's RBAC enforced): the CRDs are established, every object exists, the pods the
node agent runs become Running, the webhook registration trusts the chart's certificate;
`helm upgrade` keeps that certificate, `helm uninstall` removes the registration. And the
chart with its recommender enabled: `kerf recommend` runs with the chart's ServiceAccount."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from app.model.recommendations import DATA_KEY
from app.recommend.rows import CONFIGMAP_NAME
from harness.backend import real_available, running_backend
from harness.install import service_kubeconfig
from harness.kubectl import KUBECTL, Kubectl
from harness.wait import wait_until
from tests.e2e.backends import kerf_pods_backend, selected
from tests.e2e.recommending import recommend_once, scraped, usage_deployment
from tests.integration.guide import blocks
from tests.recommender.prometheus import needs_prometheus, running_prometheus

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kerf"
NAMESPACE = "kerf-system"


def helm_binary() -> str:
    candidate = os.environ.get("HELM") or str(ROOT / ".tools" / "bin" / "helm")
    if not (Path(candidate).is_file() or shutil.which(candidate)):
        pytest.fail(f"helm not found at {candidate}: run scripts/get-kubectl.sh", pytrace=False)
    return candidate


def running(admin: Kubectl, name: str, count: int) -> bool:
    pods = admin.json("-n", NAMESPACE, "pods", "-l", f"app.kubernetes.io/name={name}")["items"]
    return sum(1 for p in pods if p["status"].get("phase") == "Running") >= count


def ready(admin: Kubectl, name: str, count: int) -> bool:
    pods = admin.json("-n", NAMESPACE, "pods", "-l", f"app.kubernetes.io/name={name}")["items"]
    conditions = [{c["type"]: c["status"] for c in p["status"].get("conditions", [])} for p in pods]
    return sum(1 for c in conditions if c.get("Ready") == "True") >= count


def ca_bundle(admin: Kubectl) -> str:
    configuration = admin.json("mutatingwebhookconfiguration", "kerf-webhook")
    [hook] = configuration["webhooks"]
    return str(hook["clientConfig"]["caBundle"])


def check_installed(admin: Kubectl) -> dict[str, Any]:
    crds = admin.json("crd")["items"]
    kerf_crds = [c for c in crds if c["spec"]["group"] == "rightsizing.kubex.ai"]
    assert len(kerf_crds) == len(list((CHART / "crds").glob("*.yaml")))
    for crd in kerf_crds:
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions.get("Established") == "True", crd["metadata"]["name"]
    for kind, name in (
        ("deployment", "kerf-webhook"),
        ("deployment", "kerf-reconciler"),
        ("service", "kerf-webhook"),
        ("poddisruptionbudget", "kerf-webhook"),
        ("serviceaccount", "kerf-webhook"),
        ("serviceaccount", "kerf-reconciler"),
        ("role", "kerf-reconciler-lease"),
        ("secret", "kerf-webhook-tls"),
    ):
        assert admin.json("-n", NAMESPACE, kind, name)["metadata"]["name"] == name
    assert admin.json("clusterrole", "kerf-reconciler")["rules"]
    assert admin.json("policyevaluation", "policy-evaluation")["spec"]["precedence"]
    assert admin.json("globalconfiguration", "global-config")["spec"]["automationEnabled"]
    configuration = admin.json("mutatingwebhookconfiguration", "kerf-webhook")
    [hook] = configuration["webhooks"]
    assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
    assert hook["clientConfig"]["service"]["namespace"] == NAMESPACE
    secret = admin.json("-n", NAMESPACE, "secret", "kerf-webhook-tls")
    ca = x509.load_pem_x509_certificate(base64.b64decode(hook["clientConfig"]["caBundle"]))
    serving = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    serving.verify_directly_issued_by(ca)
    return hook


def run_block(kubeconfig: Path, code: str) -> str:
    """One `rehearse-helm` block of docs/install.md in bash, as a user pastes it: what it
    printed, its warnings too."""
    tools = f"{Path(helm_binary()).parent}:{Path(KUBECTL).parent}"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": f"{tools}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, f"{code}\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def test_the_guide_s_helm_path_installs_upgrades_and_uninstalls_on_the_real_server(
    tmp_path: Path,
) -> None:
    if selected() != "real":
        pytest.skip("helm install runs on the real control plane (make e2e)")
    if not real_available():
        pytest.skip("the real control plane is not built: run make cluster-tools")
    install, upgrade, uninstall = blocks("rehearse-helm")
    with kerf_pods_backend(tmp_path) as backend:
        admin = Kubectl(backend.kubeconfig)
        installed = run_block(backend.kubeconfig, install)
        assert "kerf-webhook" in installed
        assert f"helm uninstall kerf -n {NAMESPACE}` leaves" in installed, "the chart's notes"
        check_installed(admin)
        wait_until(lambda: running(admin, "kerf-webhook", 2), "the webhook's two pods")
        wait_until(lambda: running(admin, "kerf-reconciler", 2), "the reconciler's two pods")
        if backend.real_kubelet:
            # The chart's kerf, from the image, really serves: the API server reaches the
            # webhook through the chart's Service and trusts its certificate.
            wait_until(lambda: ready(admin, "kerf-webhook", 2), "the webhook's pods ready")
            metrics = admin(
                "get",
                "--raw",
                f"/api/v1/namespaces/{NAMESPACE}/services/https:kerf-webhook:443/proxy/metrics",
            )
            assert "kerf_webhook_view_sync_age_seconds" in metrics
        before = ca_bundle(admin)

        said = run_block(backend.kubeconfig, upgrade)
        assert "Warning" not in said and "last-applied-configuration" not in said, said
        hook = check_installed(admin)
        assert hook["timeoutSeconds"] == 4
        assert ca_bundle(admin) == before, "an upgrade must keep the webhook's CA"

        run_block(backend.kubeconfig, uninstall)
        left = admin("get", "mutatingwebhookconfiguration", "-o", "name")
        assert "kerf-webhook" not in left
        assert admin.json("crd", "-l", "app.kubernetes.io/part-of=kerf")["items"] == []
        assert NAMESPACE not in admin("get", "namespaces", "-o", "name")


def can_i(admin: Kubectl, verb: str, resource: str, *where: str) -> bool:
    """Whether the chart's recommender ServiceAccount may, as the server's RBAC answers."""
    account = f"system:serviceaccount:{NAMESPACE}:kerf-recommender"
    answer = admin("auth", "can-i", verb, resource, "--as", account, *where, check=False)
    return answer.strip() == "yes"


@needs_prometheus
def test_the_chart_s_recommender_runs_with_its_service_account_on_the_real_server(
    tmp_path: Path,
) -> None:
    """The recommender enabled by values: its Deployment's pod runs, its RBAC is what
    `kerf recommend` needs (run here with the chart's ServiceAccount token, against a
    Prometheus scraping the node agent), and it may hold the Lease `kerf-recommender`."""
    if selected() != "real":
        pytest.skip("helm install runs on the real control plane (make e2e)")
    if not real_available():
        pytest.skip("the real control plane is not built: run make cluster-tools")
    with running_backend("real", tmp_path, nodes=1, cpu="8", memory="16Gi") as backend:
        admin = Kubectl(backend.kubeconfig)
        run_block(
            backend.kubeconfig,
            f"helm install kerf {CHART} --namespace {NAMESPACE} --create-namespace "
            "--set image.repository=kerf --set image.tag=0.1.0 "
            "--set recommender.enabled=true "
            "--set recommender.prometheus=http://prometheus.monitoring.svc:9090",
        )
        deployment = admin.json("-n", NAMESPACE, "deployment", "kerf-recommender")
        pod = deployment["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "kerf-recommender"
        assert pod["containers"][0]["args"][:2] == [
            "recommend",
            "--prometheus=http://prometheus.monitoring.svc:9090",
        ]
        wait_until(lambda: running(admin, "kerf-recommender", 1), "the recommender's pod")
        # Its member and bucket Leases, in kerf's namespace only (docs/reconciler.md, Shards).
        assert can_i(admin, "create", "leases", "-n", NAMESPACE)
        assert can_i(admin, "list", "leases", "-n", NAMESPACE)
        assert can_i(admin, "update", "leases/kerf-recommender-bucket-00", "-n", NAMESPACE)
        assert not can_i(admin, "update", "leases", "-n", "shop")
        assert can_i(admin, "delete", "leases", "-n", NAMESPACE)  # a stale member Lease
        assert not can_i(admin, "delete", "configmaps", "-n", "shop")

        admin("create", "namespace", "shop")
        admin.apply(
            {
                **usage_deployment({"cpu": "300m", "memory": "200Mi"}),
                "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
            }
        )
        wait_until(lambda: running_in(admin, "shop", 2), "web's two pods")
        config = service_kubeconfig(
            backend, admin, "kerf-recommender", tmp_path / "recommender.kubeconfig"
        )
        with running_prometheus(tmp_path / "tsdb", scrape=[backend.cadvisor]) as url:
            wait_until(lambda: scraped(url, "shop"), "web's replicas scraped")
            now = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
            run = recommend_once(config, url, now)
        assert run.returncode == 0, run.stderr
        assert "failed" not in run.stderr, run.stderr
        [row] = [r for r in json.loads(run.stdout)["recommendations"] if r["namespace"] == "shop"]
        assert row["requests"]["memory"] == "230Mi"
        stored = admin.json("-n", "shop", "configmap", CONFIGMAP_NAME)
        assert json.loads(stored["data"][DATA_KEY])["recommendations"] == [row]


def running_in(admin: Kubectl, namespace: str, count: int) -> bool:
    pods = admin.json("-n", namespace, "pods")["items"]
    return sum(1 for p in pods if p["status"].get("phase") == "Running") >= count
