"""`python -m devcluster --kubelet real`: containerd and a real kubelet on this machine.

A pod really runs (its logs and exec are the kubelet's), and the machine is left as it was
found: mounts, links, iptables rules and the sysctls the node touches, after a stop and
after a SIGKILL of devcluster followed by the next start's clean-up."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster import realnode
from devcluster.host import HostState
from devcluster.images import LOAD_IMAGE
from devcluster.processes import MissingBinary, find_images
from tests.devcluster.conftest import Cluster, start_cluster, wait_for

pytestmark = pytest.mark.e2e


def _real_node_missing() -> str:
    why = realnode.tools_missing()
    if not why:
        try:
            find_images()
        except MissingBinary as exc:
            why = f"{exc.path} is missing (make node-images)"
    return why


requires_real_node = pytest.mark.skipif(
    bool(_real_node_missing()), reason=f"no real node here: {_real_node_missing()}"
)


def load_pod(name: str, cpu: str = "100m", memory: str = "64Mi") -> dict[str, object]:
    """A pod running kerf-load with a little CPU and memory use, resizable in place."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "load",
                    "image": LOAD_IMAGE,
                    "imagePullPolicy": "Never",
                    "args": ["run", "--cpu", "50m", "--memory", "16Mi"],
                    "resources": {
                        "requests": {"cpu": cpu, "memory": memory},
                        "limits": {"cpu": cpu, "memory": memory},
                    },
                }
            ],
        },
    }


@pytest.fixture
def real(tmp_path: Path) -> Iterator[Cluster]:
    """A real node for one test (one kubelet runs on a machine at a time)."""
    running = start_cluster(tmp_path, "--kubelet", "real")
    try:
        yield running
    finally:
        running.stop()


def _running(cluster: Cluster, namespace: str, name: str) -> dict[str, object] | None:
    pod = cluster.get("pod", name, "-n", namespace)
    statuses = pod["status"].get("containerStatuses") or []
    return pod if statuses and all(s.get("ready") for s in statuses) else None


@requires_real_node
def test_the_node_is_a_real_kubelet_and_its_pods_really_run(real: Cluster) -> None:
    assert "with the real kubelet" in real.first_line
    node = real.get("node", realnode.NODE_NAME)
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.35.4"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://1.")
    real.kubectl("create", "namespace", "run")
    wait_for(
        lambda: real.kubectl("get", "sa", "default", "-n", "run", check=False).startswith("NAME"),
        "the default ServiceAccount",
    )
    real.apply({**load_pod("one"), "metadata": {"name": "one", "namespace": "run"}})
    pod = wait_for(lambda: _running(real, "run", "one"), "the pod to run", timeout_s=120)
    assert pod["status"]["podIP"].startswith("10.244.0.")
    logs = wait_for(lambda: real.kubectl("logs", "one", "-n", "run", check=False), "the pod's logs")
    assert "kerf-load: cpu=50m memory=16Mi" in logs
    limits = dict(
        line.split("=", 1)
        for line in real.kubectl("exec", "one", "-n", "run", "--", "kerf-load", "cgroup").split()
    )
    assert limits["memory.limit_in_bytes"] == str(64 * 2**20)
    assert limits["cpu.cfs_quota_us"] == "10000"
    events = real.get("events", "-n", "run", "--field-selector", "involvedObject.name=one")
    assert any(
        e["source"].get("component") == "kubelet" and e["reason"] == "Started"
        for e in events["items"]
    )


def _differences(before: HostState) -> list[str]:
    return before.differences(HostState.read())


def _start_with_a_pod(base: Path) -> Cluster:
    cluster = start_cluster(base, "--kubelet", "real")
    wait_for(
        lambda: cluster.kubectl("get", "sa", "default", check=False).startswith("NAME"),
        "the default ServiceAccount",
    )
    cluster.apply(load_pod("left"))
    wait_for(lambda: _running(cluster, "default", "left"), "the pod to run", timeout_s=120)
    return cluster


@requires_real_node
def test_a_stop_leaves_the_machine_as_it_was(tmp_path: Path) -> None:
    before = HostState.read()
    cluster = _start_with_a_pod(tmp_path / "one")
    try:
        during = _differences(before)
    finally:
        code = cluster.stop()
    assert any(line.startswith("mount ") for line in during), during
    assert any(line == f"link {realnode.BRIDGE}" for line in during), during
    assert code == 0
    assert _differences(before) == []
    assert not list((tmp_path / "one" / "tmp").iterdir())


@requires_real_node
def test_after_a_sigkill_the_next_start_cleans_up(tmp_path: Path) -> None:
    before = HostState.read()
    killed = _start_with_a_pod(tmp_path / "killed")
    killed.process.send_signal(signal.SIGKILL)
    killed.process.wait(30)
    left = _differences(before)
    record = Path("/run/kerf-devcluster") / f"{killed.process.pid}.json"
    recorded = json.loads(record.read_text())
    after = start_cluster(tmp_path / "next", "--kubelet", "real")
    assert after.stop() == 0
    assert any(line.startswith("mount ") for line in left), left
    assert recorded["owner"] == killed.process.pid
    assert not record.exists()
    assert _differences(before) == []
    assert not [p for p in (tmp_path / "killed" / "tmp").iterdir() if os.listdir(p)]
