"""LimitRanger: a namespace's LimitRanges default and bound pods as on kube-apiserver 1.35."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.conftest import pod_body
from tests.kubesim.test_admission import hook_entry, install
from tests.kubesim.webhook_server import Webhook, patch_response, serve

Obj = dict[str, Any]


def limit_range(*items: Obj, name: str = "bounds") -> Obj:
    return {"metadata": {"name": name}, "spec": {"limits": list(items)}}


def bare_pod(name: str, **container: Any) -> Obj:
    """A pod whose one container `app` sets only what is given."""
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27", **container}]},
    }


def guaranteed(name: str, cpu: str, memory: str = "64Mi") -> Obj:
    limits = {"cpu": cpu, "memory": memory}
    return pod_body(name, cpu=cpu, memory=memory, limits=limits)


async def refusal(core: client.CoreV1Api, body: Obj) -> str:
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", body)
    assert err.value.status == 403
    status = json.loads(err.value.body)
    assert status["reason"] == "Forbidden"
    assert status["details"] == {"name": body["metadata"]["name"], "kind": "pods"}
    return str(status["message"])


async def test_defaults_fill_what_containers_leave_out(core: client.CoreV1Api) -> None:
    await core.create_namespaced_limit_range(
        "default",
        limit_range(
            {
                "type": "Container",
                "default": {"cpu": "0.5"},
                "defaultRequest": {"cpu": "100m"},
                "max": {"memory": "1Gi"},
            }
        ),
    )
    # The LimitRange itself is defaulted: the default limit from max, the default
    # request from the default limit.
    stored = await core.read_namespaced_limit_range("bounds", "default")
    item = stored.spec.limits[0]
    assert item.default == {"cpu": "0.5", "memory": "1Gi"}
    assert item.default_request == {"cpu": "100m", "memory": "1Gi"}

    body = bare_pod("web-abc")
    body["spec"]["initContainers"] = [
        {"name": "setup", "image": "busybox:1.36", "resources": {"limits": {"cpu": "200m"}}}
    ]
    pod = await core.create_namespaced_pod("default", body)
    app, setup = pod.spec.containers[0], pod.spec.init_containers[0]
    assert app.resources.requests == {"cpu": "100m", "memory": "1Gi"}
    assert app.resources.limits == {"cpu": "500m", "memory": "1Gi"}
    # A limit without a request already made the request equal to it (pod defaulting
    # runs before admission), so only memory comes from the LimitRange.
    assert setup.resources.requests == {"cpu": "200m", "memory": "1Gi"}
    assert setup.resources.limits == {"cpu": "200m", "memory": "1Gi"}
    assert pod.metadata.annotations == {
        "kubernetes.io/limit-ranger": "LimitRanger plugin set: cpu, memory request for "
        "container app; cpu, memory limit for container app; memory request for init "
        "container setup; memory limit for init container setup"
    }


async def test_a_pod_that_sets_everything_is_not_annotated(core: client.CoreV1Api) -> None:
    await core.create_namespaced_limit_range(
        "default", limit_range({"type": "Container", "default": {"cpu": "1"}})
    )
    pod = await core.create_namespaced_pod("default", guaranteed("p", "250m"))
    assert pod.metadata.annotations is None
    assert pod.spec.containers[0].resources.limits == {"cpu": "250m", "memory": "64Mi"}


@pytest.mark.parametrize(
    ("item", "resources", "expected"),
    [
        (
            {"min": {"cpu": "250m"}},
            {"requests": {"cpu": "150m"}},
            "minimum cpu usage per Container is 250m, but request is 150m",
        ),
        (
            # Both sides are shown as the real server prints quantities.
            {"min": {"cpu": "0.25"}},
            {"requests": {"cpu": "0.15"}},
            "minimum cpu usage per Container is 250m, but request is 150m",
        ),
        (
            {"max": {"memory": "1Gi"}},
            {"limits": {"memory": "2Gi"}},
            "maximum memory usage per Container is 1Gi, but limit is 2Gi",
        ),
        (
            # Thousandths are rounded up before they are compared.
            {"max": {"cpu": "100m"}},
            {"limits": {"cpu": "100.5m"}},
            "maximum cpu usage per Container is 100m, but limit is 100500u",
        ),
        (
            {"maxLimitRequestRatio": {"cpu": "2"}},
            {"requests": {"cpu": "250m"}, "limits": {"cpu": "1"}},
            "cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000",
        ),
        (
            {"maxLimitRequestRatio": {"memory": "1.5"}},
            {"requests": {"memory": "64Mi"}},
            "memory max limit to request ratio per Container is 1500m, but no limit is "
            "specified or limit is 0",
        ),
    ],
)
async def test_container_bounds(
    core: client.CoreV1Api, item: Obj, resources: Obj, expected: str
) -> None:
    await core.create_namespaced_limit_range("default", limit_range({"type": "Container", **item}))
    message = await refusal(core, bare_pod("web-abc", resources=resources))
    assert message == f'pods "web-abc" is forbidden: {expected}'


async def test_request_above_limit_is_invalid_before_any_bound(core: client.CoreV1Api) -> None:
    """The pod's own validation (422) runs before the LimitRanger's (403)."""
    await core.create_namespaced_limit_range(
        "default", limit_range({"type": "Container", "min": {"cpu": "250m"}})
    )
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod(
            "default",
            bare_pod("p", resources={"requests": {"cpu": "300m"}, "limits": {"cpu": "200m"}}),
        )
    assert err.value.status == 422


async def test_every_error_of_a_limit_range_in_one_refusal(core: client.CoreV1Api) -> None:
    await core.create_namespaced_limit_range(
        "default",
        limit_range({"type": "Container", "min": {"cpu": "250m"}, "max": {"memory": "1Gi"}}),
    )
    body = bare_pod("web-abc", resources={"requests": {"cpu": "150m"}, "limits": {"memory": "2Gi"}})
    assert await refusal(core, body) == (
        'pods "web-abc" is forbidden: [minimum cpu usage per Container is 250m, but request '
        "is 150m, maximum memory usage per Container is 1Gi, but limit is 2Gi]"
    )


async def test_init_containers_are_bounded_too(core: client.CoreV1Api) -> None:
    await core.create_namespaced_limit_range(
        "default", limit_range({"type": "Container", "max": {"cpu": "1"}})
    )
    body = guaranteed("p", "500m")
    body["spec"]["initContainers"] = [
        {"name": "setup", "image": "busybox:1.36", "resources": {"limits": {"cpu": "2"}}}
    ]
    assert await refusal(core, body) == (
        'pods "p" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
    )


def with_init(body: Obj, *containers: tuple[str, str, bool]) -> Obj:
    """`body` with init containers (name, cpu, sidecar), requests equal to limits."""
    body["spec"]["initContainers"] = [
        {
            "name": name,
            "image": "busybox:1.36",
            "resources": {"limits": {"cpu": cpu, "memory": "16Mi"}},
            **({"restartPolicy": "Always"} if sidecar else {}),
        }
        for name, cpu, sidecar in containers
    ]
    return body


async def test_pod_bound_counts_sidecars_and_init_containers(core: client.CoreV1Api) -> None:
    await core.create_namespaced_limit_range(
        "default", limit_range({"type": "Pod", "max": {"cpu": "1"}, "min": {"memory": "64Mi"}})
    )
    # An init container that starts after the sidecar runs beside it: 700m + 400m.
    late = with_init(guaranteed("late", "400m"), ("proxy", "400m", True), ("setup", "700m", False))
    assert await refusal(core, late) == (
        'pods "late" is forbidden: maximum cpu usage per Pod is 1, but limit is 1100m'
    )
    # Before the sidecar it runs alone; the app and the sidecar together take 800m.
    early = with_init(
        guaranteed("early", "400m"), ("setup", "700m", False), ("proxy", "400m", True)
    )
    pod = await core.create_namespaced_pod("default", early)
    assert pod.metadata.name == "early"


async def test_pod_bound_without_a_request(core: client.CoreV1Api) -> None:
    await core.create_namespaced_limit_range(
        "default", limit_range({"type": "Pod", "min": {"memory": "64Mi"}})
    )
    body = bare_pod("p", resources={"requests": {"cpu": "100m"}})
    assert await refusal(core, body) == (
        'pods "p" is forbidden: minimum memory usage per Pod is 64Mi.  No request is specified'
    )


async def test_pod_level_resources_stand_for_the_containers(core: client.CoreV1Api) -> None:
    await core.create_namespaced_limit_range(
        "default", limit_range({"type": "Pod", "max": {"cpu": "1"}})
    )
    body = guaranteed("p", "800m")
    body["spec"]["resources"] = {"limits": {"cpu": "1500m"}}
    assert await refusal(core, body) == (
        'pods "p" is forbidden: maximum cpu usage per Pod is 1, but limit is 1500m'
    )


async def test_resize_is_refused_by_a_pod_bound(core: client.CoreV1Api) -> None:
    await core.create_namespaced_limit_range(
        "default", limit_range({"type": "Pod", "max": {"cpu": "1"}})
    )
    await core.create_namespaced_pod("default", guaranteed("web-abc", "500m"))
    resize = {
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "resources": {"requests": {"cpu": "1500m"}, "limits": {"cpu": "1500m"}},
                }
            ]
        }
    }
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod_resize("web-abc", "default", resize)
    assert err.value.status == 403
    assert json.loads(err.value.body)["message"] == (
        'pods "web-abc" is forbidden: maximum cpu usage per Pod is 1, but limit is 1500m'
    )
    pod = await core.read_namespaced_pod("web-abc", "default")
    assert pod.spec.containers[0].resources.limits["cpu"] == "500m"


async def test_other_pod_updates_are_not_bounded(core: client.CoreV1Api) -> None:
    """A LimitRange written after a pod does not stop its label changes, only its resizes."""
    await core.create_namespaced_pod("default", guaranteed("p", "500m"))
    await core.create_namespaced_limit_range(
        "default", limit_range({"type": "Container", "max": {"cpu": "200m"}})
    )
    pod = await core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"x": "y"}}})
    assert pod.metadata.labels["x"] == "y"
    same = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "500m"}}}]}}
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod_resize("p", "default", same)
    assert err.value.status == 403


async def take_limits(request: dict[str, Any]) -> dict[str, Any]:
    """Like a rightsizer: set the cpu request and drop every limit."""
    wanted = {"requests": {"cpu": "300m"}}
    if request["object"]["spec"]["containers"][0].get("resources") == wanted:
        return patch_response(request, [])
    op = {"op": "replace", "path": "/spec/containers/0/resources", "value": wanted}
    return patch_response(request, [op])


@pytest.fixture
async def webhook(tmp_path: Path) -> AsyncIterator[Webhook]:
    hook, runner = await serve(tmp_path, {"/mutate": take_limits}, ["kerf-webhook.kerf-system.svc"])
    try:
        yield hook
    finally:
        await runner.cleanup()


async def test_defaults_run_again_after_a_webhook_changed_the_pod(
    sim, api: client.ApiClient, core: client.CoreV1Api, webhook: Webhook
) -> None:
    """A webhook's change reinvokes the in-tree plugins: the limit it dropped comes back."""
    sim.service_addresses[("kerf-system", "kerf-webhook")] = webhook.address
    await install(api, hook_entry("pods.kerf.io", webhook.ca_bundle))
    await core.create_namespaced_limit_range(
        "default",
        limit_range(
            {"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "100m"}}
        ),
    )
    pod = await core.create_namespaced_pod("default", bare_pod("p"))
    # The webhook saw the LimitRanger's defaults, then its own change was defaulted again.
    seen = webhook.reviews[0]["request"]["object"]["spec"]["containers"][0]["resources"]
    assert seen == {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}
    assert pod.spec.containers[0].resources.requests == {"cpu": "300m"}
    assert pod.spec.containers[0].resources.limits == {"cpu": "1"}
    assert pod.metadata.annotations == {
        "kubernetes.io/limit-ranger": "LimitRanger plugin set: cpu limit for container app"
    }
