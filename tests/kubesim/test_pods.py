"""Pod subresources: resize rules, eviction with PDBs, status, binding."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.disruption import EVICTION_REFUSED
from tests.kubesim.conftest import pod_body


def message(exc: ApiException) -> str:
    return json.loads(exc.body)["message"]


def resize(cpu: str | None = None, memory: str | None = None, limits: dict | None = None) -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    resources: dict = {"requests": requests} if requests else {}
    if limits is not None:
        resources["limits"] = limits
    return {"spec": {"containers": [{"name": "app", "resources": resources}]}}


async def test_resize_changes_resources_and_generation(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_body("p", limits={"cpu": "1", "memory": "1Gi"}))
    pod = await core.patch_namespaced_pod_resize("p", "default", resize(cpu="300m"))
    assert pod.spec.containers[0].resources.requests == {"cpu": "300m", "memory": "64Mi"}
    assert pod.metadata.generation == 2


async def test_resize_ignores_other_fields(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_body("p"))
    pod = await core.patch_namespaced_pod_resize(
        "p",
        "default",
        {
            "metadata": {"labels": {"x": "y"}},
            "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "200m"}}}]},
        },
    )
    assert pod.metadata.labels == {"app": "web"}
    assert pod.spec.containers[0].resources.requests["cpu"] == "200m"


@pytest.mark.parametrize(
    ("limits", "patch", "expected"),
    [
        (
            None,
            {
                "spec": {
                    "containers": [
                        {"name": "app", "resources": {"requests": {"ephemeral-storage": "1Gi"}}}
                    ]
                }
            },
            "spec: Forbidden: only cpu and memory resources are mutable",
        ),
        (
            {"cpu": "1", "memory": "1Gi"},
            {"spec": {"containers": [{"name": "app", "resources": {"limits": {"memory": None}}}]}},
            "Forbidden: resource limits cannot be removed",
        ),
        (
            None,
            {
                "spec": {
                    "containers": [{"name": "app", "resources": {"requests": {"memory": None}}}]
                }
            },
            "Forbidden: resource requests cannot be removed",
        ),
        (
            {"cpu": "1", "memory": "1Gi"},
            resize(cpu="2"),
            'Invalid value: "2": must be less than or equal to cpu limit of 1',
        ),
        (
            {"cpu": "100m", "memory": "64Mi"},
            resize(cpu="50m"),
            'spec: Invalid value: "Guaranteed": Pod QOS Class may not change as a result of resizing',
        ),
        (
            # A strategic merge patch naming an unknown container adds one (merge key
            # `name`): the real server's answer for that shape, recorded on 1.35.4.
            None,
            {"spec": {"containers": [{"name": "other", "resources": {}}]}},
            "spec.containers: Forbidden: containers may not be added or removed on resize",
        ),
    ],
)
async def test_resize_rejections(core: client.CoreV1Api, limits, patch, expected) -> None:
    await core.create_namespaced_pod("default", pod_body("p", limits=limits))
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod_resize("p", "default", patch)
    assert err.value.status == 422
    assert expected in message(err.value)
    assert message(err.value).startswith('Pod "p" is invalid: ')


async def test_resize_renaming_a_container_is_refused(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_body("p"))
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod_resize(
            "p",
            "default",
            [{"op": "replace", "path": "/spec/containers/0/name", "value": "other"}],
            _content_type="application/json-patch+json",
        )
    assert err.value.status == 422
    assert "containers may not be renamed or reordered on resize" in message(err.value)


async def test_resize_json_merge_patch_replacing_containers_is_refused(
    core: client.CoreV1Api,
) -> None:
    body = pod_body("p")
    body["spec"]["containers"][0]["resizePolicy"] = [
        {"resourceName": "cpu", "restartPolicy": "NotRequired"}
    ]
    await core.create_namespaced_pod("default", body)
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod_resize(
            "p", "default", resize(cpu="200m"), _content_type="application/merge-patch+json"
        )
    assert "only cpu and memory resources are mutable" in message(err.value)


async def test_status_subresource(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_body("p"))
    pod = await core.patch_namespaced_pod_status(
        "p", "default", {"status": {"conditions": [{"type": "Custom", "status": "True"}]}}
    )
    assert "Custom" in [c.type for c in pod.status.conditions]
    pod = await core.patch_namespaced_pod("p", "default", {"status": {"phase": "Failed"}})
    assert pod.status.phase == "Pending"


async def test_binding(core: client.CoreV1Api, sim) -> None:
    sim.auto_settle = False
    await core.create_namespaced_pod("default", pod_body("p"))
    await core.create_namespaced_pod_binding(
        "p",
        "default",
        {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}},
        _preload_content=False,
    )
    assert (await core.read_namespaced_pod("p", "default")).spec.node_name == "n1"


async def _running_pods(sim, core: client.CoreV1Api, n: int) -> None:
    await sim.add_node("n1")
    for i in range(n):
        await core.create_namespaced_pod("default", pod_body(f"p{i}"))
    await sim.settle()


async def test_eviction_honours_pdb(sim, api: client.ApiClient, core: client.CoreV1Api) -> None:
    await _running_pods(sim, core, 2)
    policy = client.PolicyV1Api(api)
    await policy.create_namespaced_pod_disruption_budget(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    await sim.settle()
    pdb = await policy.read_namespaced_pod_disruption_budget("web", "default")
    assert (
        pdb.status.current_healthy,
        pdb.status.desired_healthy,
        pdb.status.disruptions_allowed,
    ) == (2, 1, 1)
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p0", "namespace": "default"},
    }
    await core.create_namespaced_pod_eviction("p0", "default", eviction)
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod("p0", "default")
    assert err.value.status == 404
    eviction["metadata"]["name"] = "p1"
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_eviction("p1", "default", eviction)
    assert err.value.status == 429
    body = json.loads(err.value.body)
    assert body["reason"] == "TooManyRequests"
    assert (
        body["message"]
        == EVICTION_REFUSED
        == "Cannot evict pod as it would violate the pod's disruption budget."
    )
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web needs 1 healthy pods and has 1 currently",
        }
    ]
    await core.read_namespaced_pod("p1", "default")


async def test_a_budget_not_processed_since_its_change_refuses_every_eviction(
    sim, api: client.ApiClient, core: client.CoreV1Api
) -> None:
    """As the real server: while the disruption controller has not caught up with a PDB's
    generation, it protects every pod (429 with "still being processed")."""
    await _running_pods(sim, core, 2)
    policy = client.PolicyV1Api(api)
    body = {
        "metadata": {"name": "web"},
        "spec": {"maxUnavailable": 2, "selector": {"matchLabels": {"app": "web"}}},
    }
    sim.auto_settle = False
    await policy.create_namespaced_pod_disruption_budget("default", body)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p0"}}
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_eviction("p0", "default", eviction)
    assert err.value.status == 429
    assert json.loads(err.value.body)["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web is still being processed by the server.",
        }
    ]
    await sim.settle()  # the controller catches up: now the budget allows it
    await core.create_namespaced_pod_eviction("p0", "default", eviction)


async def test_eviction_without_pdb_and_pending_pods(
    sim, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    sim.auto_settle = False
    await core.create_namespaced_pod("default", pod_body("p"))
    await client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        "default", {"metadata": {"name": "all"}, "spec": {"maxUnavailable": 0, "selector": {}}}
    )
    # A pending pod is not protected by a budget.
    await core.create_namespaced_pod_eviction("p", "default", {"metadata": {"name": "p"}})
    assert (await core.list_namespaced_pod("default")).items == []


async def test_pdb_percentages_use_controller_scale(sim, api: client.ApiClient) -> None:
    await sim.add_node("n1")
    apps = client.AppsV1Api(api)
    await apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "app",
                                "image": "nginx:1",
                                "resources": {"requests": {"cpu": "100m"}},
                            }
                        ]
                    },
                },
            },
        },
    )
    await client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {"maxUnavailable": "25%", "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    await sim.settle()
    pdb = await client.PolicyV1Api(api).read_namespaced_pod_disruption_budget("web", "default")
    assert (
        pdb.status.expected_pods,
        pdb.status.desired_healthy,
        pdb.status.disruptions_allowed,
    ) == (4, 3, 1)
