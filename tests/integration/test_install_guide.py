"""docs/install.md, rehearsed: every `rehearse` block runs verbatim, in order, against kubesim.

The blocks run in bash with the project's kubectl and kerf, from a copy of the repository's
manifests and examples. The test plays only what a simulator has no process for: it runs
`kerf webhook` (with the certificates the guide made) where the Deployment's pods would
run, writes kerf's workload annotations where the reconciler would, and stands in for
cert-manager (its CRDs, and the Ready condition it would set). The only kubectl commands
the guide may show without rehearsing are `kubectl logs` (kubesim runs no containers).
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio import client

from kubesim.sim import Simulator
from kubesim.testing import running_sim
from tests.integration.guide import (
    APPLY_KERF,
    DELETE_KERF,
    FENCE,
    GUIDE,
    PAUSE,
    Rehearsal,
    assert_sized,
    blocks,
    dry_run_until_sized,
    kubectl_lines,
)

#: the longest files start first (tests/conftest.py)
pytestmark = pytest.mark.early
KERF_KEYS = {
    "static.rightsizing.kubex.ai/desired-resource-requests": '{"app":{"cpu":"250m"}}',
    "rightsizing.kubex.ai/rollback-state": '{"mode":"idle"}',
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def webhook_where_its_pods_would_run(
    sim: Simulator, rehearsal: Rehearsal
) -> AsyncIterator[None]:
    """`kerf webhook` on the cluster, with the guide's certificates, serving the Service."""
    port = free_port()
    certs = rehearsal.cwd / "certs"
    proc = await asyncio.create_subprocess_exec(
        str(rehearsal.cwd / ".venv" / "bin" / "kerf"),
        "webhook",
        "--kubeconfig",
        str(sim.kubeconfig_path),
        "--tls-cert",
        str(certs / "tls.crt"),
        "--tls-key",
        str(certs / "tls.key"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        env={**os.environ, "POD_NAMESPACE": "kerf-system", "POD_NAME": "kerf-webhook-0"},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        sim.service_addresses[("kerf-system", "kerf-webhook")] = f"127.0.0.1:{port}"
        # What the readiness probe gates: a ready replica that renews its Lease.
        context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        async with httpx.AsyncClient(verify=context) as http:
            for _ in range(600):  # a bound, not a wait: up to a minute on a busy machine
                try:
                    if (await http.get(f"https://localhost:{port}/readyz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
            else:
                pytest.fail("kerf webhook did not become ready")
        yield
    finally:
        proc.terminate()
        await proc.wait()


async def annotate_like_the_reconciler(sim: Simulator, annotations: dict[str, Any]) -> None:
    async with sim.api_client() as api:
        await client.AppsV1Api(api).patch_namespaced_deployment(
            "web",
            "kerf-demo",
            {"metadata": {"annotations": annotations}},
            _content_type="application/merge-patch+json",
        )


async def deployment_annotations(sim: Simulator) -> dict[str, str]:
    async with sim.api_client() as api:
        web = await client.AppsV1Api(api).read_namespaced_deployment("web", "kerf-demo")
    return dict(web.metadata.annotations or {})


def test_the_guide_shows_no_kubectl_step_it_does_not_rehearse() -> None:
    fences = FENCE.findall(GUIDE.read_text())
    unrehearsed = [
        line
        for _, tag, code in fences
        if not tag.startswith("rehearse")
        for line in kubectl_lines(code)
    ]
    assert unrehearsed and all(" logs " in line for line in unrehearsed), unrehearsed
    assert len(blocks("rehearse")) >= 10


async def test_the_install_guide_works_when_pasted(tmp_path: Path) -> None:
    async with running_sim(tmp_path) as sim:
        for name in ("node-1", "node-2"):
            await sim.add_node(name, cpu="8", memory="16Gi")
        rehearsal = Rehearsal(sim.kubeconfig_path, tmp_path)
        webhook = None
        try:
            for code in blocks("rehearse"):
                if APPLY_KERF in code and webhook is None:
                    webhook = webhook_where_its_pods_would_run(sim, rehearsal)
                    await webhook.__aenter__()
                if "kerf cleanup | sh" in code:
                    await annotate_like_the_reconciler(sim, {**KERF_KEYS, **PAUSE})
                if "--dry-run=server" in code:
                    out = await dry_run_until_sized(rehearsal, code)
                    assert_sized(out)
                    continue
                out = await rehearsal.run(code)
                if "proxy/metrics" in code:
                    assert "kerf_webhook_view_sync_age_seconds" in out
                    assert "kerf-webhook" in out  # the Lease listed
                if "kerf cleanup | sh" in code:
                    left = await deployment_annotations(sim)
                    assert not set(KERF_KEYS) & set(left), left
                    assert left.items() >= PAUSE.items(), "people's keys stay"
                if code.startswith(DELETE_KERF):
                    async with sim.api_client() as api:
                        namespaces = await client.CoreV1Api(api).list_namespace()
                        crds = await client.ApiextensionsV1Api(
                            api
                        ).list_custom_resource_definition()
                    assert "kerf-system" not in {n.metadata.name for n in namespaces.items}
                    assert crds.items == []
        finally:
            if webhook is not None:
                await webhook.__aexit__(None, None, None)
    assert rehearsal.ran == blocks("rehearse")
    # The guide's working files went to the temporary directory, and went away at the end;
    # in the repository only the git-ignored certs/ is new.
    assert sorted(p.name for p in rehearsal.cwd.iterdir()) == [
        ".venv",
        "certs",
        "examples",
        "manifests",
    ]
    assert list(rehearsal.tmpdir.iterdir()) == []


CERT_MANAGER_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.cert-manager.io}}
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {{kind: {kind}, plural: {plural}, singular: {singular}}}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {{status: {{}}}}
      schema:
        openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


async def test_the_cert_manager_variant_works_when_pasted(tmp_path: Path) -> None:
    async with running_sim(tmp_path) as sim:
        rehearsal = Rehearsal(sim.kubeconfig_path, tmp_path)
        # cert-manager installed: its CRDs (a stand-in schema; kubesim runs no controller).
        for kind in ("Certificate", "Issuer"):
            singular = kind.lower()
            crd = CERT_MANAGER_CRD.format(kind=kind, plural=f"{singular}s", singular=singular)
            await rehearsal.run(f"kubectl apply -f - <<'YAML'\n{crd}YAML")
        [crds, namespace, *_] = blocks("rehearse")
        await rehearsal.run(crds)
        await rehearsal.run(namespace)
        apply, wait = blocks("rehearse-cert-manager")
        await rehearsal.run(apply)
        async with sim.api_client() as api:
            custom = client.CustomObjectsApi(api)
            # What cert-manager does once the Secret is written.
            await custom.patch_namespaced_custom_object_status(
                "cert-manager.io",
                "v1",
                "kerf-system",
                "certificates",
                "kerf-webhook-tls",
                {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                _content_type="application/merge-patch+json",
            )
            config = await client.AdmissionregistrationV1Api(
                api
            ).read_mutating_webhook_configuration("kerf-webhook")
        await rehearsal.run(wait)
        annotations = config.metadata.annotations
        assert annotations["cert-manager.io/inject-ca-from"] == "kerf-system/kerf-webhook-tls"
        async with sim.api_client() as api:
            webhook = await client.AppsV1Api(api).read_namespaced_deployment(
                "kerf-webhook", "kerf-system"
            )
        assert webhook.spec.template.spec.containers[0].image == "kerf:0.1.0"
