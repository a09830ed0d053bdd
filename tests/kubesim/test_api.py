"""REST semantics through the real kubernetes-asyncio client."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.sim import Simulator
from tests.kubesim.conftest import pod_body


def status_of(exc: ApiException) -> dict:
    body = json.loads(exc.body)
    assert body["kind"] == "Status" and body["status"] == "Failure"
    return body


async def test_create_sets_system_fields(core: client.CoreV1Api) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("p1"))
    assert pod.metadata.uid and pod.metadata.resource_version and pod.metadata.creation_timestamp
    assert pod.metadata.generation == 1
    assert pod.status.phase == "Pending"
    assert pod.status.qos_class == "Burstable"
    assert pod.spec.restart_policy == "Always"
    assert pod.spec.containers[0].termination_message_path == "/dev/termination-log"


async def test_limits_default_requests_and_guaranteed_qos(core: client.CoreV1Api) -> None:
    body = pod_body("g", limits={"cpu": "100m", "memory": "64Mi"})
    del body["spec"]["containers"][0]["resources"]["requests"]
    pod = await core.create_namespaced_pod("default", body)
    assert pod.spec.containers[0].resources.requests == {"cpu": "100m", "memory": "64Mi"}
    assert pod.status.qos_class == "Guaranteed"


async def test_get_missing_is_404_status(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod("nope", "default")
    assert err.value.status == 404
    body = status_of(err.value)
    assert body["reason"] == "NotFound"
    assert body["message"] == 'pods "nope" not found'
    assert body["details"] == {"name": "nope", "kind": "pods"}


async def test_create_in_missing_namespace_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("ghost", pod_body("p"))
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'namespaces "ghost" not found'


async def test_duplicate_create_is_already_exists(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_body("p"))
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", pod_body("p"))
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "AlreadyExists"


async def test_generate_name(core: client.CoreV1Api) -> None:
    body = pod_body("")
    body["metadata"] = {"generateName": "web-"}
    pod = await core.create_namespaced_pod("default", body)
    assert pod.metadata.name.startswith("web-") and len(pod.metadata.name) == 9


async def test_invalid_pod_is_422_with_causes(core: client.CoreV1Api) -> None:
    body = pod_body("bad", cpu="600m", limits={"cpu": "500m"})
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", body)
    assert err.value.status == 422
    status = status_of(err.value)
    assert status["reason"] == "Invalid"
    assert (
        status["message"]
        == 'Pod "bad" is invalid: spec.containers[0].resources.requests: Invalid value: "600m": must be less than or equal to cpu limit of 500m'
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "600m": must be less than or equal to cpu limit of 500m',
            "field": "spec.containers[0].resources.requests",
        }
    ]


async def test_stale_update_conflicts(core: client.CoreV1Api) -> None:
    cm = await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c"}, "data": {"a": "1"}}
    )
    cm.data = {"a": "2"}
    await core.replace_namespaced_config_map("c", "default", cm)
    cm.data = {"a": "3"}
    with pytest.raises(ApiException) as err:
        await core.replace_namespaced_config_map("c", "default", cm)
    assert err.value.status == 409
    body = status_of(err.value)
    assert body["reason"] == "Conflict"
    assert (
        body["message"]
        == 'Operation cannot be fulfilled on configmaps "c": the object has been modified; please apply your changes to the latest version and try again'
    )


async def test_patch_with_stale_resource_version_conflicts(core: client.CoreV1Api) -> None:
    cm = await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c"}, "data": {"a": "1"}}
    )
    await core.patch_namespaced_config_map("c", "default", {"data": {"a": "2"}})
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_config_map(
            "c",
            "default",
            {"metadata": {"resourceVersion": cm.metadata.resource_version}, "data": {"a": "3"}},
        )
    assert err.value.status == 409


async def test_noop_update_keeps_resource_version(core: client.CoreV1Api) -> None:
    cm = await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c"}, "data": {"a": "1"}}
    )
    same = await core.patch_namespaced_config_map("c", "default", {"data": {"a": "1"}})
    assert same.metadata.resource_version == cm.metadata.resource_version


async def test_patch_types(core: client.CoreV1Api) -> None:
    body = pod_body("p")
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1"})
    await core.create_namespaced_pod("default", body)
    # Strategic merge: containers merge by name, so the other container survives.
    pod = await core.patch_namespaced_pod(
        "p", "default", {"spec": {"containers": [{"name": "side", "image": "busybox:2"}]}}
    )
    assert [c.image for c in pod.spec.containers] == ["nginx:1.27", "busybox:2"]
    pod = await core.patch_namespaced_pod(
        "p",
        "default",
        {"metadata": {"labels": {"tier": "x"}}},
        _content_type="application/merge-patch+json",
    )
    assert pod.metadata.labels == {"app": "web", "tier": "x"}
    pod = await core.patch_namespaced_pod(
        "p", "default", [{"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}}]
    )
    assert pod.metadata.annotations == {"k": "v"}
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod(
            "p", "default", [{"op": "test", "path": "/metadata/name", "value": "other"}]
        )
    assert err.value.status == 422


async def test_pod_resources_are_immutable_on_main_resource(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_body("p"))
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod(
            "p",
            "default",
            {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "200m"}}}]}},
        )
    assert err.value.status == 422
    assert "pod updates may not change fields other than" in status_of(err.value)["message"]


async def test_generation_follows_spec_only(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    body = {
        "metadata": {"name": "d"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "x:1"}]},
            },
        },
    }
    d = await apps.create_namespaced_deployment("default", body)
    assert d.metadata.generation == 1
    d = await apps.patch_namespaced_deployment("d", "default", {"metadata": {"labels": {"a": "b"}}})
    assert d.metadata.generation == 1
    d = await apps.patch_namespaced_deployment(
        "d", "default", {"spec": {"replicas": 0, "paused": True}}
    )
    assert d.metadata.generation == 2


async def test_status_subresource_split(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    body = {
        "metadata": {"name": "d"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "x:1"}]},
            },
        },
    }
    await apps.create_namespaced_deployment("default", body)
    d = await apps.patch_namespaced_deployment("d", "default", {"status": {"replicas": 7}})
    assert (d.status.replicas or 0) != 7
    d = await apps.patch_namespaced_deployment_status(
        "d", "default", {"status": {"replicas": 7}, "spec": {"replicas": 5}}
    )
    assert d.status.replicas == 7 and d.spec.replicas == 0


async def test_label_selectors_all_operators(core: client.CoreV1Api) -> None:
    for name, labels in {
        "a": {"app": "web", "tier": "1"},
        "b": {"app": "api", "tier": "2"},
        "c": {"app": "db"},
    }.items():
        await core.create_namespaced_pod("default", pod_body(name, labels=labels))

    async def names(selector: str) -> list[str]:
        return [
            p.metadata.name
            for p in (await core.list_namespaced_pod("default", label_selector=selector)).items
        ]

    assert await names("app=web") == ["a"]
    assert await names("app==web") == ["a"]
    assert await names("app!=web") == ["b", "c"]
    assert await names("app in (web,api)") == ["a", "b"]
    assert await names("app notin (web,api)") == ["c"]
    assert await names("tier") == ["a", "b"]
    assert await names("!tier") == ["c"]
    assert await names("tier,app notin (web)") == ["b"]
    assert await names("tier>1") == ["b"]


async def test_field_selectors(sim, core: client.CoreV1Api) -> None:
    await sim.add_node("n1")
    await core.create_namespaced_pod("default", pod_body("a"))
    await sim.settle()
    assert [
        p.metadata.name
        for p in (await core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")).items
    ] == ["a"]
    assert (await core.list_namespaced_pod("default", field_selector="status.phase=Running")).items[
        0
    ].metadata.name == "a"
    assert (
        await core.list_namespaced_pod("default", field_selector="status.phase!=Running")
    ).items == []
    assert [
        p.metadata.name
        for p in (
            await core.list_namespaced_pod(
                "default", field_selector="metadata.name=a,metadata.namespace=default"
            )
        ).items
    ] == ["a"]
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_pod("default", field_selector="spec.bogus=1")
    assert err.value.status == 400


async def test_paging(core: client.CoreV1Api) -> None:
    for i in range(5):
        await core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    seen, token = [], None
    while True:
        page = await core.list_namespaced_config_map("default", limit=2, _continue=token)
        seen += [c.metadata.name for c in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert seen == ["c0", "c1", "c2", "c3", "c4"]


async def test_paging_across_namespaces_follows_namespace_then_name(
    sim, core: client.CoreV1Api
) -> None:
    # "a-b" sorts after "a" as a namespace but before "a/…" as text: the position of a
    # page is a (namespace, name) pair, not the string "namespace/name".
    for namespace in ("a", "a-b"):
        await sim.add_namespace(namespace)
    for namespace, name in (("a", "z"), ("a-b", "a"), ("a-b", "b"), ("a", "y")):
        await core.create_namespaced_config_map(namespace, {"metadata": {"name": name}})
    seen, versions, token = [], set(), None
    while True:
        page = await core.list_config_map_for_all_namespaces(limit=1, _continue=token)
        seen += [(c.metadata.namespace, c.metadata.name) for c in page.items]
        versions.add(page.metadata.resource_version)
        await core.create_namespaced_config_map("a-b", {"metadata": {"generateName": "n-"}})
        token = page.metadata._continue
        if not token:
            break
    assert seen[:4] == [("a", "y"), ("a", "z"), ("a-b", "a"), ("a-b", "b")]
    # Every page carries the first page's version: a watch from it misses nothing.
    assert len(versions) == 1


async def test_an_expired_continue_is_410_and_a_garbled_one_400(
    sim, core: client.CoreV1Api
) -> None:
    for i in range(3):
        await core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    first = await core.list_namespaced_config_map("default", limit=1)
    await core.delete_namespaced_config_map("c2", "default")
    sim.store.compact()  # the first page's version is gone
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_config_map(
            "default", limit=1, _continue=first.metadata._continue
        )
    assert err.value.status == 410
    assert status_of(err.value)["reason"] == "Expired"
    assert "continue parameter is too old" in status_of(err.value)["message"]
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_config_map("default", limit=1, _continue="bm90LWpzb24")
    assert err.value.status == 400


async def test_listed_items_are_not_the_stored_objects(sim, core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {}})
    rt = sim.api.resource("", "v1", "configmaps")
    listed = sim.api.list(rt, "default")["items"][0]
    listed["data"]["k"] = "v"
    assert sim.store.peek(rt.key, "default", "c")["data"] == {}


async def test_dry_run_does_not_persist(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}}, dry_run="All")
    assert (await core.list_namespaced_config_map("default")).items == []


async def test_delete_preconditions_and_result(core: client.CoreV1Api) -> None:
    cm = await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    with pytest.raises(ApiException) as err:
        await core.delete_namespaced_config_map(
            "c", "default", body={"preconditions": {"uid": "other"}}
        )
    assert err.value.status == 409
    await core.delete_namespaced_config_map(
        "c", "default", body={"preconditions": {"uid": cm.metadata.uid}}
    )
    with pytest.raises(ApiException):
        await core.read_namespaced_config_map("c", "default")


async def test_finalizers_hold_deletion(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c", "finalizers": ["x/y"]}}
    )
    await core.delete_namespaced_config_map("c", "default")
    held = await core.read_namespaced_config_map("c", "default")
    assert held.metadata.deletion_timestamp is not None
    await core.patch_namespaced_config_map(
        "c",
        "default",
        {"metadata": {"finalizers": None}},
        _content_type="application/merge-patch+json",
    )
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_config_map("c", "default")
    assert err.value.status == 404


async def test_namespace_delete_cascades(core: client.CoreV1Api) -> None:
    ns = await core.create_namespace({"metadata": {"name": "shop"}})
    assert ns.metadata.labels["kubernetes.io/metadata.name"] == "shop"
    await core.create_namespaced_config_map("shop", {"metadata": {"name": "c"}})
    await core.delete_namespace("shop")
    assert (
        await core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=shop")
    ).items == []


async def test_discovery(api: client.ApiClient) -> None:
    groups = await client.ApisApi(api).get_api_versions()
    names = {g.name for g in groups.groups}
    assert {
        "apps",
        "batch",
        "policy",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        "autoscaling",
        "events.k8s.io",
        "admissionregistration.k8s.io",
    } <= names
    core_resources = await client.CoreV1Api(api).get_api_resources()
    names = {r.name for r in core_resources.resources}
    assert {
        "pods",
        "pods/resize",
        "pods/eviction",
        "pods/status",
        "nodes",
        "namespaces",
        "events",
    } <= names
    version = await client.VersionApi(api).get_code()
    assert version.minor == "35"


async def test_scale_subresource(api: client.ApiClient) -> None:
    apps = client.AppsV1Api(api)
    body = {
        "metadata": {"name": "d"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "x:1"}]},
            },
        },
    }
    await apps.create_namespaced_deployment("default", body)
    scale = await apps.read_namespaced_deployment_scale("d", "default")
    assert scale.spec.replicas == 1 and scale.status.selector == "app=d"
    scale = await apps.patch_namespaced_deployment_scale("d", "default", {"spec": {"replicas": 3}})
    assert scale.spec.replicas == 3
    assert (await apps.read_namespaced_deployment("d", "default")).spec.replicas == 3


async def test_events_are_one_set_behind_both_apis(
    api: client.ApiClient, core: client.CoreV1Api
) -> None:
    new_events = client.EventsV1Api(api)
    await new_events.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "e1"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "kerf.io/reconciler",
            "reportingInstance": "kerf-0",
            "action": "Resize",
            "reason": "Resized",
            "type": "Normal",
            "note": "resized app",
            "regarding": {
                "kind": "Deployment",
                "namespace": "default",
                "name": "web",
                "apiVersion": "apps/v1",
            },
        },
    )
    legacy = await core.read_namespaced_event("e1", "default")
    assert (legacy.message, legacy.involved_object.name, legacy.reporting_component) == (
        "resized app",
        "web",
        "kerf.io/reconciler",
    )
    listed = await new_events.list_namespaced_event("default", field_selector="regarding.name=web")
    assert [e.note for e in listed.items] == ["resized app"]
    await core.patch_namespaced_event("e1", "default", {"message": "changed"})
    assert (await new_events.read_namespaced_event("e1", "default")).note == "changed"


def _client_closed(caplog: pytest.LogCaptureFixture) -> bool:
    return any("the client closed the connection" in r.getMessage() for r in caplog.records)


async def test_client_gone_mid_body_is_one_line_and_changes_nothing(
    sim: Simulator, core: client.CoreV1Api, caplog: pytest.LogCaptureFixture
) -> None:
    """A client killed while it sends a write (the soak's SIGKILL) is not a kubesim error."""
    caplog.set_level(logging.INFO, logger="kubesim.api")
    await core.create_namespaced_pod("default", pod_body("p1"))
    await sim.settle()
    before = await core.read_namespaced_pod("p1", "default")
    host, port = sim.http.server_address.split(":")
    _, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"PUT /api/v1/namespaces/default/pods/p1 HTTP/1.1\r\nHost: kubesim\r\n"
        b"Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n" + b'{"kind": "Pod"'
    )
    await writer.drain()
    writer.close()
    await writer.wait_closed()
    async with asyncio.timeout(30):
        while not _client_closed(caplog):
            await asyncio.sleep(0.01)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    await sim.settle()
    after = await core.read_namespaced_pod("p1", "default")
    assert after.metadata.resource_version == before.metadata.resource_version
