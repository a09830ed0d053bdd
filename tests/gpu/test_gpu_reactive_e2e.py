"""GpuReactivePolicies end to end on the real control plane (kube-apiserver, scheduler and
controller-manager 1.35, devcluster's node agent): nodes that advertise `nvidia.com/gpu: 4`
as an extended resource, a real Prometheus backfilled with promtool, `kerf recommend
--once` as the recommender's evaluation, and kerf's webhook and reconciler carrying the GPU
row out by eviction. Skipped when the control plane or Prometheus is not installed."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.backend import real_available, running_backend
from harness.install import service_kubeconfig
from harness.services import KERF, Kerf, running_kerf
from harness.wait import wait_until
from tests.e2e.scenario import Namespace, make_namespace
from tests.recommender.prometheus import backfill, free_port, needs_prometheus, running_prometheus

pytestmark = [pytest.mark.e2e, needs_prometheus]
COMPUTE = "kubex_gpu_container_sm_utilization_percent"
MEMORY = "kubex_gpu_container_memory_footprint_percent"
GROUP_VERSION = "rightsizing.kubex.ai/v1alpha1"
GPU = "nvidia.com/gpu"
FRACTION = "gpu-fraction"
KAI_QUEUE = "kai.scheduler/queue"


@pytest.fixture(scope="module")
def kerf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kerf]:
    """kerf (webhook, one reconciler) on the real control plane with two agent nodes of 4
    GPUs each, and the recommender's account."""
    if not real_available():
        pytest.skip("the real control plane is not built: run make cluster-tools")
    workdir = tmp_path_factory.mktemp("gpu")
    with (
        running_backend("real", workdir, nodes=2) as cluster,
        running_kerf(cluster, workdir) as running,
    ):
        for part in ("serviceaccount.yaml", "rbac.yaml"):
            running.kubectl("apply", "-f", f"manifests/recommender/{part}")
        for node in running.kubectl.json("nodes")["items"]:
            _advertise_gpus(running, node["metadata"]["name"])
        running.kubectl.apply(
            {
                "apiVersion": GROUP_VERSION,
                "kind": "GlobalConfiguration",
                "metadata": {"name": "global-config"},
                # One replica may be disrupted, and a change may follow the last at once.
                "spec": {
                    "guardrailDefaults": {"allowSingleReplicaDisruption": True, "cooldown": "1s"}
                },
            }
        )
        yield running


def _advertise_gpus(kerf: Kerf, node: str) -> None:
    """The node's status says 4 GPUs, as a device plugin makes a kubelet say; the agent
    keeps what the status says at its next heartbeats."""
    gpus = {"status": {"capacity": {GPU: "4"}, "allocatable": {GPU: "4"}}}
    kerf.kubectl(
        "patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps(gpus)
    )

    def advertised() -> bool:
        status = kerf.kubectl.json("node", node)["status"]
        return bool(status["allocatable"].get(GPU) == "4")

    wait_until(advertised, f"{node} advertising 4 GPUs")


def strategy() -> dict[str, Any]:
    switches = {"upsize": True, "downsize": True}
    return {
        "inPlaceResize": {"enabled": True},
        "podEviction": {"enabled": True},
        "enablement": {"gpu": {"requests": switches, "limits": switches}},
    }


def train(name: str) -> dict[str, Any]:
    """A Deployment of one replica asking for 1 GPU."""
    labels = {"app": name}
    gpu = {GPU: "1"}
    container = {
        "name": "app",
        "image": "ml/train:1",
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi", **gpu}, "limits": gpu},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def policy(name: str, max_percent: int) -> dict[str, Any]:
    """Kubex's documented policy for Deployment `name`, pods counted at once (their
    history is backfilled)."""
    prometheus = {"namespaceLabel": "namespace", "podLabel": "pod", "containerLabel": "container"}
    signal = {
        "upsize": {
            "thresholdPercent": 125,
            "metricsWindow": "10m",
            "headroomPercent": 20,
            "maxPercent": max_percent,
        },
        "scaleBack": {"thresholdPercent": 60, "metricsWindow": "10m", "headroomPercent": 20},
    }
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "GpuReactivePolicy",
        "metadata": {"name": name},
        "spec": {
            "experimental": {"gpuKaiContract": "v1alpha1-2026-07"},
            "scope": {"labelSelector": {"matchLabels": {"app": name}}},
            "minPodMetricsAge": "0s",
            "automationStrategyRef": {"name": "default"},
            "metrics": {
                "compute": {**signal, "prometheus": {**prometheus, "metric": COMPUTE}},
                "memory": {
                    **signal,
                    "prometheus": {
                        **prometheus,
                        "metric": MEMORY,
                        "interpretation": "currentAllocation",
                    },
                },
            },
        },
    }


def history(namespace: str, usage: dict[str, tuple[float, float]]) -> str:
    """Twenty minutes, to a few seconds ago, of both series of each pod's container `app`:
    pod -> (compute % of one GPU, memory % of the allocation)."""
    end = time.time() - 5
    families: dict[str, list[str]] = {COMPUTE: [], MEMORY: []}
    for pod, (compute, memory) in sorted(usage.items()):
        labels = f'namespace="{namespace}",pod="{pod}",container="app"'
        t = end - 1200
        while t <= end:
            families[COMPUTE].append(f"{COMPUTE}{{{labels}}} {compute} {t:.0f}")
            families[MEMORY].append(f"{MEMORY}{{{labels}}} {memory} {t:.0f}")
            t += 15
    lines = []
    for family, points in families.items():
        lines += [f"# HELP {family} generated", f"# TYPE {family} gauge", *points]
    return "\n".join([*lines, "# EOF"]) + "\n"


def recommend(kerf: Kerf, url: str, workdir: Path) -> dict[str, Any]:
    """One `kerf recommend --once -o json` as the recommender's account; its `gpu[]` by
    workload."""
    config = service_kubeconfig(
        kerf.backend, kerf.kubectl, "kerf-recommender", workdir / "recommender.kubeconfig"
    )
    run = subprocess.run(
        [KERF, "recommend", "--kubeconfig", str(config), "--prometheus", url, "--once"]
        + ["-o", "json", "--log-level", "warning"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # 1: the hourly analysis found no cAdvisor series; the GPU evaluation still ran.
    assert run.returncode in (0, 1), run.stderr
    found = {g["workload"].split("/", 2)[2]: g for g in json.loads(run.stdout).get("gpu", [])}
    assert found, run.stdout + run.stderr
    return found


def gpus(pod: dict[str, Any]) -> tuple[str, str]:
    resources = pod["spec"]["containers"][0]["resources"]
    return resources["requests"].get(GPU, ""), resources["limits"].get(GPU, "")


def replaced_with(ns: Namespace, app: str, count: str) -> dict[str, Any]:
    """Wait until the Deployment's one live pod runs with `count` GPUs."""

    def found() -> dict[str, Any] | None:
        pods = [p for p in ns.pods(app) if p["status"].get("phase") == "Running"]
        return pods[0] if len(pods) == 1 and gpus(pods[0]) == (count, count) else None

    return wait_until(found, f"{app} recreated with {count} GPUs", timeout_s=180)


def test_gpu_upsize_cap_and_scale_back_on_the_real_control_plane(
    kerf: Kerf, tmp_path: Path
) -> None:
    ns = make_namespace(kerf, "e2e-gpu", strategy())
    for name, max_percent in (("train4", 400), ("train2", 200)):
        ns.apply(train(name))
        ns.apply(policy(name, max_percent))
    pods = {name: ns.running(name, 1)[0]["metadata"]["name"] for name in ("train4", "train2")}

    # 250 % of one GPU, sustained: 2.5 × 1.2 = 3 GPUs under maxPercent 400, the cap (2)
    # under 200.
    hot = {pod: (250.0, 40.0) for pod in pods.values()}
    backfill(history(ns.name, hot), tmp_path / "hot")
    with running_prometheus(tmp_path / "hot") as url:
        found = recommend(kerf, url, tmp_path)
    assert (found["train4"]["values"], found["train4"]["drivingMetric"]) == (
        {"app": "3"},
        "compute",
    )
    assert found["train2"]["values"] == {"app": "2"}
    assert found["train4"]["reason"] == "GpuUpsize"
    upsized = replaced_with(ns, "train4", "3")
    replaced_with(ns, "train2", "2")
    record = ns.status("deployment-train4")
    assert record["gpu"]["baseline"] == {"app": "1"}
    assert record["gpu"]["drivingMetric"] == "compute"

    # 20 % of one GPU for the window: back to the baseline (0.24 GPU, floored to 1).
    quiet = {upsized["metadata"]["name"]: (20.0, 10.0)}
    backfill(history(ns.name, quiet), tmp_path / "quiet")
    with running_prometheus(tmp_path / "quiet") as url:
        found = recommend(kerf, url, tmp_path)
    assert (found["train4"]["reason"], found["train4"]["values"]) == ("GpuScaleBack", {"app": "1"})
    replaced_with(ns, "train4", "1")


def kai_train(name: str) -> dict[str, Any]:
    """A Deployment KAI shares a GPU with: a 0.3 `gpu-fraction` and a queue, no
    `nvidia.com/gpu` (no KAI scheduler runs here; the API server keeps both as written)."""
    deployment = train(name)
    template = deployment["spec"]["template"]
    template["metadata"] = {
        "labels": {"app": name, KAI_QUEUE: "team-a"},
        "annotations": {FRACTION: "0.3"},
    }
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "50m"}}
    return deployment


def test_a_kai_workload_gets_its_fraction_changed_and_keeps_its_queue(
    kerf: Kerf, tmp_path: Path
) -> None:
    ns = make_namespace(kerf, "e2e-gpu-kai", strategy())
    ns.apply(kai_train("shared"))
    ns.apply(policy("shared", 400))
    [pod] = ns.running("shared", 1)

    # 50 % of one GPU on a 0.3 share: 0.5 × 1.2 = 0.6 of a GPU, under the cap (1.2).
    backfill(history(ns.name, {pod["metadata"]["name"]: (50.0, 40.0)}), tmp_path / "kai")
    with running_prometheus(tmp_path / "kai") as url:
        found = recommend(kerf, url, tmp_path)
    assert (found["shared"]["reason"], found["shared"]["values"]) == ("GpuUpsize", {"app": "0.6"})

    def replaced() -> dict[str, Any] | None:
        pods = [p for p in ns.pods("shared") if p["status"].get("phase") == "Running"]
        if len(pods) != 1 or pods[0]["metadata"]["uid"] == pod["metadata"]["uid"]:
            return None
        return pods[0] if pods[0]["metadata"]["annotations"].get(FRACTION) == "0.6" else None

    new = wait_until(replaced, "shared recreated with gpu-fraction 0.6", timeout_s=180)
    assert new["metadata"]["labels"][KAI_QUEUE] == "team-a"
    # KAI reads the annotation: the container has no GPU resource
    assert new["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "50m"}}
    assert ns.status("deployment-shared")["gpu"]["baseline"] == {"app": "0.3"}


def test_prometheus_down_is_a_reason_in_the_status_and_changes_nothing(
    kerf: Kerf, tmp_path: Path
) -> None:
    ns = make_namespace(kerf, "e2e-gpu-down", strategy())
    ns.apply(train("steady"))
    ns.apply(policy("steady", 400))
    [pod] = ns.running("steady", 1)
    found = recommend(kerf, f"http://127.0.0.1:{free_port()}", tmp_path)
    assert found["steady"]["reason"] == "GpuPrometheusUnavailable"
    assert ns.status("deployment-steady")["gpu"]["reason"] == "GpuPrometheusUnavailable"
    annotations = ns.get("deployment", "steady")["metadata"].get("annotations") or {}
    assert not any(k.startswith("gpureactive.") for k in annotations)
    assert [p["metadata"]["uid"] for p in ns.pods("steady")] == [pod["metadata"]["uid"]]
