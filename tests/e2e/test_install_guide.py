"""docs/install.md run verbatim on the real control plane, as a user would paste it.

Every `rehearse` block runs in bash, in order, against kube-apiserver 1.35 with kerf's RBAC
enforced.

Where a real node can run (`devcluster --kubelet real`) and the kerf image is built
(`make kerf-image`), kerf runs as the guide's own pods from that image: the webhook is
reached through its Service, the reconciler calls the API server as an in-cluster client,
and their logs come from `kubectl logs`. The test plays only the registry the node has
not got: the image is imported when the node starts, `kerf:0.2.0` of the upgrade is the
same image under the new tag, and the demo's `nginx:1.27` is the pause image under that
name (a container that runs and idles, and nothing reaches out to pull).

Elsewhere the node agent runs no containers, and the test plays the pods: when the guide
applies kerf, it starts `kerf webhook` and `kerf reconciler` where their pods would run,
each with its own ServiceAccount's token, the webhook on the address the agent gives pods
(devcluster/network.py) at the Deployment's port, so the API server reaches it through the
guide's Service and caBundle. When the guide deletes kerf, the processes stop.

On kubesim, tests/integration/test_install_guide.py rehearses the same guide in process.
"""

from __future__ import annotations

import ssl
import urllib.request
from functools import partial
from pathlib import Path

import pytest

from devcluster.images import PAUSE_IMAGE
from devcluster.network import machine_address
from harness.backend import Backend, real_available
from harness.install import NAMESPACE, service_kubeconfig
from harness.kubectl import Kubectl
from harness.services import KERF, Service, free_port, spawn
from harness.wait import wait_until
from tests.e2e.backends import kerf_pods_backend, selected
from tests.integration.guide import (
    APPLY_KERF,
    DELETE_KERF,
    PAUSE,
    Rehearsal,
    assert_sized,
    blocks,
    dry_run_until_sized,
)

pytestmark = pytest.mark.e2e
#: the image the manifests name, and the one the guide's upgrade step moves to
IMAGE = "kerf:0.1.0"
#: the demo's image (examples/install/demo.yaml)
DEMO_IMAGE = "nginx:1.27"
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


def kerf_logs(admin: Kubectl, services: list[Service]) -> str:
    """What kerf's webhook and reconciler have logged so far: the processes that play
    their pods, else the pods' own logs."""
    if services:
        return "".join(service.text() for service in services)
    return pod_logs(admin)


def acted(admin: Kubectl, services: list[Service]) -> str:
    """kerf's logs once they hold a decision line of each service for the demo namespace."""
    logs = kerf_logs(admin, services)
    admitted = '"msg":"admission decision"' in logs and '"namespace":"kerf-demo"' in logs
    return logs if admitted and '"msg":"published policy values"' in logs else ""


def pod_logs(admin: Kubectl) -> str:
    """Every running kerf container's log, from the kubelet, with its pod's name above it
    (a pod the upgrade's rollout is deleting may be gone by the time it is asked)."""
    pods = admin.json("-n", NAMESPACE, "pods")["items"]
    texts = []
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        name = pod["metadata"]["name"]
        log = admin("-n", NAMESPACE, "logs", name, "--all-containers", check=False)
        texts.append(f"--- {name}\n{log}")
    return "".join(texts)


async def test_the_install_guide_works_when_pasted_on_the_real_server(tmp_path: Path) -> None:
    if selected() != "real":
        pytest.skip("on kubesim: tests/integration/test_install_guide.py")
    if not real_available():
        pytest.skip("the real control plane is not built: run make cluster-tools")
    address = machine_address()
    if address is None:
        pytest.skip("this machine has only loopback: pods' endpoints would route nowhere")
    with kerf_pods_backend(tmp_path) as backend:
        if backend.real_kubelet:
            backend.tag_image(PAUSE_IMAGE, DEMO_IMAGE)
        rehearsal = Rehearsal(backend.kubeconfig, tmp_path)
        admin = Kubectl(backend.kubeconfig)
        services: list[Service] = []
        published: set[str] = set()
        logs = ""
        try:
            for code in blocks("rehearse"):
                if code.startswith(DELETE_KERF):
                    published = wait_until(lambda: kerf_keys(admin), "the published values")
                    logs += kerf_logs(admin, services)
                    for service in services:  # the pods go with their Deployments
                        service.stop()
                if "kubectl get rightsizingrecommendations" in code:
                    wait_until(lambda: recommendation_written(admin), "the first record")
                if "kerf cleanup | sh" in code:
                    admin("-n", "kerf-demo", "annotate", "deployment", "web", *_pairs(PAUSE))
                if code.startswith("NEW_TAG=") and backend.real_kubelet:
                    new_tag = code.split("\n", 1)[0].removeprefix("NEW_TAG=")
                    backend.tag_image(IMAGE, f"{IMAGE.split(':')[0]}:{new_tag}")
                if "--dry-run=server" in code:
                    assert_sized(await dry_run_until_sized(rehearsal, code))
                    continue
                out = await rehearsal.run(code)
                starting = APPLY_KERF in code and not services
                if starting and not backend.real_kubelet:
                    services = start_kerf_where_its_pods_run(backend, rehearsal, address)
                if "proxy/metrics" in code:
                    assert "kerf_webhook_view_sync_age_seconds" in out
                    assert "kerf-webhook" in out  # the Lease listed
                if "kubectl get pods -n kerf-system" in code and backend.real_kubelet:
                    assert out.count("Running") == 4, out  # two webhook, two reconciler pods
                if "kubectl get rightsizingrecommendations" in code:
                    assert "deployment-web" in out, out
                    # The guide's "logs are JSON lines" holds: the webhook's line for the
                    # demo's admissions, the reconciler's for the values it acted on.
                    logs = wait_until(partial(acted, admin, services), "kerf's logs")
                if "kerf cleanup | sh" in code:
                    left = annotations(admin)
                    assert not published & set(left), left
                    assert left.items() >= PAUSE.items(), "people's keys stay"
                if code.startswith(DELETE_KERF):
                    namespaces = admin.json("namespaces")["items"]
                    assert NAMESPACE not in {n["metadata"]["name"] for n in namespaces}
                    crds = admin.json("crd", "-l", "app.kubernetes.io/part-of=kerf")
                    assert crds["items"] == []
        finally:
            for service in services:
                service.stop()
    assert rehearsal.ran == blocks("rehearse")
    assert "Traceback" not in logs, logs[-3000:]
    assert "is forbidden: User" not in logs, "a 403 is a bug in manifests/"


def _pairs(values: dict[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in values.items()]
