"""ResourceQuota: pods charged, refused and counted as on kube-apiserver 1.35."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.sim import Simulator
from tests.kubesim.conftest import pod_body

Obj = dict[str, Any]


def quota(name: str, hard: dict[str, str], **spec: Any) -> Obj:
    return {"metadata": {"name": name}, "spec": {"hard": hard, **spec}}


def best_effort(name: str) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
    }


async def add_quota(sim: Simulator, core: client.CoreV1Api, body: Obj) -> None:
    """Create a quota and let the controller fill in its status, as pods wait for it."""
    await core.create_namespaced_resource_quota("default", body)
    await sim.settle()


async def status(core: client.CoreV1Api, name: str) -> tuple[dict[str, str], dict[str, str]]:
    current = await core.read_namespaced_resource_quota(name, "default")
    return current.status.hard, current.status.used


async def refusal(core: client.CoreV1Api, body: Obj) -> str:
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", body)
    assert err.value.status == 403
    assert json.loads(err.value.body)["reason"] == "Forbidden"
    return str(json.loads(err.value.body)["message"])


async def test_status_is_kept_from_spec_and_pods(sim: Simulator, core: client.CoreV1Api) -> None:
    await sim.add_node("node-1")
    await add_quota(
        sim,
        core,
        quota("team-quota", {"requests.cpu": "1.5", "limits.memory": "1Gi", "pods": "10"}),
    )
    hard, used = await status(core, "team-quota")
    assert hard == {"requests.cpu": "1500m", "limits.memory": "1Gi", "pods": "10"}
    assert used == {"requests.cpu": "0", "limits.memory": "0", "pods": "0"}

    limits = {"cpu": "200m", "memory": "128Mi"}
    for name in ("a", "b"):
        await core.create_namespaced_pod("default", pod_body(name, cpu="150m", limits=limits))
    # Admission charges each pod as it is created, before the controller recounts.
    assert (await status(core, "team-quota"))[1] == {
        "requests.cpu": "300m",
        "limits.memory": "256Mi",
        "pods": "2",
    }
    await core.delete_namespaced_pod("a", "default")
    await sim.settle()
    assert (await status(core, "team-quota"))[1] == {
        "requests.cpu": "150m",
        "limits.memory": "128Mi",
        "pods": "1",
    }
    # A finished pod gives its compute resources back.
    sim.kubelet.finish("default", "b")
    await sim.settle()
    assert (await status(core, "team-quota"))[1] == {
        "requests.cpu": "0",
        "limits.memory": "0",
        "pods": "0",
    }


async def test_create_over_quota_is_refused(sim: Simulator, core: client.CoreV1Api) -> None:
    await add_quota(sim, core, quota("team-quota", {"requests.cpu": "150m"}))
    message = await refusal(core, pod_body("web-abc", cpu="200m"))
    assert message == (
        'pods "web-abc" is forbidden: exceeded quota: team-quota, requested: '
        "requests.cpu=200m, used: requests.cpu=0, limited: requests.cpu=150m"
    )
    assert (await status(core, "team-quota"))[1] == {"requests.cpu": "0"}


async def test_the_exceeded_resources_alone_are_named(
    sim: Simulator, core: client.CoreV1Api
) -> None:
    await add_quota(
        sim,
        core,
        quota("team-quota", {"requests.memory": "100Mi", "limits.memory": "1Gi", "pods": "1"}),
    )
    await core.create_namespaced_pod(
        "default", pod_body("a", memory="64Mi", limits={"memory": "64Mi"})
    )
    message = await refusal(core, pod_body("b", memory="64Mi", limits={"memory": "64Mi"}))
    assert message == (
        'pods "b" is forbidden: exceeded quota: team-quota, requested: '
        "pods=1,requests.memory=64Mi, used: pods=1,requests.memory=64Mi, limited: "
        "pods=1,requests.memory=100Mi"
    )


async def test_tracked_cpu_and_memory_must_be_set(sim: Simulator, core: client.CoreV1Api) -> None:
    await add_quota(sim, core, quota("team-quota", {"requests.cpu": "2", "limits.memory": "2Gi"}))
    body = pod_body("p", cpu="100m")
    body["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36"}]
    assert await refusal(core, body) == (
        'pods "p" is forbidden: failed quota: team-quota: must specify limits.memory for: '
        "app,setup; requests.cpu for: setup"
    )


async def test_dry_run_is_checked_but_not_charged(sim: Simulator, core: client.CoreV1Api) -> None:
    await add_quota(sim, core, quota("team-quota", {"pods": "1"}))
    await core.create_namespaced_pod("default", pod_body("p"), dry_run="All")
    assert (await status(core, "team-quota"))[1] == {"pods": "0"}


def resize(cpu: str) -> Obj:
    return {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}}}]}}


async def test_resize_is_charged_its_increase(sim: Simulator, core: client.CoreV1Api) -> None:
    await add_quota(sim, core, quota("team-quota", {"requests.cpu": "500m"}))
    await core.create_namespaced_pod("default", pod_body("web-abc", cpu="200m"))
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod_resize("web-abc", "default", resize("600m"))
    assert err.value.status == 403
    assert json.loads(err.value.body)["message"] == (
        'pods "web-abc" is forbidden: exceeded quota: team-quota, requested: '
        "requests.cpu=400m, used: requests.cpu=200m, limited: requests.cpu=500m"
    )
    await core.patch_namespaced_pod_resize("web-abc", "default", resize("450m"))
    assert (await status(core, "team-quota"))[1] == {"requests.cpu": "450m"}


async def test_resize_down_frees_quota_once_actuated(
    sim: Simulator, core: client.CoreV1Api
) -> None:
    """A pod is charged the larger of what it asks and what its node gave it, so a smaller
    request frees quota only when the kubelet has carried it out."""
    await sim.add_node("node-1")
    await add_quota(sim, core, quota("team-quota", {"requests.cpu": "1"}))
    await core.create_namespaced_pod("default", pod_body("p", cpu="800m"))
    await sim.settle()
    sim.kubelet.hold_resizes = True
    await core.patch_namespaced_pod_resize("p", "default", resize("300m"))
    await sim.settle()
    assert (await status(core, "team-quota"))[1] == {"requests.cpu": "800m"}
    sim.kubelet.actuate_resizes()
    await sim.settle()
    assert (await status(core, "team-quota"))[1] == {"requests.cpu": "300m"}


async def test_best_effort_scopes(sim: Simulator, core: client.CoreV1Api) -> None:
    await add_quota(sim, core, quota("best-effort", {"pods": "1"}, scopes=["BestEffort"]))
    await add_quota(sim, core, quota("burstable", {"pods": "1"}, scopes=["NotBestEffort"]))
    await core.create_namespaced_pod("default", best_effort("be"))
    await core.create_namespaced_pod("default", pod_body("burst"))
    assert (await status(core, "best-effort"))[1] == {"pods": "1"}
    assert (await status(core, "burstable"))[1] == {"pods": "1"}
    assert await refusal(core, best_effort("be-2")) == (
        'pods "be-2" is forbidden: exceeded quota: best-effort, requested: pods=1, '
        "used: pods=1, limited: pods=1"
    )


async def test_priority_class_scope(
    sim: Simulator, api: client.ApiClient, core: client.CoreV1Api
) -> None:
    await client.SchedulingV1Api(api).create_priority_class(
        {"metadata": {"name": "high"}, "value": 1000}
    )
    selector = {
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
    }
    await add_quota(sim, core, quota("high", {"requests.cpu": "500m"}, scopeSelector=selector))
    # No priority class, or another one: not this quota's business.
    await core.create_namespaced_pod("default", pod_body("plain", cpu="2"))
    important = pod_body("important", cpu="400m")
    important["spec"]["priorityClassName"] = "high"
    await core.create_namespaced_pod("default", important)
    assert (await status(core, "high"))[1] == {"requests.cpu": "400m"}
    again = pod_body("again", cpu="400m")
    again["spec"]["priorityClassName"] = "high"
    assert "exceeded quota: high, requested: requests.cpu=400m" in await refusal(core, again)


async def test_terminating_scope(sim: Simulator, core: client.CoreV1Api) -> None:
    await add_quota(sim, core, quota("jobs", {"requests.cpu": "1"}, scopes=["Terminating"]))
    await core.create_namespaced_pod("default", pod_body("server", cpu="800m"))
    job = pod_body("job", cpu="700m")
    job["spec"]["activeDeadlineSeconds"] = 600
    await core.create_namespaced_pod("default", job)
    assert (await status(core, "jobs"))[1] == {"requests.cpu": "700m"}
    # Given a deadline, the server moves into the quota's scope and is charged in full.
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod(
            "server", "default", {"spec": {"activeDeadlineSeconds": 600}}
        )
    assert json.loads(err.value.body)["message"] == (
        'pods "server" is forbidden: exceeded quota: jobs, requested: requests.cpu=800m, '
        "used: requests.cpu=700m, limited: requests.cpu=1"
    )


async def test_replicaset_stops_at_the_quota(
    sim: Simulator, api: client.ApiClient, core: client.CoreV1Api
) -> None:
    await sim.add_node("node-1")
    await add_quota(sim, core, quota("team-quota", {"pods": "2"}))
    template = pod_body("")
    del template["apiVersion"], template["kind"]
    template["metadata"] = {"labels": {"app": "web"}}
    await client.AppsV1Api(api).create_namespaced_replica_set(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": template,
            },
        },
    )
    await sim.settle()
    assert len(sim.store.list(("", "pods"), "default")) == 2
    rs = await client.AppsV1Api(api).read_namespaced_replica_set("web", "default")
    failure = next(c for c in rs.status.conditions if c.type == "ReplicaFailure")
    assert "exceeded quota: team-quota, requested: pods=1, used: pods=2, limited: pods=2" in (
        failure.message
    )
