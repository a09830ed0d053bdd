"""Sidecars (init containers with restartPolicy Always) as Kubernetes 1.33+ treats them:
reported in initContainerStatuses, resized through spec.initContainers, counted on the node."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.conditions import get_condition
from kubesim.sim import Simulator
from kubesim.usage import OOM_AFTER, USAGE
from tests.kubesim.conftest import pod_body

Obj = dict[str, Any]


def sidecar_pod(
    name: str = "p",
    app_cpu: str = "500m",
    proxy: Obj | None = None,
    setup_cpu: str = "50m",
    guaranteed: bool = False,
) -> Obj:
    """A pod with a plain init container `setup`, a sidecar `proxy` and the app `app`."""

    def res(cpu: str, memory: str) -> Obj:
        out: Obj = {"requests": {"cpu": cpu, "memory": memory}}
        if guaranteed:
            out["limits"] = {"cpu": cpu, "memory": memory}
        return out

    body = pod_body(
        name, cpu=app_cpu, limits={"cpu": app_cpu, "memory": "64Mi"} if guaranteed else None
    )
    body["spec"]["initContainers"] = [
        {"name": "setup", "image": "busybox:1.36", "resources": res(setup_cpu, "16Mi")},
        {
            "name": "proxy",
            "image": "envoy:1.31",
            "restartPolicy": "Always",
            "resources": res("100m", "32Mi"),
            **(proxy or {}),
        },
    ]
    return body


async def raw_pod(core: client.CoreV1Api, name: str) -> Obj:
    """The pod as the API serves it (JSON, every field the client models may not know)."""
    response = await core.read_namespaced_pod(name, "default", _preload_content=False)
    return json.loads(await response.read())


def init_status(pod: Obj, name: str) -> Obj:
    return next(s for s in pod["status"]["initContainerStatuses"] if s["name"] == name)


def resize_init(name: str, resources: Obj) -> Obj:
    return {"spec": {"initContainers": [{"name": name, "resources": resources}]}}


def message(exc: ApiException) -> str:
    return json.loads(exc.body)["message"]


async def test_init_container_statuses(sim: Simulator, core: client.CoreV1Api) -> None:
    await sim.add_node("n1")
    await core.create_namespaced_pod("default", sidecar_pod())
    await sim.settle()
    pod = await raw_pod(core, "p")
    setup = init_status(pod, "setup")
    assert setup["state"]["terminated"]["reason"] == "Completed"
    assert setup["state"]["terminated"]["exitCode"] == 0
    assert (setup["ready"], setup["started"]) == (False, False)
    proxy = init_status(pod, "proxy")
    assert "running" in proxy["state"]
    assert (proxy["ready"], proxy["started"], proxy["restartCount"]) == (True, True, 0)
    assert proxy["resources"] == {"requests": {"cpu": "100m", "memory": "32Mi"}}
    assert proxy["allocatedResources"] == {"cpu": "100m", "memory": "32Mi"}
    assert proxy["containerID"].startswith("containerd://")
    assert proxy["imageID"].startswith("docker.io/library/envoy:1.31@sha256:")
    assert [s["name"] for s in pod["status"]["containerStatuses"]] == ["app"]
    conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conditions["Initialized"] == conditions["Ready"] == "True"
    # The typed client reads them too.
    typed = await core.read_namespaced_pod("p", "default")
    assert [s.name for s in typed.status.init_container_statuses] == ["setup", "proxy"]


async def test_scheduler_counts_sidecars_and_the_largest_init_step(
    sim: Simulator, core: client.CoreV1Api
) -> None:
    await sim.add_node("n1", cpu="1")
    # app 500m + sidecar 600m = 1100m: more than the node.
    await core.create_namespaced_pod(
        "default", sidecar_pod("big", proxy={"resources": {"requests": {"cpu": "600m"}}})
    )
    # setup 900m runs alone (the sidecar starts after it): max(900m, 500m + 50m) fits.
    await core.create_namespaced_pod(
        "default",
        sidecar_pod(
            "ok",
            app_cpu="400m",
            setup_cpu="900m",
            proxy={"resources": {"requests": {"cpu": "50m"}}},
        ),
    )
    await sim.settle()
    placed = {
        p.metadata.name: p.spec.node_name for p in (await core.list_namespaced_pod("default")).items
    }
    assert placed == {"big": None, "ok": "n1"}


async def test_sidecar_resize_acted_out(sim: Simulator, core: client.CoreV1Api) -> None:
    await sim.add_node("n1", cpu="2")
    await core.create_namespaced_pod("default", sidecar_pod())
    await sim.settle()
    sim.kubelet.hold_resizes = True
    pod = await core.patch_namespaced_pod_resize(
        "p", "default", resize_init("proxy", {"requests": {"cpu": "300m"}})
    )
    assert pod.spec.init_containers[1].resources.requests["cpu"] == "300m"
    assert pod.metadata.generation == 2
    await sim.settle()
    stored = sim.store.get(("", "pods"), "default", "p")
    assert get_condition(stored["status"], "PodResizeInProgress")["status"] == "True"
    proxy = init_status(stored, "proxy")
    assert proxy["allocatedResources"]["cpu"] == "300m"
    assert proxy["resources"]["requests"]["cpu"] == "100m"
    sim.kubelet.hold_resizes = False
    await sim.settle()
    pod_json = await raw_pod(core, "p")
    proxy = init_status(pod_json, "proxy")
    assert proxy["resources"]["requests"]["cpu"] == "300m" and proxy["restartCount"] == 0
    assert not [c for c in pod_json["status"]["conditions"] if c["type"].startswith("PodResize")]
    completed = next(e for e in sim.store.list(("", "events")) if e["reason"] == "ResizeCompleted")
    assert '"name":"proxy","resources":{"requests":{"cpu":"300m"' in completed["message"]


async def test_sidecar_resize_deferred_then_infeasible(
    sim: Simulator, core: client.CoreV1Api
) -> None:
    await sim.add_node("n1", cpu="2")
    await core.create_namespaced_pod("default", sidecar_pod())
    await core.create_namespaced_pod("default", pod_body("q", cpu="1"))
    await sim.settle()
    # app 500m + sidecar 1 = 1500m beside q's 1: does not fit now.
    await core.patch_namespaced_pod_resize(
        "p", "default", resize_init("proxy", {"requests": {"cpu": "1"}})
    )
    await sim.settle()
    stored = sim.store.get(("", "pods"), "default", "p")
    pending = get_condition(stored["status"], "PodResizePending")
    assert (pending["reason"], pending["message"]) == (
        "Deferred",
        "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000",
    )
    assert init_status(stored, "proxy")["allocatedResources"]["cpu"] == "100m"
    await core.patch_namespaced_pod_resize(
        "p", "default", resize_init("proxy", {"requests": {"cpu": "3"}})
    )
    await sim.settle()
    pending = get_condition(
        sim.store.get(("", "pods"), "default", "p")["status"], "PodResizePending"
    )
    assert (pending["reason"], pending["message"]) == (
        "Infeasible",
        "Node didn't have enough capacity: cpu, requested: 3500, capacity: 2000",
    )
    # Room appears (q gone) and the sidecar asks for what fits: acted out.
    await core.delete_namespaced_pod("q", "default")
    await core.patch_namespaced_pod_resize(
        "p", "default", resize_init("proxy", {"requests": {"cpu": "1"}})
    )
    await sim.settle()
    stored = sim.store.get(("", "pods"), "default", "p")
    assert get_condition(stored["status"], "PodResizePending") is None
    assert init_status(stored, "proxy")["resources"]["requests"]["cpu"] == "1"


async def test_sidecar_resize_policy_restarts_it(sim: Simulator, core: client.CoreV1Api) -> None:
    await sim.add_node("n1")
    policy = [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]
    await core.create_namespaced_pod("default", sidecar_pod(proxy={"resizePolicy": policy}))
    await sim.settle()
    await core.patch_namespaced_pod_resize(
        "p", "default", resize_init("proxy", {"requests": {"memory": "48Mi"}})
    )
    await sim.settle()
    proxy = init_status(await raw_pod(core, "p"), "proxy")
    assert proxy["restartCount"] == 1 and proxy["resources"]["requests"]["memory"] == "48Mi"
    killing = [e for e in sim.store.list(("", "events")) if e["reason"] == "Killing"]
    assert [e["involvedObject"]["fieldPath"] for e in killing] == ["spec.initContainers{proxy}"]


async def test_plain_init_container_resources_are_not_resized(
    sim: Simulator, core: client.CoreV1Api
) -> None:
    await sim.add_node("n1")
    await core.create_namespaced_pod("default", sidecar_pod())
    await sim.settle()
    pod = await core.patch_namespaced_pod_resize(
        "p", "default", resize_init("setup", {"requests": {"cpu": "500m"}})
    )
    # The real resize strategy copies resources of restartable init containers only.
    assert pod.spec.init_containers[0].resources.requests["cpu"] == "50m"
    assert pod.metadata.generation == 1
    await sim.settle()
    setup = init_status(await raw_pod(core, "p"), "setup")
    assert setup["resources"]["requests"]["cpu"] == "50m"


async def test_sidecar_named_under_containers_is_refused(
    sim: Simulator, core: client.CoreV1Api
) -> None:
    await sim.add_node("n1")
    await core.create_namespaced_pod("default", sidecar_pod())
    await sim.settle()
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod_resize(
            "p",
            "default",
            {
                "spec": {
                    "containers": [{"name": "proxy", "resources": {"requests": {"cpu": "60m"}}}]
                }
            },
        )
    # The real server's three causes (docs/devcluster.md, 1.35.4); kubesim's strategic
    # merge patch appends the new container, so its index is 1 where the real one is 0.
    assert err.value.status == 422
    causes = [(c["field"], c["message"]) for c in json.loads(err.value.body)["details"]["causes"]]
    assert causes == [
        ("spec.containers[1].image", "Required value"),
        ("spec.initContainers[1].name", 'Duplicate value: "proxy"'),
        ("spec.containers", "Forbidden: containers may not be added or removed on resize"),
    ]
    pod = sim.store.get(("", "pods"), "default", "p")
    assert pod["metadata"]["generation"] == 1
    assert pod["spec"]["initContainers"][1]["resources"]["requests"]["cpu"] == "100m"


@pytest.mark.parametrize(
    ("guaranteed", "resources", "expected"),
    [
        (
            False,
            {"requests": {"ephemeral-storage": "1Gi"}},
            "spec: Forbidden: only cpu and memory resources are mutable",
        ),
        (
            False,
            {"requests": {"memory": None}},
            "spec.initContainers[1].resources.requests: Forbidden: resource requests cannot be removed",
        ),
        (
            True,
            {"requests": {"cpu": "50m"}},
            'spec: Invalid value: "Guaranteed": Pod QOS Class may not change as a result of resizing',
        ),
        (
            False,
            {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
            'Invalid value: "2": must be less than or equal to cpu limit of 1',
        ),
    ],
)
async def test_sidecar_resize_rejections(
    core: client.CoreV1Api, guaranteed: bool, resources: Obj, expected: str
) -> None:
    await core.create_namespaced_pod("default", sidecar_pod(guaranteed=guaranteed))
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod_resize("p", "default", resize_init("proxy", resources))
    assert err.value.status == 422
    assert expected in message(err.value)


async def test_sidecar_and_app_container_with_one_name_is_a_duplicate(
    core: client.CoreV1Api,
) -> None:
    body = sidecar_pod()
    body["spec"]["initContainers"][1]["name"] = "app"
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", body)
    assert 'spec.initContainers[1].name: Duplicate value: "app"' in message(err.value)


async def test_kubelet_hooks_reach_sidecars(sim: Simulator, core: client.CoreV1Api) -> None:
    await sim.add_node("n1")
    await core.create_namespaced_pod("default", sidecar_pod())
    await sim.settle()
    sim.kubelet.oom_kill("default", "p", "proxy")
    proxy = init_status(await raw_pod(core, "p"), "proxy")
    assert proxy["restartCount"] == 1
    assert proxy["lastState"]["terminated"]["reason"] == "OOMKilled"
    sim.kubelet.set_ready("default", "p", "proxy", False)
    pod = await raw_pod(core, "p")
    assert not init_status(pod, "proxy")["ready"]
    assert next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")["status"] == "False"
    # A plain init container has ended: no hook restarts it.
    with pytest.raises(ValueError):
        sim.kubelet.oom_kill("default", "p", "setup")


async def test_usage_model_oom_kills_a_sidecar(sim: Simulator, core: client.CoreV1Api) -> None:
    await sim.add_node("n1")
    limited = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "32Mi"}}
    body = sidecar_pod(proxy={"resources": limited})
    body["metadata"]["annotations"] = {USAGE: '{"proxy": {"memory": "64Mi", "cpu": "200m"}}'}
    await core.create_namespaced_pod("default", body)
    await sim.settle()
    await sim.advance(int(OOM_AFTER.total_seconds()))
    pod = await raw_pod(core, "p")
    proxy = init_status(pod, "proxy")
    assert proxy["restartCount"] == 1
    assert proxy["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    kill = next(e for e in sim.store.list(("", "events")) if e["reason"] == "OOMKilling")
    assert kill["involvedObject"]["fieldPath"] == "spec.initContainers{proxy}"
