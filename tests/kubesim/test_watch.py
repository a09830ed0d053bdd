"""Watch semantics through kubernetes-asyncio: resume, selectors, bookmarks, 410."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.testing import running_sim


async def take(stream: watch.Watch, n: int) -> list[tuple[str, str, str]]:
    """The next n events as (type, name, resourceVersion)."""
    out = []

    async def run() -> None:
        async for event in stream:
            raw = event["raw_object"]
            out.append(
                (event["type"], raw["metadata"].get("name", ""), raw["metadata"]["resourceVersion"])
            )
            if len(out) == n:
                return

    await asyncio.wait_for(run(), 10)
    await stream.close()
    return out


async def test_watch_from_resource_version_and_resume(core: client.CoreV1Api) -> None:
    start = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c"}, "data": {"a": "1"}}
    )
    await core.patch_namespaced_config_map("c", "default", {"data": {"a": "2"}})
    await core.delete_namespaced_config_map("c", "default")
    events = await take(
        watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=5
        ),
        3,
    )
    assert [e[0] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    resumed = await take(
        watch.Watch().stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=events[1][2],
            timeout_seconds=5,
        ),
        1,
    )
    assert resumed[0][0] == "DELETED" and resumed[0][2] == events[2][2]


async def test_watch_without_version_starts_with_current_state(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    events = await take(
        watch.Watch().stream(core.list_namespaced_config_map, "default", timeout_seconds=5), 1
    )
    assert events[0][:2] == ("ADDED", "c")


async def test_live_events_arrive(core: client.CoreV1Api) -> None:
    stream = watch.Watch().stream(
        core.list_namespaced_config_map, "default", resource_version="0", timeout_seconds=5
    )
    pending = asyncio.create_task(take(stream, 1))
    await asyncio.sleep(0)
    await core.create_namespaced_config_map("default", {"metadata": {"name": "live"}})
    assert (await pending)[0][:2] == ("ADDED", "live")


async def test_watch_too_old_version_is_410(sim, core: client.CoreV1Api) -> None:
    start = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    sim.store.compact()
    with pytest.raises(ApiException) as err:
        await take(
            watch.Watch().stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=start,
                timeout_seconds=5,
            ),
            1,
        )
    assert err.value.status == 410


async def test_bounded_history_expires_old_versions(tmp_path) -> None:
    async with running_sim(history=3) as sim, sim.api_client() as api:
        core = client.CoreV1Api(api)
        start = (await core.list_namespaced_config_map("default")).metadata.resource_version
        for i in range(5):
            await core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
        with pytest.raises(ApiException) as err:
            await take(
                watch.Watch().stream(
                    core.list_namespaced_config_map,
                    "default",
                    resource_version=start,
                    timeout_seconds=5,
                ),
                1,
            )
        assert err.value.status == 410


async def test_selector_transitions_are_added_and_deleted(core: client.CoreV1Api) -> None:
    start = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c", "labels": {"app": "web"}}}
    )
    await core.patch_namespaced_config_map(
        "c", "default", {"metadata": {"labels": {"app": "other"}}}
    )
    await core.patch_namespaced_config_map("c", "default", {"data": {"x": "1"}})
    await core.patch_namespaced_config_map("c", "default", {"metadata": {"labels": {"app": "web"}}})
    events = await take(
        watch.Watch().stream(
            core.list_namespaced_config_map,
            "default",
            label_selector="app=web",
            resource_version=start,
            timeout_seconds=5,
        ),
        3,
    )
    assert [e[0] for e in events] == ["ADDED", "DELETED", "ADDED"]


async def test_initial_events_end_bookmark(core: client.CoreV1Api, api: client.ApiClient) -> None:
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    response = await api.call_api(
        "/api/v1/namespaces/default/configmaps",
        "GET",
        query_params=[
            ("watch", "true"),
            ("sendInitialEvents", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("timeoutSeconds", "5"),
        ],
        _preload_content=False,
        response_types_map={},
    )
    first = await response.content.readline()
    second = await response.content.readline()
    response.close()
    assert b'"ADDED"' in first
    assert b'"BOOKMARK"' in second and b"k8s.io/initial-events-end" in second


async def test_periodic_bookmarks() -> None:
    async with running_sim(bookmark_interval=0.05) as sim, sim.api_client() as api:
        core = client.CoreV1Api(api)
        stream = watch.Watch().stream(
            core.list_namespaced_config_map,
            "default",
            resource_version="0",
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        )
        events = await take(stream, 1)
        assert events[0][0] == "BOOKMARK"


async def test_timeout_seconds_ends_the_stream(core: client.CoreV1Api) -> None:
    events = []
    async for event in watch.Watch().stream(
        core.list_namespaced_config_map, "default", resource_version="0", timeout_seconds=1
    ):
        events.append(event)
    assert events == []


async def test_watch_single_object_by_name(core: client.CoreV1Api) -> None:
    start = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    await core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    events = await take(
        watch.Watch().stream(
            core.list_namespaced_config_map,
            "default",
            field_selector="metadata.name=b",
            resource_version=start,
            timeout_seconds=5,
        ),
        1,
    )
    assert events[0][:2] == ("ADDED", "b")


async def test_cluster_wide_watch(sim, core: client.CoreV1Api) -> None:
    await sim.add_namespace("shop")
    start = (await core.list_config_map_for_all_namespaces()).metadata.resource_version
    await core.create_namespaced_config_map("shop", {"metadata": {"name": "a"}})
    await core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    events = await take(
        watch.Watch().stream(
            core.list_config_map_for_all_namespaces, resource_version=start, timeout_seconds=5
        ),
        2,
    )
    assert [e[1] for e in events] == ["a", "b"]


async def test_restored_objects_are_listed_and_watched_from_after_them(
    sim, core: client.CoreV1Api
) -> None:
    before = (await core.list_namespaced_config_map("default")).metadata.resource_version
    restored = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "default"}}
        for n in ("r1", "r0")
    ]
    assert sim.store.restore(("", "configmaps"), restored) == 2
    listed = await core.list_namespaced_config_map("default")
    assert [c.metadata.name for c in listed.items] == ["r0", "r1"]
    assert int(listed.metadata.resource_version) == int(before) + 2
    # No event was kept for them: a watch from before the restore is 410, one from the
    # list sees what happens next.
    with pytest.raises(ApiException) as err:
        await take(
            watch.Watch().stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=before,
                timeout_seconds=5,
            ),
            1,
        )
    assert err.value.status == 410
    stream = watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
    )
    await core.delete_namespaced_config_map("r0", "default")
    assert [(t, n) for t, n, _ in await take(stream, 1)] == [("DELETED", "r0")]
