"""`python -m devcluster` end to end: the real control plane and the node agent.

Skipped unless the binaries are there (`make cluster-tools`, or KERF_CLUSTER_TOOLS=/dir).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from tests.devcluster.conftest import Cluster, start_cluster, wait_for

pytestmark = pytest.mark.e2e
Obj = dict[str, Any]


def _container(name: str, cpu: str = "100m", memory: str = "64Mi", **extra: Any) -> Obj:
    return {
        "name": name,
        "image": "nginx:1.27",
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}},
        **extra,
    }


def _pod(name: str, namespace: str, *containers: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": list(containers) or [_container("app")], **spec},
    }


def _condition(pod: Obj, ctype: str) -> Obj | None:
    return next(
        (c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None
    )


def _running(cluster: Cluster, namespace: str, name: str) -> Obj:
    def ready() -> Obj | None:
        pod = cluster.get("pod", name, "-n", namespace)
        ok = (_condition(pod, "Ready") or {}).get("status") == "True"
        return pod if pod["status"].get("phase") == "Running" and ok else None

    return wait_for(ready, f"pod {namespace}/{name} Running and Ready")


def _resize(cluster: Cluster, namespace: str, name: str, patch: Obj) -> str:
    return cluster.kubectl(
        "patch", "pod", name, "-n", namespace, "--subresource", "resize", "-p", json.dumps(patch)
    )


def _pending(cluster: Cluster, namespace: str, name: str, reason: str) -> Obj:
    return wait_for(
        lambda: (
            (c := _condition(cluster.get("pod", name, "-n", namespace), "PodResizePending"))
            and c.get("reason") == reason
            and c
        ),
        f"PodResizePending {reason} on {name}",
    )


def _event(cluster: Cluster, namespace: str, reason: str) -> Obj:
    return wait_for(
        lambda: next(
            (e for e in cluster.get("events", "-n", namespace)["items"] if e["reason"] == reason),
            None,
        ),
        f"a {reason} Event",
    )


def test_start_shows_ready_nodes_and_sigterm_leaves_nothing(tmp_path: Path) -> None:
    started = start_cluster(tmp_path, "--nodes", "2", "--node-cpu", "2", "--node-memory", "4Gi")
    try:
        assert started.first_line.startswith("devcluster serving on https://127.0.0.1:")
        served = f", kubeconfig {started.kubeconfig}, cadvisor metrics http://127.0.0.1:"
        assert served in started.first_line
        assert started.first_line.endswith("/metrics/cadvisor")
        assert started.kubeconfig.exists()
        nodes = started.get("nodes")["items"]
        assert sorted(n["metadata"]["name"] for n in nodes) == ["node-1", "node-2"]
        for node in nodes:
            assert _condition(node, "Ready")["status"] == "True"
            assert node["status"]["allocatable"]["cpu"] == "2"
        table = started.kubectl("get", "nodes", "--no-headers").splitlines()
        assert len(table) == 2 and all(line.split()[1] == "Ready" for line in table)
        children = started.children()
        assert len(children) == 4  # etcd, apiserver, controller manager, scheduler
        (data_dir,) = list(started.tmpdir.iterdir())
        assert data_dir.name.startswith("devcluster-")
    finally:
        code = started.stop()
    assert code == 0
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in _state(pid)
    assert list(started.tmpdir.iterdir()) == []


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].splitlines()[0]
    except (OSError, IndexError):
        return "zombie"


def test_a_deployment_runs_ready_with_resources(cluster: Cluster, namespace: str) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [_container("app", "250m", "128Mi")]},
            },
        },
    }
    cluster.apply(deployment)

    def ready_pods() -> list[Obj]:
        items = cluster.get("pods", "-n", namespace, "-l", "app=web")["items"]
        ok = [
            p
            for p in items
            if p["status"].get("phase") == "Running"
            and (_condition(p, "Ready") or {}).get("status") == "True"
        ]
        return ok if len(ok) == 2 else []

    for pod in wait_for(ready_pods, "2 Running, Ready pods"):
        (entry,) = pod["status"]["containerStatuses"]
        assert entry["resources"] == {
            "requests": {"cpu": "250m", "memory": "128Mi"},
            "limits": {"memory": "128Mi"},
        }
        assert entry["allocatedResources"] == {"cpu": "250m", "memory": "128Mi"}
        assert entry["ready"] and entry["started"] and entry["restartCount"] == 0
        assert entry["imageID"] and entry["containerID"].startswith("containerd://")
        assert "startedAt" in entry["state"]["running"]
        assert pod["status"]["podIP"] and pod["status"]["hostIP"]
    wait_for(
        lambda: (
            cluster.get("deployment", "web", "-n", namespace)["status"].get("readyReplicas") == 2
        ),
        "the Deployment's readyReplicas 2",
    )


async def test_an_in_place_resize_is_applied(cluster: Cluster, namespace: str) -> None:
    cluster.apply(_pod("app", namespace))
    _running(cluster, namespace, "app")
    async with await config.new_client_from_config(str(cluster.kubeconfig)) as api:
        core = client.CoreV1Api(api)
        patch = {
            "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "300m"}}}]}
        }
        resized = await core.patch_namespaced_pod_resize("app", namespace, patch)
    generation = resized.metadata.generation
    assert generation == 2

    def applied() -> Obj | None:
        pod = cluster.get("pod", "app", "-n", namespace)
        entry = pod["status"]["containerStatuses"][0]
        return pod if entry["resources"]["requests"]["cpu"] == "300m" else None

    pod = wait_for(applied, "the new cpu request in status")
    assert pod["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] == "300m"
    assert pod["status"]["observedGeneration"] == generation
    assert _condition(pod, "PodResizePending") is None
    assert _condition(pod, "Ready")["observedGeneration"] == generation


def test_a_resize_that_does_not_fit_now_is_deferred(cluster: Cluster, namespace: str) -> None:
    cluster.apply(_pod("filler", namespace, _container("app", "1")))
    cluster.apply(_pod("app", namespace))
    _running(cluster, namespace, "filler")
    _running(cluster, namespace, "app")
    # The node's whole allocatable: never fits beside the filler's core.
    _resize(
        cluster,
        namespace,
        "app",
        {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "4"}}}]}},
    )
    condition = _pending(cluster, namespace, "app", "Deferred")
    assert condition["message"].startswith(
        "Node didn't have enough resource: cpu, requested: 4000, used: "
    )
    assert condition["observedGeneration"] == 2
    pod = cluster.get("pod", "app", "-n", namespace)
    assert pod["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] == "100m"


def test_a_resize_beyond_the_node_is_infeasible(cluster: Cluster, namespace: str) -> None:
    cluster.apply(_pod("app", namespace))
    _running(cluster, namespace, "app")
    _resize(
        cluster,
        namespace,
        "app",
        {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "5"}}}]}},
    )
    condition = _pending(cluster, namespace, "app", "Infeasible")
    assert (
        condition["message"]
        == "Node didn't have enough capacity: cpu, requested: 5000, capacity: 4000"
    )


def test_a_sidecar_resizes_through_init_containers(cluster: Cluster, namespace: str) -> None:
    sidecar = _container("proxy", "50m", "32Mi", restartPolicy="Always")
    cluster.apply(_pod("app", namespace, _container("app"), initContainers=[sidecar]))
    pod = _running(cluster, namespace, "app")
    (entry,) = pod["status"]["initContainerStatuses"]
    assert entry["ready"] and "running" in entry["state"]
    wrong = cluster.kubectl(
        "patch",
        "pod",
        "app",
        "-n",
        namespace,
        "--subresource",
        "resize",
        "-p",
        '{"spec":{"containers":[{"name":"proxy","resources":{"requests":{"cpu":"60m"}}}]}}',
        check=False,
    )
    assert "containers may not be added or removed on resize" in wrong
    _resize(
        cluster,
        namespace,
        "app",
        {
            "spec": {
                "initContainers": [{"name": "proxy", "resources": {"requests": {"cpu": "60m"}}}]
            }
        },
    )

    def applied() -> Obj | None:
        pod = cluster.get("pod", "app", "-n", namespace)
        entry = pod["status"]["initContainerStatuses"][0]
        return pod if entry["allocatedResources"]["cpu"] == "60m" else None

    pod = wait_for(applied, "the sidecar's new cpu request in status")
    assert pod["status"]["initContainerStatuses"][0]["resources"]["requests"]["cpu"] == "60m"


def test_the_oom_kill_annotation_kills_once_per_value(cluster: Cluster, namespace: str) -> None:
    cluster.apply(_pod("app", namespace))
    _running(cluster, namespace, "app")
    for value, restarts in (("app", 1), ("app/2", 2)):
        cluster.kubectl(
            "annotate",
            "--overwrite",
            "pod",
            "app",
            "-n",
            namespace,
            f"sim.kerf.dev/oom-kill={value}",
        )
        entry = wait_for(
            lambda r=restarts: (
                (e := cluster.get("pod", "app", "-n", namespace)["status"]["containerStatuses"][0])
                and e["restartCount"] == r
                and e
            ),
            f"restartCount {restarts}",
        )
        terminated = entry["lastState"]["terminated"]
        assert (terminated["reason"], terminated["exitCode"]) == ("OOMKilled", 137)
        assert terminated["finishedAt"]
    event = _event(cluster, namespace, "OOMKilling")
    assert event["involvedObject"]["fieldPath"] == "spec.containers{app}"


def test_crash_loop_annotation_until_removed(cluster: Cluster, namespace: str) -> None:
    cluster.apply(_pod("app", namespace))
    _running(cluster, namespace, "app")
    cluster.kubectl("annotate", "pod", "app", "-n", namespace, "sim.kerf.dev/crash-loop=app")
    wait_for(
        lambda: (
            cluster.get("pod", "app", "-n", namespace)["status"]["containerStatuses"][0]["state"]
            .get("waiting", {})
            .get("reason")
            == "CrashLoopBackOff"
        ),
        "CrashLoopBackOff",
    )
    cluster.kubectl("annotate", "pod", "app", "-n", namespace, "sim.kerf.dev/crash-loop-")
    _running(cluster, namespace, "app")


def test_a_deleted_pod_goes_away(cluster: Cluster, namespace: str) -> None:
    cluster.apply(_pod("app", namespace))
    _running(cluster, namespace, "app")
    cluster.kubectl("delete", "pod", "app", "-n", namespace, "--wait=false")
    wait_for(
        lambda: "NotFound" in cluster.kubectl("get", "pod", "app", "-n", namespace, check=False),
        "the pod gone (its 30 s grace period acted out by the node agent)",
        timeout_s=20,
    )


def test_a_node_created_through_the_api_becomes_ready(cluster: Cluster) -> None:
    cluster.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "late-node"}})
    try:
        node = wait_for(
            lambda: (
                (n := cluster.get("node", "late-node"))
                and (_condition(n, "Ready") or {}).get("status") == "True"
                and n
            ),
            "late-node Ready",
        )
        assert node["status"]["capacity"]["pods"] == "110"
        wait_for(
            lambda: "late-node" in cluster.kubectl("get", "lease", "-n", "kube-node-lease"),
            "late-node's Lease",
        )
    finally:
        cluster.kubectl("delete", "node", "late-node", "--wait=false")


def test_kubeconfig_is_private(cluster: Cluster) -> None:
    assert os.stat(cluster.kubeconfig).st_mode & 0o077 == 0


def test_a_component_dying_stops_the_cluster_naming_it(tmp_path: Path) -> None:
    started = start_cluster(tmp_path)
    children = started.children()
    scheduler = next(
        pid for pid in children if "kube-scheduler" in Path(f"/proc/{pid}/cmdline").read_text()
    )
    os.kill(scheduler, signal.SIGKILL)
    try:
        code = started.process.wait(60)
    finally:
        started.stop()
    assert code == 1
    errors = (tmp_path / "stderr.txt").read_text().splitlines()
    assert errors[0] == "devcluster: kube-scheduler exited with code -9"
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in _state(pid)
    assert list(started.tmpdir.iterdir()) == []
