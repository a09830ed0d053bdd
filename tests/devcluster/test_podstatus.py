"""The node agent's pure logic: the status a node reports for a pod."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from devcluster import podstatus
from devcluster.fit import pod_requests, resize_verdict
from devcluster.podstatus import PodMemory, desired_status

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, tzinfo=UTC)
NODE: Obj = {
    "metadata": {"name": "node-1"},
    "status": {
        "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
    },
}


def _container(name: str, cpu: str, memory: str, **extra: Any) -> Obj:
    return {
        "name": name,
        "image": "nginx:1.27",
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}},
        **extra,
    }


def _pod(name: str = "web", *containers: Obj, init: list[Obj] | None = None, **meta: Any) -> Obj:
    spec: Obj = {
        "nodeName": "node-1",
        "containers": list(containers) or [_container("app", "500m", "256Mi")],
    }
    if init:
        spec["initContainers"] = init
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "generation": 1,
            **meta,
        },
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def _run(
    pod: Obj, others: list[Obj] | None = None, memory: PodMemory | None = None, now: datetime = NOW
) -> tuple[Obj, PodMemory]:
    status, memory = desired_status(
        pod, NODE, others or [], memory or PodMemory(), now, "10.244.0.2"
    )
    pod["status"] = status
    return status, memory


def _condition(status: Obj, ctype: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), None)


def test_a_bound_pod_runs_ready_with_its_resources() -> None:
    status, _ = _run(_pod())
    assert status["phase"] == "Running" and status["podIP"] == "10.244.0.2"
    (entry,) = status["containerStatuses"]
    assert entry["ready"] and entry["started"] and "running" in entry["state"]
    assert entry["resources"] == {
        "requests": {"cpu": "500m", "memory": "256Mi"},
        "limits": {"memory": "256Mi"},
    }
    assert entry["allocatedResources"] == {"cpu": "500m", "memory": "256Mi"}
    for ctype in (
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ):
        assert _condition(status, ctype)["status"] == "True"


def test_ephemeral_storage_is_reported_as_asked_as_a_kubelet_does() -> None:
    """A kubelet's status resources carry the container's ephemeral storage as its spec
    asks (an upstream resize spec compares them with the spec)."""
    container = _container("app", "20m", "20Mi")
    container["resources"]["requests"]["ephemeral-storage"] = "1"
    status, _ = _run(_pod("web", container))
    (entry,) = status["containerStatuses"]
    assert entry["resources"]["requests"] == {
        "cpu": "20m",
        "memory": "20Mi",
        "ephemeral-storage": "1",
    }
    assert entry["allocatedResources"]["ephemeral-storage"] == "1"
    second, _ = _run(_pod("web", container), now=NOW + timedelta(seconds=30))
    assert second["containerStatuses"][0]["resources"] == entry["resources"]


def test_a_second_sync_changes_nothing() -> None:
    pod = _pod()
    first, memory = _run(pod)
    second, _ = _run(pod, memory=memory, now=NOW + timedelta(seconds=30))
    assert second == first


def test_a_resize_that_fits_is_applied_with_the_generation() -> None:
    pod = _pod()
    _run(pod)
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    pod["metadata"]["generation"] = 2
    status, _ = _run(pod)
    entry = status["containerStatuses"][0]
    assert (
        entry["allocatedResources"]["cpu"] == "1" and entry["resources"]["requests"]["cpu"] == "1"
    )
    assert status["observedGeneration"] == 2 and _condition(status, "PodResizePending") is None
    assert _condition(status, "Ready")["observedGeneration"] == 2


def test_a_resize_beside_a_full_node_is_deferred_then_applied_when_room_appears() -> None:
    neighbour = _pod("big", _container("app", "3", "1Gi"))
    _run(neighbour)
    pod = _pod()
    _run(pod, [neighbour])
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1500m"
    status, _ = _run(pod, [neighbour])
    pending = _condition(status, "PodResizePending")
    assert pending["reason"] == "Deferred"
    assert (
        pending["message"]
        == "Node didn't have enough resource: cpu, requested: 1500, used: 3000, capacity: 4000"
    )
    assert status["containerStatuses"][0]["allocatedResources"]["cpu"] == "500m"
    status, _ = _run(pod, [])
    assert _condition(status, "PodResizePending") is None
    assert status["containerStatuses"][0]["allocatedResources"]["cpu"] == "1500m"


def test_a_resize_beyond_the_node_is_infeasible() -> None:
    pod = _pod()
    _run(pod)
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "9Gi"
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "9Gi"
    status, _ = _run(pod)
    pending = _condition(status, "PodResizePending")
    assert pending["reason"] == "Infeasible"
    assert (
        pending["message"]
        == f"Node didn't have enough capacity: memory, requested: {9 * 2**30}, capacity: {8 * 2**30}"
    )


def test_the_resize_annotation_forces_the_verdict() -> None:
    pod = _pod(annotations={podstatus.RESIZE: "Deferred"})
    _run(pod)
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "600m"
    status, _ = _run(pod)
    assert _condition(status, "PodResizePending")["reason"] == "Deferred"


def test_the_error_annotation_refuses_the_resize_from_one_time_on_until_removed() -> None:
    pod = _pod(annotations={podstatus.RESIZE: "Error"})
    _run(pod)
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "96Mi"
    status, _ = _run(pod)
    refused = _condition(status, "PodResizeInProgress")
    assert refused["reason"] == "Error" and "below current usage" in refused["message"]
    assert status["containerStatuses"][0]["resources"]["limits"]["memory"] != "96Mi"
    # A later sync keeps the refusal's start: kerf's fallback counts from it.
    status, _ = _run(pod, now=NOW + timedelta(minutes=1))
    assert (
        _condition(status, "PodResizeInProgress")["lastTransitionTime"]
        == refused["lastTransitionTime"]
    )
    del pod["metadata"]["annotations"][podstatus.RESIZE]
    status, _ = _run(pod, now=NOW + timedelta(minutes=2))
    assert _condition(status, "PodResizeInProgress") is None
    assert status["containerStatuses"][0]["resources"]["limits"]["memory"] == "96Mi"


def test_restart_container_policy_restarts_on_resize() -> None:
    pod = _pod(
        "web",
        _container(
            "app",
            "500m",
            "256Mi",
            resizePolicy=[{"resourceName": "memory", "restartPolicy": "RestartContainer"}],
        ),
    )
    _run(pod)
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "512Mi"
    status, _ = _run(pod)
    assert status["containerStatuses"][0]["restartCount"] == 1


def test_a_sidecar_runs_is_reported_and_resizes() -> None:
    sidecar = _container("proxy", "100m", "64Mi", restartPolicy="Always")
    setup = _container("setup", "1", "64Mi")
    pod = _pod(init=[setup, sidecar])
    status, _ = _run(pod)
    setup_entry, proxy_entry = status["initContainerStatuses"]
    assert setup_entry["state"]["terminated"]["reason"] == "Completed" and not setup_entry["ready"]
    assert proxy_entry["ready"] and "running" in proxy_entry["state"]
    sidecar["resources"]["requests"]["cpu"] = "200m"
    status, _ = _run(pod)
    assert status["initContainerStatuses"][1]["allocatedResources"]["cpu"] == "200m"


def test_pod_requests_count_sidecars_and_the_largest_init_step() -> None:
    sidecar = _container("proxy", "100m", "64Mi", restartPolicy="Always")
    pod = _pod(init=[sidecar, _container("setup", "3", "64Mi")])
    # setup runs beside the sidecar: 3.1 cores, more than app + sidecar (0.6).
    assert pod_requests(pod, "spec")["cpu"] * 10 == 31


def test_oom_kill_once_per_annotation_value() -> None:
    pod = _pod()
    _, memory = _run(pod)
    pod["metadata"]["annotations"] = {podstatus.OOM_KILL: "app"}
    status, memory = _run(pod, memory=memory)
    entry = status["containerStatuses"][0]
    assert entry["restartCount"] == 1
    assert entry["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert entry["lastState"]["terminated"]["exitCode"] == 137
    status, memory = _run(pod, memory=memory)
    assert status["containerStatuses"][0]["restartCount"] == 1
    pod["metadata"]["annotations"] = {podstatus.OOM_KILL: "app/2"}
    status, _ = _run(pod, memory=memory)
    assert status["containerStatuses"][0]["restartCount"] == 2


def test_crash_loop_backs_off_and_recovers() -> None:
    pod = _pod(annotations={podstatus.CRASH_LOOP: "app"})
    status, memory = _run(pod)
    entry = status["containerStatuses"][0]
    assert entry["state"]["waiting"]["reason"] == "CrashLoopBackOff" and entry["restartCount"] == 1
    assert entry["lastState"]["terminated"] == {
        **entry["lastState"]["terminated"],
        "reason": "Error",
        "exitCode": 1,
    }
    assert _condition(status, "Ready")["status"] == "False"
    status, memory = _run(pod, memory=memory, now=NOW + timedelta(seconds=5))
    assert status["containerStatuses"][0]["restartCount"] == 1
    status, memory = _run(pod, memory=memory, now=NOW + timedelta(seconds=10))
    assert status["containerStatuses"][0]["restartCount"] == 2
    del pod["metadata"]["annotations"]
    status, _ = _run(pod, memory=memory, now=NOW + timedelta(seconds=11))
    entry = status["containerStatuses"][0]
    assert "running" in entry["state"] and entry["ready"] and entry["restartCount"] == 2


def test_unready_annotation_fails_readiness() -> None:
    status, _ = _run(_pod(annotations={podstatus.UNREADY: "app"}))
    assert not status["containerStatuses"][0]["ready"]
    ready = _condition(status, "Ready")
    assert (
        ready["status"] == "False" and ready["message"] == "containers with unready status: [app]"
    )


def test_a_deleted_pod_terminates_its_containers() -> None:
    pod = _pod()
    _run(pod)
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:30Z"
    status, _ = _run(pod)
    assert status["phase"] == "Succeeded"
    assert status["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"


def test_resize_verdict_ignores_the_pod_itself_among_others() -> None:
    pod = _pod()
    _run(pod)
    assert resize_verdict(pod, NODE, [pod]) is None


def test_events_for_a_start_an_oom_kill_and_a_deferred_resize() -> None:
    from devcluster.events import pod_events

    pod = _pod()
    status, memory = desired_status(pod, NODE, [], PodMemory(), NOW, "10.244.0.2")
    assert [e.reason for e in pod_events(pod, status)] == ["Created", "Started"]
    pod["status"] = status
    pod["metadata"]["annotations"] = {podstatus.OOM_KILL: "app"}
    status, memory = desired_status(pod, NODE, [], memory, NOW, "10.244.0.2")
    assert [e.reason for e in pod_events(pod, status)] == ["OOMKilling", "Started"]
    pod["status"] = status
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "5"
    pod["metadata"]["generation"] = 2
    status, _ = desired_status(pod, NODE, [], memory, NOW, "10.244.0.2")
    (event,) = pod_events(pod, status)
    assert (event.type, event.reason) == ("Warning", "ResizeInfeasible")
    assert event.message == (
        'Pod resize Infeasible: {"containers":[{"name":"app","resources":{"limits":{"memory":"256Mi"},'
        '"requests":{"cpu":"5","memory":"256Mi"}}}],"generation":2,"error":"Node didn\'t have enough '
        'capacity: cpu, requested: 5000, capacity: 4000"}'
    )
    pod["status"] = status
    assert pod_events(pod, status) == []
