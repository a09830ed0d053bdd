"""The kubelet's usage model (kubesim/usage.py): memory over the limit OOM-kills and
crash-loops, CPU over the limit is throttled, a raised limit stops the kills."""

from __future__ import annotations

import json
from datetime import timedelta

import orjson
import pytest
from kubernetes_asyncio import client

from app.policy.rollback_health import CPU_THROTTLING as KERF_READS
from app.policy.rollback_health import HealthThresholds, pod_health
from kubesim.sim import Simulator
from kubesim.usage import CPU_THROTTLING, OOM_AFTER, USAGE, restart_delay
from tests.kubesim.conftest import pod_body


def using(name: str, usage: dict, limits: dict[str, str], **kw: str) -> dict:
    body = pod_body(name, limits=limits, **kw)
    body["metadata"]["annotations"] = {USAGE: json.dumps({"app": usage})}
    return body


def app_status(pod: client.V1Pod) -> client.V1ContainerStatus:
    return pod.status.container_statuses[0]


async def test_memory_within_the_limit_runs_on(sim: Simulator, core: client.CoreV1Api) -> None:
    await sim.add_node("n1")
    await core.create_namespaced_pod(
        "default", using("p", {"memory": "100Mi"}, {"memory": "128Mi"})
    )
    await sim.advance(600)
    status = app_status(await core.read_namespaced_pod("p", "default"))
    assert status.restart_count == 0 and status.state.running is not None


async def test_memory_over_the_limit_is_oom_killed_then_crash_loops(
    sim: Simulator, core: client.CoreV1Api
) -> None:
    await sim.add_node("n1")
    await core.create_namespaced_pod(
        "default", using("p", {"memory": "300Mi"}, {"memory": "128Mi"})
    )
    await sim.settle()
    assert app_status(await core.read_namespaced_pod("p", "default")).restart_count == 0
    await sim.advance(OOM_AFTER.total_seconds())
    first = app_status(await core.read_namespaced_pod("p", "default"))
    assert first.restart_count == 1
    assert first.last_state.terminated.reason == "OOMKilled"
    assert first.last_state.terminated.exit_code == 137
    assert first.state.running is not None  # the first kill restarts at once
    await sim.advance(OOM_AFTER.total_seconds())
    second = await core.read_namespaced_pod("p", "default")
    assert app_status(second).restart_count == 2
    assert app_status(second).state.waiting.reason == "CrashLoopBackOff"
    assert app_status(second).ready is False
    ready = next(c for c in second.status.conditions if c.type == "Ready")
    assert ready.status == "False"
    # kerf's health check sees both the kill and the crash loop.
    raw = sim.store.get(("", "pods"), "default", "p")
    assert pod_health(raw, HealthThresholds(), None).reason == "oomKilled"


async def test_a_clock_jump_plays_out_every_kill_in_it(
    sim: Simulator, core: client.CoreV1Api
) -> None:
    await sim.add_node("n1")
    await core.create_namespaced_pod(
        "default", using("p", {"memory": "300Mi"}, {"memory": "128Mi"})
    )
    await sim.settle()
    await sim.advance(300)
    # kills at 5s, 10s; back-off 10s → start 20s, kill 25s; 20s → 45s, 50s; 40s → 90s,
    # 95s; 80s → 175s, 180s; 160s → 340s (after the jump): six kills, waiting.
    status = app_status(await core.read_namespaced_pod("p", "default"))
    assert status.restart_count == 6
    assert status.state.waiting.reason == "CrashLoopBackOff"


def test_restart_delay_doubles_from_ten_seconds_to_five_minutes() -> None:
    assert [restart_delay(n).total_seconds() for n in (1, 2, 3, 4, 6, 7, 12)] == [
        0,
        10,
        20,
        40,
        160,
        300,
        300,
    ]


async def test_a_raised_limit_after_an_in_place_resize_stops_the_kills(
    sim: Simulator, core: client.CoreV1Api
) -> None:
    await sim.add_node("n1")
    await core.create_namespaced_pod(
        "default", using("p", {"memory": "300Mi"}, {"memory": "128Mi"}, memory="64Mi")
    )
    await sim.settle()
    await sim.advance(OOM_AFTER.total_seconds())
    assert app_status(await core.read_namespaced_pod("p", "default")).restart_count == 1
    await core.patch_namespaced_pod_resize(
        "p",
        "default",
        {"spec": {"containers": [{"name": "app", "resources": {"limits": {"memory": "512Mi"}}}]}},
    )
    await sim.advance(600)
    status = app_status(await core.read_namespaced_pod("p", "default"))
    assert status.restart_count == 1
    assert status.state.running is not None and status.ready is True


async def test_cpu_over_the_limit_is_throttled_where_kerf_reads_it(
    sim: Simulator, core: client.CoreV1Api
) -> None:
    assert CPU_THROTTLING == KERF_READS
    await sim.add_node("n1")
    await core.create_namespaced_pod(
        "default", using("p", {"cpu": "300m"}, {"cpu": "200m", "memory": "128Mi"})
    )
    await sim.settle()
    pod = await core.read_namespaced_pod("p", "default")
    assert orjson.loads(pod.metadata.annotations[CPU_THROTTLING]) == {"app": "0.33"}
    raw = sim.store.get(("", "pods"), "default", "p")
    assert pod_health(raw, HealthThresholds(), None).reason == "throttled"
    await core.patch_namespaced_pod_resize(
        "p",
        "default",
        {"spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "500m"}}}]}},
    )
    await sim.settle()
    pod = await core.read_namespaced_pod("p", "default")
    assert CPU_THROTTLING not in pod.metadata.annotations


async def test_pods_of_a_deployment_take_the_usage_from_the_template(
    sim: Simulator, api: client.ApiClient
) -> None:
    await sim.add_node("n1")
    labels = {"app": "web"}
    template = pod_body("x", limits={"memory": "128Mi"})
    template["metadata"] = {"labels": labels, "annotations": {USAGE: '{"app": {"memory": "1Gi"}}'}}
    await client.AppsV1Api(api).create_namespaced_deployment(
        "default",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": template},
        },
    )
    await sim.advance(OOM_AFTER.total_seconds())
    pods = (await client.CoreV1Api(api).list_namespaced_pod("default")).items
    assert len(pods) == 2
    assert all(app_status(p).last_state.terminated.reason == "OOMKilled" for p in pods)


@pytest.mark.parametrize("value", ["not json", '["app"]', '{"app": {"memory": "lots"}}'])
async def test_an_unreadable_usage_annotation_is_ignored_and_logged(
    sim: Simulator, core: client.CoreV1Api, value: str, caplog: pytest.LogCaptureFixture
) -> None:
    await sim.add_node("n1")
    body = pod_body("p", limits={"memory": "128Mi"})
    body["metadata"]["annotations"] = {USAGE: value}
    await core.create_namespaced_pod("default", body)
    await sim.advance(60)
    assert app_status(await core.read_namespaced_pod("p", "default")).restart_count == 0
    assert f"default/p: ignoring {USAGE}" in caplog.text


async def test_without_a_usage_annotation_the_kubelet_is_unchanged(
    sim: Simulator, core: client.CoreV1Api
) -> None:
    await sim.add_node("n1")
    await core.create_namespaced_pod("default", pod_body("p", limits={"memory": "128Mi"}))
    await sim.settle()
    sim.kubelet.oom_kill("default", "p", "app")
    await sim.advance(timedelta(minutes=10).total_seconds())
    status = app_status(await core.read_namespaced_pod("p", "default"))
    assert status.restart_count == 1 and status.state.running is not None
