"""The cluster feed against the kubesim API server, through the real kubernetes-asyncio client."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes_asyncio import client

from app.decide.admission import admit_pod
from app.kube import informer as informer_module
from app.kube.informer import WEBHOOK_RESOURCES, Backoff, ObjectKeys, Resource
from app.model.owners import WorkloadRef
from app.runtime.heap import freeze_loaded_state
from app.runtime.jsonlog import JsonLinesFormatter
from app.store.view import ClusterView
from kubesim.faults import FaultRule
from kubesim.sim import Simulator
from kubesim.testing import running_sim
from tests.cluster import (
    GROUP,
    VERSION,
    Sleeps,
    custom,
    deployment,
    eventually,
    install_shop,
    running_feed,
    static_policy,
    strategy,
)

MERGE_PATCH = "application/merge-patch+json"
NOW = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)
RECOMMENDATIONS = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "kerf-recommendations",
        "namespace": "shop",
        "labels": {"rightsizing.kubex.ai/recommendations": "true"},
    },
    "data": {
        "recommendations.json": orjson.dumps(
            {
                "recommendations": [
                    {
                        "namespace": "shop",
                        "ownerKind": "Deployment",
                        "ownerName": "api",
                        "container": "app",
                        "requests": {"cpu": "300m", "memory": "384Mi"},
                        "analyzedAt": "2026-11-28T09:00:00Z",
                        "coverageHours": 240,
                        "samples": 20160,
                        "confidence": 0.93,
                    }
                ]
            }
        ).decode()
    },
}


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with running_sim(tmp_path) as simulator:
        yield simulator


@pytest.fixture
async def api(sim: Simulator) -> AsyncIterator[client.ApiClient]:
    """A client for a cluster with kerf's CRDs, namespace `shop`, a node, a strategy, the
    `web` policy, Deployments `web` and `api`, and a recommendations ConfigMap."""
    async with sim.api_client() as api_client:
        await install_shop(sim, api_client)
        apps = client.AppsV1Api(api_client)
        await apps.create_namespaced_deployment("shop", deployment("web", "shop", replicas=2))
        await apps.create_namespaced_deployment("shop", deployment("api", "shop"))
        core = client.CoreV1Api(api_client)
        await core.create_namespaced_config_map("shop", RECOMMENDATIONS)
        await core.create_namespaced_config_map("shop", {"metadata": {"name": "other"}})
        await sim.settle()
        yield api_client


def pods_of(view: ClusterView, name: str) -> list[dict[str, Any]]:
    return view.pods(WorkloadRef("Deployment", "shop", name))  # type: ignore[return-value]


def policy_cpu(view: ClusterView, name: str = "web") -> str | None:
    policy = view.kerf_object("StaticPolicy", "shop", name)
    return policy.spec.resources.containers["app"].requests.get("cpu") if policy else None  # type: ignore[attr-defined]


async def test_initial_list_fills_the_view(api: client.ApiClient) -> None:
    view = ClusterView()
    assert not view.synced
    async with running_feed(api, view, sleep=Sleeps(), clock=lambda: NOW):
        assert view.synced and view.synced_at == NOW
        assert (
            view.get("Namespace", "", "shop") is not None
            and view.get("Node", "", "node-a") is not None
        )
        web = view.workload(WorkloadRef("Deployment", "shop", "web"))
        assert web is not None and web.kind == "Deployment"
        assert len(pods_of(view, "web")) == 2 and len(pods_of(view, "api")) == 1
        assert view.kerf_object("AutomationStrategy", "shop", "default") is not None
        assert policy_cpu(view) == "250m"
        # Only the labelled ConfigMap is a recommendation source, and it was read.
        rows = view.recommendations("rows", WorkloadRef("Deployment", "shop", "api"))
        assert rows["app"].requests == {"cpu": "300m", "memory": "384Mi"}
        # List items of built-in kinds come without kind/apiVersion; the view needs kind.
        pod = pods_of(view, "web")[0]
        assert (pod["kind"], pod["apiVersion"]) == ("Pod", "v1")
        assert "creationTimestamp" in pod["metadata"]  # raw JSON: camelCase keys as served


async def test_added_modified_deleted_reach_the_view(sim: Simulator, api: client.ApiClient) -> None:
    view = ClusterView()
    async with running_feed(api, view, sleep=Sleeps()):
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        await core.create_namespace({"metadata": {"name": "late"}})
        await eventually(lambda: view.get("Namespace", "", "late"), "namespace ADDED")

        await apps.patch_namespaced_deployment("api", "shop", {"spec": {"replicas": 3}})
        await eventually(lambda: len(pods_of(view, "api")) == 3, "pods of the scaled Deployment")
        await eventually(
            lambda: (
                getattr(view.workload(WorkloadRef("Deployment", "shop", "api")), "replicas", 0) == 3
            ),
            "Deployment MODIFIED",
        )

        await custom(api).delete_namespaced_custom_object(
            GROUP, VERSION, "shop", "staticpolicies", "web"
        )
        await eventually(lambda: policy_cpu(view) is None, "policy DELETED")
        await core.delete_namespaced_config_map("kerf-recommendations", "shop")
        await eventually(
            lambda: not view.recommendations("rows", WorkloadRef("Deployment", "shop", "api")),
            "ConfigMap DELETED",
        )


async def test_a_policy_change_changes_the_decision(api: client.ApiClient) -> None:
    view = ClusterView()
    async with running_feed(api, view, sleep=Sleeps()):
        pod = pods_of(view, "web")[0]
        before = admit_pod(view, pod, "shop", NOW)
        assert before.outcome == "apply"
        assert {(s["resource"], s["value"]) for s in before.selected} == {
            ("cpu", "250m"),
            ("memory", "256Mi"),
        }
        changed = static_policy("web", "shop", "web", "400m", "256Mi")
        await custom(api).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "shop",
            "staticpolicies",
            "web",
            {"spec": changed["spec"]},
            _content_type=MERGE_PATCH,
        )
        await eventually(lambda: policy_cpu(view) == "400m", "the policy change")
        after = admit_pod(view, pod, "shop", NOW)
        assert ("cpu", "400m") in {(s["resource"], s["value"]) for s in after.selected}


def kubex_file(cpu_mcores: int) -> dict[str, str]:
    """The data of Kubex's recommendation ConfigMap, one row for shop/api."""
    row = {
        "Cluster": "c",
        "Namespace": "shop",
        "PodOwnerKind": "Deployment",
        "PodOwnerName": "api",
        "Container": "app",
        "EntityId": "e",
        "ContainerId": "c",
        "KubexAutomation": "true",
        "AnalyzedOn": "2026-11-28T09:00:00Z",
        "RecommendedCpuRequestMCores": cpu_mcores,
    }
    return {"recommendations.json": orjson.dumps({"results": [row]}).decode()}


async def test_kubexs_configmap_is_watched_by_name(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespace({"metadata": {"name": "kubex"}})
    # Kubex's chart labels nothing: the name is what makes it a source.
    await core.create_namespaced_config_map(
        "kubex", {"metadata": {"name": "recs"}, "data": kubex_file(300)}
    )
    await core.create_namespaced_config_map(
        "kubex", {"metadata": {"name": "not-recs"}, "data": kubex_file(100)}
    )
    view = ClusterView(kubex_source=("kubex", "recs"))
    api_ref = WorkloadRef("Deployment", "shop", "api")
    async with running_feed(api, view, sleep=Sleeps()) as feed:
        assert sum(i.resource.kind == "ConfigMap" for i in feed.informers) == 2
        # Kubex's row wins over the labelled ConfigMap's (300m too, but kerf's format).
        assert view.recommendations("rows", api_ref)["app"].origin == "kubex"
        assert [s.name for s in view.recommendations("sources")] == ["recs", "kerf-recommendations"]
        await core.patch_namespaced_config_map("recs", "kubex", {"data": kubex_file(350)})
        await eventually(
            lambda: view.recommendations("rows", api_ref)["app"].requests == {"cpu": "350m"},
            "MODIFIED",
        )
        await core.delete_namespaced_config_map("recs", "kubex")
        await eventually(
            lambda: view.recommendations("rows", api_ref)["app"].origin == "kerf", "DELETED"
        )


async def test_410_relists_and_drops_what_was_deleted_meanwhile(
    sim: Simulator, api: client.ApiClient
) -> None:
    view = ClusterView()
    sleeps = Sleeps()
    crs = custom(api)
    await crs.create_namespaced_custom_object(
        GROUP, VERSION, "shop", "staticpolicies", static_policy("old", "shop", "old", "1", "1Gi")
    )
    async with running_feed(api, view, sleep=sleeps):
        assert policy_cpu(view, "old") == "1"
        # The next policy watch answers 410, and lists fail until the test is done
        # changing the cluster: the feed cannot see these changes as events.
        sim.faults.gone(times=1, resource="staticpolicies")
        blocked = sim.faults.add(
            FaultRule(status=500, verbs=frozenset({"list"}), resource="staticpolicies")
        )
        sim.faults.drop_watches()
        await crs.delete_namespaced_custom_object(GROUP, VERSION, "shop", "staticpolicies", "old")
        await crs.create_namespaced_custom_object(
            GROUP,
            VERSION,
            "shop",
            "staticpolicies",
            static_policy("new", "shop", "new", "2", "2Gi"),
        )
        await eventually(lambda: len(sleeps.delays) >= 2, "backoff while lists fail")
        assert policy_cpu(view, "old") == "1"  # still the last known state
        sim.faults.remove(blocked)
        await eventually(lambda: policy_cpu(view, "new") == "2", "the relist")
        assert view.kerf_object("StaticPolicy", "shop", "old") is None
        assert policy_cpu(view, "web") == "250m"  # untouched objects stay
        # Watching resumes after the relist: a later change arrives as an event.
        await crs.delete_namespaced_custom_object(GROUP, VERSION, "shop", "staticpolicies", "new")
        await eventually(lambda: policy_cpu(view, "new") is None, "an event after the relist")


async def test_api_errors_back_off_then_recover(
    sim: Simulator, api: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    sim.faults.add(
        FaultRule(status=500, times=3, verbs=frozenset({"list"}), resource="deployments")
    )
    sleeps = Sleeps()
    view = ClusterView()
    with caplog.at_level(logging.WARNING, logger="kerf.informer"):
        async with running_feed(api, view, sleep=sleeps):
            assert view.workload(WorkloadRef("Deployment", "shop", "web")) is not None
    backoffs = [d for d in sleeps.delays if d < 60]
    assert len(backoffs) == 3
    # Equal jitter: each delay lies in the upper half of a doubling ceiling.
    for attempt, delay in enumerate(backoffs):
        ceiling = 0.5 * 2**attempt
        assert ceiling / 2 <= delay <= ceiling
    failures = [
        r.getMessage() for r in caplog.records if "Deployment: list/watch failed" in r.getMessage()
    ]
    assert len(failures) == 3 and "500" in failures[0]


def test_backoff_is_capped_and_resets() -> None:
    backoff = Backoff(base_s=1, cap_s=8)
    ceilings = [1, 2, 4, 8, 8, 8]
    for ceiling in ceilings:
        assert ceiling / 2 <= backoff.next_delay() <= ceiling
    backoff.reset()
    assert backoff.next_delay() <= 1


async def test_an_invalid_kerf_object_is_skipped_and_logged(
    sim: Simulator, api: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    # Start and end may not be equal; the CRD says so in CEL, which a cluster whose CRDs
    # predate this kerf does not evaluate: the informer must still keep such objects out.
    await _without_rules(api, "automationstrategies")
    broken = strategy("broken", "shop")
    broken["spec"]["scheduling"] = {
        "inclusionWindows": [{"name": "w", "start": "10:00", "end": "10:00"}]
    }
    crs = custom(api)
    await crs.create_namespaced_custom_object(
        GROUP, VERSION, "shop", "automationstrategies", broken
    )
    view = ClusterView()
    with caplog.at_level(logging.WARNING, logger="kerf.informer"):
        async with running_feed(api, view, sleep=Sleeps()):
            assert view.kerf_object("AutomationStrategy", "shop", "broken") is None
            assert view.kerf_object("AutomationStrategy", "shop", "default") is not None
            assert policy_cpu(view) == "250m"

            # A valid object that turns invalid leaves the view: its old version no
            # longer says what the cluster holds.
            await crs.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                "shop",
                "automationstrategies",
                "default",
                {"spec": broken["spec"]},
                _content_type=MERGE_PATCH,
            )
            await eventually(
                lambda: view.kerf_object("AutomationStrategy", "shop", "default") is None,
                "the invalid update",
            )
    skipped = [r for r in caplog.records if r.getMessage().startswith("skipping an invalid object")]
    assert len(skipped) == 2
    line = orjson.loads(JsonLinesFormatter().format(skipped[0]))
    assert line["level"] == "warning"
    assert "AutomationStrategy shop/broken" in line["msg"]
    assert "spec.scheduling.inclusionWindows[0]" in line["msg"] and "start and end" in line["msg"]


async def _without_rules(api: client.ApiClient, plural: str) -> None:
    """Replace the CRD of `plural` with itself minus its `x-kubernetes-validations`."""
    crds = client.ApiextensionsV1Api(api)
    name = f"{plural}.{GROUP}"
    crd = api.sanitize_for_serialization(await crds.read_custom_resource_definition(name))

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "x-kubernetes-validations"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    await crds.replace_custom_resource_definition(name, strip(crd))


def recorded(resource: Resource, calls: list[dict[str, Any]], before: Any = None) -> Resource:
    """`resource` with its list calls recorded (watches are not), and `before(kwargs)`
    awaited ahead of each: how a test acts between two pages of one list."""

    def lister(api_client: client.ApiClient) -> Any:
        call = resource.lister(api_client)

        async def wrapped(**kwargs: Any) -> Any:
            if not kwargs.get("watch"):
                calls.append(kwargs)
                if before is not None:
                    await before(kwargs)
            return await call(**kwargs)

        return wrapped

    return dataclasses.replace(resource, lister=lister)


NODES = next(r for r in WEBHOOK_RESOURCES if r.kind == "Node")


async def test_lists_in_pages(sim: Simulator, api: client.ApiClient) -> None:
    for name in ("n0", "n1", "n2", "n3"):
        await sim.add_node(name)
    calls: list[dict[str, Any]] = []
    view = ClusterView()
    async with running_feed(api, view, resources=[recorded(NODES, calls)], page_size=2):
        assert all(view.get("Node", "", n) is not None for n in ("n0", "n1", "n2", "n3", "node-a"))
    assert [c["limit"] for c in calls] == [2, 2, 2]
    assert [bool(c.get("_continue")) for c in calls] == [False, True, True]


async def test_a_410_mid_pagination_lists_again_from_the_start(
    sim: Simulator, api: client.ApiClient
) -> None:
    for name in ("n0", "n1", "n2", "n3"):
        await sim.add_node(name)
    core = client.CoreV1Api(api)
    armed = asyncio.Event()

    async def expire_during_relist(kwargs: dict[str, Any]) -> None:
        # Between two pages of the relist, n3 goes, n9 comes, and the version the
        # continuation names is compacted away: the next page is answered 410.
        if armed.is_set() and kwargs.get("_continue"):
            armed.clear()
            await core.delete_node("n3")
            await sim.add_node("n9")
            sim.store.compact()

    calls: list[dict[str, Any]] = []
    sleeps = Sleeps()
    view = ClusterView()
    resource = recorded(NODES, calls, expire_during_relist)
    async with running_feed(api, view, resources=[resource], page_size=2, sleep=sleeps):
        assert view.get("Node", "", "n3") is not None and view.get("Node", "", "n9") is None
        armed.set()
        sim.faults.gone(times=1, resource="nodes")
        sim.faults.drop_watches()
        await eventually(
            lambda: view.get("Node", "", "n9") is not None and view.get("Node", "", "n3") is None,
            "the list started over and completed",
        )
        assert all(view.get("Node", "", n) is not None for n in ("n0", "n1", "n2", "node-a"))
        # Watching resumes after it: a later change arrives as an event.
        await core.delete_node("n0")
        await eventually(lambda: view.get("Node", "", "n0") is None, "an event after the relist")
    continued = [bool(c.get("_continue")) for c in calls]
    # initial list (3 pages), relist: page 1, page 2 refused, then 3 pages again
    assert continued == [False, True, True, False, True, False, True, True]


async def test_on_synced_runs_once_and_the_frozen_view_still_follows_the_cluster(
    sim: Simulator, api: client.ApiClient
) -> None:
    frozen: list[None] = []
    view = ClusterView()
    try:
        async with running_feed(
            api,
            view,
            sleep=Sleeps(),
            on_synced=lambda: frozen.append(freeze_loaded_state()),
        ) as feed:
            assert len(frozen) == 1
            pod = pods_of(view, "web")[0]
            tracked = {id(o) for o in gc.get_objects()}
            assert id(pod) not in tracked and id(view) not in tracked  # frozen: not scanned

            # A relist of every resource marks the view synced again: no second freeze.
            watching = [i for i in feed.informers if not i.resource.optional]  # Rollouts: absent
            for informer in watching:
                informer.list_seconds = None
            sim.faults.gone(times=len(watching))
            sim.faults.drop_watches()
            await eventually(
                lambda: all(i.list_seconds is not None for i in watching), "every relist"
            )
            assert len(frozen) == 1

            apps = client.AppsV1Api(api)
            await apps.patch_namespaced_deployment("web", "shop", {"spec": {"replicas": 3}})
            await eventually(lambda: len(pods_of(view, "web")) == 3, "pods added after the freeze")
            await apps.delete_namespaced_deployment("api", "shop", propagation_policy="Foreground")
            await eventually(lambda: not pods_of(view, "api"), "pods deleted after the freeze")
            await custom(api).delete_namespaced_custom_object(
                GROUP, VERSION, "shop", "staticpolicies", "web"
            )
            await eventually(lambda: policy_cpu(view) is None, "a policy deleted after it")
            assert admit_pod(view, pods_of(view, "web")[0], "shop", NOW).outcome != "apply"
    finally:
        gc.unfreeze()


async def test_managed_fields_are_not_kept(sim: Simulator, api: client.ApiClient) -> None:
    managed = [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1"}]
    core = client.CoreV1Api(api)
    await core.create_namespace({"metadata": {"name": "tidy", "managedFields": managed}})
    stored = await core.read_namespace("tidy", _preload_content=False)
    assert (await stored.json())["metadata"]["managedFields"] == managed
    view = ClusterView()
    async with running_feed(api, view, sleep=Sleeps()):
        namespace = view.get("Namespace", "", "tidy")
        assert namespace is not None and "managedFields" not in namespace["metadata"]


async def test_on_initial_page_runs_after_each_page_until_the_sync(
    sim: Simulator, api: client.ApiClient
) -> None:
    for name in ("n0", "n1", "n2", "n3"):
        await sim.add_node(name)
    names = ("n0", "n1", "n2", "n3", "node-a")  # pages: n0 n1 | n2 n3 | node-a
    seen: list[int] = []
    view = ClusterView()
    calls: list[dict[str, Any]] = []
    async with running_feed(
        api,
        view,
        resources=[recorded(NODES, calls)],
        page_size=2,
        sleep=Sleeps(),
        on_initial_page=lambda: seen.append(sum(1 for n in names if view.get("Node", "", n))),
    ) as feed:
        assert seen == [2, 4, 5]  # each page is in the view when the hook runs
        (informer,) = feed.informers
        informer.list_seconds = None
        sim.faults.gone(times=1, resource="nodes")
        sim.faults.drop_watches()
        await eventually(lambda: informer.list_seconds is not None, "the relist")
        assert len(calls) == 6 and seen == [2, 4, 5]  # a relist is not the initial load


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "discard"]),
            st.tuples(
                st.sampled_from(["Pod", "Node"]),
                st.sampled_from(["", "a", "b"]),
                st.text(max_size=2),
            ),
        )
    ),
    st.sets(
        st.tuples(st.sampled_from(["Pod", "Node"]), st.sampled_from(["", "a"]), st.text(max_size=2))
    ),
)
def test_object_keys_are_a_set_of_keys(
    steps: list[tuple[str, tuple[str, str, str]]], kept: set[tuple[str, str, str]]
) -> None:
    keys, expected = ObjectKeys(), set()
    for step, key in steps:
        getattr(keys, step)(key)
        getattr(expected, step)(key)
        assert (key in keys) == (key in expected)
    assert set(keys) == expected and len(keys) == len(expected)
    also = ObjectKeys()
    for key in kept:
        also.add(key)
    assert sorted(keys.retain(also)) == sorted(expected - kept)
    assert set(keys) == expected & kept


async def test_a_stream_of_events_is_told_as_contact_at_most_every_half_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class NoServer:
        """No request is made: the test hands the informer its events."""

    told: list[datetime] = []
    now = [1000.0]
    monkeypatch.setattr(informer_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    ticks = iter(range(10_000))
    informer = informer_module.Informer(
        WEBHOOK_RESOURCES[0],
        NoServer(),  # type: ignore[arg-type]
        ClusterView(),
        on_contact=lambda i: told.append(i.last_contact),
        clock=lambda: NOW + timedelta(seconds=next(ticks)),
    )
    namespace = {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "a"}}
    for version in range(100):
        informer._event(
            {
                "type": "MODIFIED",
                "object": {**namespace, "metadata": {"name": "a", "resourceVersion": str(version)}},
            }
        )
    assert len(told) == 1 and informer.resource_version == "99"
    now[0] += informer_module.EVENT_CONTACT_S
    informer._event({"type": "MODIFIED", "object": dict(namespace)})
    assert len(told) == 2 and told[1] > told[0]
