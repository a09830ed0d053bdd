"""The real kubectl 1.35 against the simulator, one test per verb kerf's users need.

kubectl is installed by scripts/get-kubectl.sh (CI runs it first); these tests fail,
never skip, when it is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
import yaml

from kubesim.sim import Simulator
from tests.kubesim.test_leases_crds import CRD

ROOT = Path(__file__).resolve().parents[2]


def kubectl_binary() -> str:
    path = os.environ.get("KUBECTL") or str(ROOT / ".tools" / "bin" / "kubectl")
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"kubectl not found at {path}: run scripts/get-kubectl.sh (or set $KUBECTL)",
            pytrace=False,
        )
    return path


class Kubectl:
    def __init__(self, sim: Simulator, tmp_path: Path) -> None:
        self.binary = kubectl_binary()
        self.kubeconfig = str(sim.kubeconfig_path)
        self.cache = str(tmp_path / "kube-cache")
        self.tmp = tmp_path

    async def run(
        self, *args: str, ok: bool = True, stdin: str | None = None
    ) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            "--kubeconfig",
            self.kubeconfig,
            "--cache-dir",
            self.cache,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 60)
        code = proc.returncode or 0
        if ok:
            assert code == 0, f"kubectl {' '.join(args)} failed ({code}): {err.decode()}"
        return code, out.decode(), err.decode()

    def file(self, name: str, doc: dict) -> str:
        path = self.tmp / name
        path.write_text(yaml.safe_dump(doc))
        return str(path)


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "nginx:1.27",
                "resources": {
                    "requests": {"cpu": "100m", "memory": "64Mi"},
                    "limits": {"cpu": "500m", "memory": "128Mi"},
                },
            }
        ]
    },
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "shop"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "shop"}},
        "template": {
            "metadata": {"labels": {"app": "shop"}},
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "nginx:1.27",
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    }
                ]
            },
        },
    },
}


@pytest.fixture
async def kubectl(sim: Simulator, tmp_path: Path) -> Kubectl:
    await sim.add_node("node-1")
    return Kubectl(sim, tmp_path)


async def test_create_and_get(sim, kubectl: Kubectl) -> None:
    _, out, _ = await kubectl.run("create", "-f", kubectl.file("pod.yaml", POD))
    assert out.strip() == "pod/web created"
    await sim.settle()
    _, out, _ = await kubectl.run("get", "pods")
    header, row = out.strip().splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["web", "1/1", "Running", "0"]
    code, _, err = await kubectl.run("get", "pod", "missing", ok=False)
    assert code == 1 and 'pods "missing" not found' in err


async def test_get_yaml(sim, kubectl: Kubectl) -> None:
    await kubectl.run("create", "-f", kubectl.file("pod.yaml", POD))
    await sim.settle()
    _, out, _ = await kubectl.run("get", "pod", "web", "-o", "yaml")
    pod = yaml.safe_load(out)
    assert (
        pod["kind"] == "Pod"
        and pod["status"]["phase"] == "Running"
        and pod["spec"]["nodeName"] == "node-1"
    )


async def test_apply_creates_updates_and_removes_fields(sim, kubectl: Kubectl) -> None:
    path = kubectl.file("deploy.yaml", DEPLOYMENT)
    _, out, _ = await kubectl.run("apply", "-f", path)
    assert out.strip() == "deployment.apps/shop created"
    changed = json.loads(json.dumps(DEPLOYMENT))
    changed["spec"]["replicas"] = 3
    changed["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "B", "value": "2"}]
    _, out, _ = await kubectl.run("apply", "-f", kubectl.file("deploy.yaml", changed))
    assert out.strip() == "deployment.apps/shop configured"
    await sim.settle()
    stored = sim.store.get(("apps", "deployments"), "default", "shop")
    assert stored["spec"]["replicas"] == 3
    assert stored["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "B", "value": "2"}
    ]
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]
    assert (
        len(
            [
                p
                for p in sim.store.list(("", "pods"), "default")
                if p["metadata"]["name"].startswith("shop-")
            ]
        )
        == 3
    )
    _, out, _ = await kubectl.run("apply", "-f", kubectl.file("deploy.yaml", changed))
    assert out.strip() == "deployment.apps/shop unchanged"


async def test_apply_custom_resources(sim, kubectl: Kubectl) -> None:
    await kubectl.run("apply", "-f", kubectl.file("crd.yaml", CRD))
    cr = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "StaticPolicy",
        "metadata": {"name": "p"},
        "spec": {"automationStrategyRef": {"name": "s"}, "weight": 2},
    }
    await kubectl.run("apply", "-f", kubectl.file("cr.yaml", cr))
    cr["spec"]["weight"] = 5
    await kubectl.run("apply", "-f", kubectl.file("cr.yaml", cr))
    _, out, _ = await kubectl.run("get", "staticpolicies")
    assert out.split() == ["NAME", "MODE", "AGE", "p", "auto", "0s"]
    cr["spec"]["weight"] = -1
    code, _, err = await kubectl.run("apply", "-f", kubectl.file("cr.yaml", cr), ok=False)
    assert code == 1
    assert (
        'The StaticPolicy "p" is invalid: spec.weight: Invalid value: -1: spec.weight in body should be greater than or equal to 0'
        in err
    )


async def test_annotate_label_patch_delete(sim, kubectl: Kubectl) -> None:
    await kubectl.run("create", "-f", kubectl.file("pod.yaml", POD))
    _, out, _ = await kubectl.run(
        "annotate", "pod", "web", "rightsizing.kubex.ai/pause-until=infinite"
    )
    assert out.strip() == "pod/web annotated"
    _, out, _ = await kubectl.run("label", "pod", "web", "tier=front")
    assert out.strip() == "pod/web labeled"
    _, out, _ = await kubectl.run(
        "patch", "pod", "web", "--type", "merge", "-p", '{"metadata":{"labels":{"x":"y"}}}'
    )
    assert out.strip() == "pod/web patched"
    _, out, _ = await kubectl.run(
        "patch",
        "pod",
        "web",
        "--type",
        "json",
        "-p",
        '[{"op":"remove","path":"/metadata/labels/x"}]',
    )
    pod = sim.store.get(("", "pods"), "default", "web")
    assert pod["metadata"]["annotations"] == {"rightsizing.kubex.ai/pause-until": "infinite"}
    assert pod["metadata"]["labels"] == {"app": "web", "tier": "front"}
    _, out, _ = await kubectl.run("delete", "pod", "web")
    assert out.strip() == 'pod "web" deleted from default namespace'
    assert sim.store.get(("", "pods"), "default", "web") is None


async def test_patch_resize_subresource(sim, kubectl: Kubectl) -> None:
    await kubectl.run("create", "-f", kubectl.file("pod.yaml", POD))
    await sim.settle()
    _, out, _ = await kubectl.run(
        "patch",
        "pod",
        "web",
        "--subresource",
        "resize",
        "-p",
        '{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"200m"}}}]}}',
    )
    assert out.strip() == "pod/web patched"
    await sim.settle()
    pod = sim.store.get(("", "pods"), "default", "web")
    assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "200m"
    assert pod["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "200m"
    code, _, err = await kubectl.run(
        "patch",
        "pod",
        "web",
        "--subresource",
        "resize",
        "-p",
        '{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"1"}}}]}}',
        ok=False,
    )
    assert code == 1
    assert (
        'The Pod "web" is invalid: spec.containers[0].resources.requests: Invalid value: "1": must be less than or equal to cpu limit of 500m'
        in err
    )
