"""Events the simulated components write, read back through both Event APIs."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from kubesim.usage import OOM_AFTER, USAGE, restart_delay
from tests.kubesim.conftest import pod_body
from tests.kubesim.test_cluster import deployment


def reasons(sim, name_prefix: str = "") -> list[tuple[str, str, str]]:
    """(reason, type, involved object name) of every stored Event, oldest first."""
    events = sorted(
        sim.store.list(("", "events")), key=lambda e: int(e["metadata"]["name"].rsplit(".")[-1], 16)
    )
    return [
        (e["reason"], e["type"], e["involvedObject"]["name"])
        for e in events
        if e["involvedObject"]["name"].startswith(name_prefix)
    ]


async def test_scheduler_records_each_verdict_once(sim, core: client.CoreV1Api) -> None:
    await sim.add_node("n1", cpu="1")
    await core.create_namespaced_pod("default", pod_body("big", cpu="2"))
    await sim.settle()
    # Unrelated writes make the scheduler run again: the same verdict is not repeated.
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    await sim.settle()
    assert reasons(sim, "big") == [("FailedScheduling", "Warning", "big")]
    await sim.add_node("n2", cpu="1")
    assert reasons(sim, "big")[1:] == [("FailedScheduling", "Warning", "big")]
    await sim.add_node("n3", cpu="4")
    assert reasons(sim, "big")[2:] == [
        ("Scheduled", "Normal", "big"),
        ("Created", "Normal", "big"),
        ("Started", "Normal", "big"),
    ]
    scheduled = next(e for e in sim.store.list(("", "events")) if e["reason"] == "Scheduled")
    assert scheduled["message"] == "Successfully assigned default/big to n3"
    assert scheduled["reportingComponent"] == "default-scheduler"
    assert scheduled["eventTime"] == "2026-01-01T00:00:00.000000Z"
    # The same objects through events.k8s.io/v1, with a field selector kubectl describe uses.
    events = client.EventsV1Api(core.api_client)
    listed = await events.list_namespaced_event(
        "default", field_selector="regarding.name=big,reason=Scheduled"
    )
    assert [(e.note, e.reporting_controller) for e in listed.items] == [
        ("Successfully assigned default/big to n3", "default-scheduler")
    ]


async def test_controllers_record_creations_and_scaling(sim, api: client.ApiClient) -> None:
    await sim.add_node("n1")
    apps = client.AppsV1Api(api)
    await apps.create_namespaced_deployment("default", deployment(replicas=2))
    await sim.settle()
    (rs,) = sim.store.list(("apps", "replicasets"), "default")
    rs_name = rs["metadata"]["name"]
    assert reasons(sim, "web")[:3] == [
        ("ScalingReplicaSet", "Normal", "web"),
        ("SuccessfulCreate", "Normal", rs_name),
        ("SuccessfulCreate", "Normal", rs_name),
    ]
    await apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 1}})
    await sim.settle()
    messages = [
        e["message"]
        for e in sim.store.list(("", "events"))
        if e["reason"] in ("ScalingReplicaSet", "SuccessfulDelete")
    ]
    assert f"Scaled down replica set {rs_name} from 2 to 1" in messages
    assert any(m.startswith(f"Deleted pod: {rs_name}-") for m in messages)
    before = len(sim.store.list(("", "events")))
    await sim.settle()
    assert len(sim.store.list(("", "events"))) == before


async def test_kubelet_records_oom_backoff_and_resize(sim, core: client.CoreV1Api) -> None:
    await sim.add_node("n1", cpu="2")
    await core.create_namespaced_pod(
        "default", pod_body("p", cpu="500m", limits={"cpu": "1", "memory": "1Gi"})
    )
    await sim.settle()
    sim.kubelet.oom_kill("default", "p", "app")
    sim.kubelet.crash_loop("default", "p", "app")
    await core.patch_namespaced_pod_resize(
        "p",
        "default",
        {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "700m"}}}]}},
    )
    await sim.settle()
    await core.patch_namespaced_pod_resize(
        "p",
        "default",
        {
            "spec": {
                "containers": [
                    {"name": "app", "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "3"}}}
                ]
            }
        },
    )
    await sim.settle()
    await sim.settle()
    assert [r for r, _, _ in reasons(sim, "p")][3:] == [
        "OOMKilling",
        "Started",
        "Started",
        "BackOff",
        "ResizeCompleted",
        "ResizeInfeasible",
    ]
    events = {e["reason"]: e for e in sim.store.list(("", "events"))}
    assert events["OOMKilling"]["type"] == "Warning"
    assert events["OOMKilling"]["involvedObject"]["fieldPath"] == "spec.containers{app}"
    assert events["ResizeCompleted"]["message"] == (
        'Pod resize completed: {"containers":[{"name":"app","resources":'
        '{"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"700m","memory":"64Mi"}}}]}'
    )
    assert events["ResizeInfeasible"]["message"] == (
        "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000"
    )


async def test_failed_pod_creation_is_recorded_once(sim, api: client.ApiClient) -> None:
    await sim.add_node("n1")
    # A pod the StatefulSet does not own already has the name of its first ordinal.
    await client.CoreV1Api(api).create_namespaced_pod("default", pod_body("db-0"))
    sts = deployment(name="db", replicas=1)
    sts["spec"]["serviceName"] = "db"
    await client.AppsV1Api(api).create_namespaced_stateful_set("default", sts)
    await sim.settle()
    await sim.settle()
    failed = [e for e in sim.store.list(("", "events")) if e["reason"] == "FailedCreate"]
    assert len(failed) == 1
    assert failed[0]["type"] == "Warning"
    assert failed[0]["reportingComponent"] == "statefulset-controller"
    assert failed[0]["involvedObject"]["kind"] == "StatefulSet"
    assert failed[0]["message"] == 'Error creating: pods "db-0" already exists'


async def test_usage_model_kills_and_back_off_are_recorded(sim, core: client.CoreV1Api) -> None:
    await sim.add_node("n1")
    body = pod_body("u", limits={"memory": "128Mi"})
    body["metadata"]["annotations"] = {USAGE: '{"app": {"memory": "300Mi"}}'}
    await core.create_namespaced_pod("default", body)
    await sim.settle()
    await sim.advance(OOM_AFTER.total_seconds())  # first kill: restarted at once
    await sim.advance(OOM_AFTER.total_seconds())  # second kill: back-off
    await sim.advance(restart_delay(2).total_seconds())  # started again after the back-off
    assert [r for r, _, _ in reasons(sim, "u")][3:] == [
        "OOMKilling",
        "Started",
        "OOMKilling",
        "BackOff",
        "Started",
    ]
    back_off = next(e for e in sim.store.list(("", "events")) if e["reason"] == "BackOff")
    assert back_off["type"] == "Warning"
    delay = int(restart_delay(2).total_seconds())
    assert back_off["message"].startswith(
        f"back-off {delay}s restarting failed container=app pod=u_default"
    )


def _new_event(name: str, **extra: object) -> dict[str, object]:
    """An events.k8s.io/v1 Event about a Deployment, as a controller writes one."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "example.com/c",
        "reportingInstance": "c-0",
        "action": "Decide",
        "reason": "Blocked",
        "regarding": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "note": "n",
        "type": "Normal",
        **extra,
    }


async def test_the_old_timestamps_only_through_v1_as_on_a_real_server(
    sim, api: client.ApiClient
) -> None:
    """events.k8s.io/v1 refuses deprecatedLastTimestamp and deprecatedCount at create; a v1
    Event of the new kind (with an eventTime) may carry lastTimestamp and count, which the
    events.k8s.io view shows under their deprecated names; both hold the note to 1024 bytes."""
    with pytest.raises(client.ApiException) as refused:
        await client.EventsV1Api(api).create_namespaced_event(
            "default",
            _new_event("a", deprecatedLastTimestamp="2026-01-01T00:00:00Z", deprecatedCount=1),
        )
    assert refused.value.status == 422 and "needs to be unset" in refused.value.body
    core = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "b", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingComponent": "example.com/c",
        "reportingInstance": "c-0",
        "action": "Decide",
        "reason": "Blocked",
        "involvedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "message": "n",
        "type": "Normal",
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "count": 1,
    }
    await client.CoreV1Api(api).create_namespaced_event("default", core)
    read = await client.EventsV1Api(api).read_namespaced_event("b", "default")
    assert (read.deprecated_last_timestamp.isoformat(), read.deprecated_count) == (
        "2026-01-01T00:00:00+00:00",
        1,
    )
    too_long = {**core, "metadata": {"name": "c", "namespace": "default"}, "message": "x" * 1025}
    with pytest.raises(client.ApiException) as refused:
        await client.CoreV1Api(api).create_namespaced_event("default", too_long)
    assert refused.value.status == 422 and "at most 1024" in refused.value.body
