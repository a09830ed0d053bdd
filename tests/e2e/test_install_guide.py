"""docs/install.md run verbatim on the real control plane, as a user would paste it.

Every `rehearse` block runs in bash, in order, against kube-apiserver 1.35 with kerf's RBAC
enforced. The test plays only what the node agent has no process for: when the guide
applies kerf, it starts `kerf webhook` and `kerf reconciler` where their pods would run,
each with its own ServiceAccount's token. The webhook listens on the address the agent
gives pods (this machine's, devcluster/network.py) at the Deployment's port, so the API
server reaches it through the guide's Service and caBundle, and so does its service
proxy. When the guide deletes kerf, the processes stop, as the pods would.

On kubesim, tests/integration/test_install_guide.py rehearses the same guide in process.
"""

from __future__ import annotations

import ssl
import urllib.request
from pathlib import Path

import pytest

from devcluster.network import machine_address
from harness.backend import Backend, real_available, running_backend
from harness.install import NAMESPACE, service_kubeconfig
from harness.kubectl import Kubectl
from harness.services import KERF, Service, free_port, spawn
from harness.wait import wait_until
from tests.e2e.backends import selected
from tests.integration.guide import (
    PAUSE,
    Rehearsal,
    assert_sized,
    blocks,
    dry_run_until_sized,
)

pytestmark = pytest.mark.e2e
#: the webhook container's port in manifests/webhook/deployment.yaml (the Service's target)
WEBHOOK_PORT = 8443


def _webhook_ready(webhook: Service, address: str, ca: Path) -> bool:
    if webhook.process.poll() is not None:
        raise AssertionError(f"kerf webhook exited:\n{webhook.text()[-3000:]}")
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False  # the certificate names the Service, not this address
    try:
        url = f"https://{address}:{WEBHOOK_PORT}/readyz"
        with urllib.request.urlopen(url, context=context, timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def start_kerf_where_its_pods_run(
    backend: Backend, rehearsal: Rehearsal, address: str
) -> list[Service]:
    """`kerf webhook` and `kerf reconciler`, as the guide's Deployments would run them."""
    admin = Kubectl(backend.kubeconfig)
    workdir = rehearsal.cwd.parent
    certs = rehearsal.cwd / "certs"
    webhook_config = service_kubeconfig(
        backend, admin, "kerf-webhook", workdir / "webhook.kubeconfig"
    )
    argv = [KERF, "webhook", "--kubeconfig", str(webhook_config), "--host", address]
    argv += ["--port", str(WEBHOOK_PORT), "--tls-cert", str(certs / "tls.crt")]
    argv += ["--tls-key", str(certs / "tls.key")]
    webhook = spawn("webhook", argv, workdir, WEBHOOK_PORT)
    services = [webhook]
    try:
        wait_until(lambda: _webhook_ready(webhook, address, certs / "ca.crt"), "the webhook")
        reconciler_config = service_kubeconfig(
            backend, admin, "kerf-reconciler", workdir / "reconciler.kubeconfig"
        )
        argv = [KERF, "reconciler", "--kubeconfig", str(reconciler_config)]
        argv += ["--metrics-host", "127.0.0.1", "--metrics-port", str(free_port())]
        services.append(spawn("reconciler", argv, workdir, 0))
    except BaseException:
        for service in services:
            service.stop()
        raise
    return services


def recommendation_written(admin: Kubectl) -> bool:
    """The reconciler has written the demo workload's RightsizingRecommendation."""
    records = admin.json("-n", "kerf-demo", "rightsizingrecommendations")
    return bool(records["items"])


def kerf_keys(admin: Kubectl) -> set[str]:
    """The annotation keys the reconciler published on the demo Deployment."""
    return {key for key in annotations(admin) if "kubex.ai/" in key} - set(PAUSE)


def annotations(admin: Kubectl) -> dict[str, str]:
    """The demo Deployment's annotations."""
    web = admin.json("-n", "kerf-demo", "deployment", "web")
    return dict(web["metadata"].get("annotations") or {})


async def test_the_install_guide_works_when_pasted_on_the_real_server(tmp_path: Path) -> None:
    if selected() != "real":
        pytest.skip("on kubesim: tests/integration/test_install_guide.py")
    if not real_available():
        pytest.skip("the real control plane is not built: run make cluster-tools")
    address = machine_address()
    if address is None:
        pytest.skip("this machine has only loopback: pods' endpoints would route nowhere")
    with running_backend("real", tmp_path, nodes=2, cpu="8", memory="16Gi") as backend:
        rehearsal = Rehearsal(backend.kubeconfig, tmp_path)
        admin = Kubectl(backend.kubeconfig)
        services: list[Service] = []
        published: set[str] = set()
        try:
            for code in blocks("rehearse"):
                if code.startswith("kubectl delete -k overlay/"):
                    published = wait_until(lambda: kerf_keys(admin), "the published values")
                    for service in services:  # the pods go with their Deployments
                        service.stop()
                if "kubectl get rightsizingrecommendations" in code:
                    wait_until(lambda: recommendation_written(admin), "the first record")
                if "kerf cleanup | sh" in code:
                    admin("-n", "kerf-demo", "annotate", "deployment", "web", *_pairs(PAUSE))
                if "--dry-run=server" in code:
                    assert_sized(await dry_run_until_sized(rehearsal, code))
                    continue
                out = await rehearsal.run(code)
                if "kubectl apply -k overlay/" in code and not services:
                    services = start_kerf_where_its_pods_run(backend, rehearsal, address)
                if "proxy/metrics" in code:
                    assert "kerf_webhook_view_sync_age_seconds" in out
                    assert "kerf-webhook" in out  # the Lease listed
                if "kubectl get rightsizingrecommendations" in code:
                    assert "deployment-web" in out, out
                if "kerf cleanup | sh" in code:
                    left = annotations(admin)
                    assert not published & set(left), left
                    assert left.items() >= PAUSE.items(), "people's keys stay"
                if code.startswith("kubectl delete -k overlay/"):
                    namespaces = admin.json("namespaces")["items"]
                    assert NAMESPACE not in {n["metadata"]["name"] for n in namespaces}
                    crds = admin.json("crd", "-l", "app.kubernetes.io/part-of=kerf")
                    assert crds["items"] == []
        finally:
            for service in services:
                service.stop()
    assert rehearsal.ran == blocks("rehearse")
    logs = "".join(service.text() for service in services)
    assert "Traceback" not in logs, logs[-3000:]
    assert "is forbidden: User" not in logs, "a 403 is a bug in manifests/"


def _pairs(values: dict[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in values.items()]
