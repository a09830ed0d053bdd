"""A sharded view keeps its buckets' per-workload objects and every cluster-wide one, and
counts what other buckets' pods take from a node."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.kube import informer as informer_module
from app.kube.informer import WEBHOOK_RESOURCES, kerf_resources
from app.kube.shardleases import Weighing
from app.kube.shardview import ShardedFeed, ShardedView, ShardFilter
from app.model.crd import API_VERSION
from app.model.owners import WorkloadRef
from app.model.shards import bucket_of
from app.store.allocatable import node_allocatable
from tests.app import builders as b

BUCKETS = 4


def namespaces() -> tuple[str, str]:
    """Two namespaces of different buckets."""
    assert bucket_of("mail", BUCKETS) != bucket_of("payments", BUCKETS)
    return "mail", "payments"


def pod(namespace: str, name: str, cpu: str = "500m") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Running"},
    }


def node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}},
    }


def test_only_the_held_buckets_are_kept_but_every_pod_counts_on_its_node() -> None:
    mine, theirs = namespaces()
    shard_filter = ShardFilter(BUCKETS, {bucket_of(mine, BUCKETS)})
    view = ShardedView(shard_filter=shard_filter)
    view.apply(node())
    view.apply(pod(mine, "a"))
    view.apply(pod(theirs, "b", cpu="250m"))
    assert [p["metadata"]["namespace"] for p in view.pods()] == [mine]
    assert node_allocatable(view, "n1") is not None
    assert view.node_requests("n1")[0] == 750
    # the other bucket's pod changes and goes: its share of the node follows
    view.apply(pod(theirs, "b", cpu="100m"))
    assert view.node_requests("n1")[0] == 600
    view.delete("Pod", theirs, "b")
    assert view.node_requests("n1")[0] == 500


def test_a_lost_buckets_objects_are_dropped_as_they_come_through() -> None:
    mine, theirs = namespaces()
    shard_filter = ShardFilter(BUCKETS, {bucket_of(mine, BUCKETS), bucket_of(theirs, BUCKETS)})
    view = ShardedView(shard_filter=shard_filter)
    view.apply(pod(mine, "a"))
    view.apply(pod(theirs, "b"))
    assert len(list(view.pods())) == 2
    shard_filter.held = frozenset({bucket_of(mine, BUCKETS)})
    view.apply(pod(theirs, "b"))  # as a relist brings it
    assert [p["metadata"]["namespace"] for p in view.pods()] == [mine]
    assert view.node_requests("n1")[0] == 1000


def test_without_a_filter_everything_is_kept() -> None:
    mine, theirs = namespaces()
    view = ShardedView()
    view.apply(pod(mine, "a"))
    view.apply(pod(theirs, "b"))
    assert len(list(view.pods())) == 2
    assert view.node_requests("n1")[0] == 1000


def test_a_sharded_feed_drops_other_buckets_records_before_parsing_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class NoServer:
        """No request is made: the test hands the informer its objects."""

    parsed: list[str] = []
    parse = informer_module.record_from_api

    def counting(raw: Any, metadata: Any, source: Any) -> Any:
        parsed.append(raw["metadata"]["namespace"])
        return parse(raw, metadata, source)

    monkeypatch.setattr(informer_module, "record_from_api", counting)
    mine, theirs = namespaces()
    view = ShardedView(shard_filter=ShardFilter(BUCKETS, [bucket_of(mine, BUCKETS)]))
    feed = ShardedFeed(NoServer(), view, kerf_resources(["RightsizingRecommendation"]))
    refs = [WorkloadRef("Deployment", ns, "web") for ns in (mine, theirs)]
    for ref in refs:
        feed.informers[0]._upsert(
            {
                "apiVersion": API_VERSION,
                "kind": "RightsizingRecommendation",
                "metadata": {"name": f"deployment-{ref.name}", "namespace": ref.namespace},
                "spec": {
                    "targetRef": {"apiVersion": "apps/v1", "kind": ref.kind, "name": ref.name}
                },
            }
        )
    assert parsed == [mine]
    assert view.recommendations("record", refs[0]) is not None
    assert view.recommendations("record", refs[1]) is None


@pytest.mark.parametrize("sharded", [True, False])
def test_every_namespace_name_is_kept_for_the_bucket_weights(sharded: bool) -> None:
    mine, theirs = namespaces()
    shard_filter = ShardFilter(BUCKETS, {bucket_of(mine, BUCKETS)}) if sharded else None
    view = ShardedView(shard_filter=shard_filter)
    for name in (mine, theirs):
        view.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert sorted(view.namespace_names()) == [mine, theirs]
    view.delete("Namespace", "", theirs)
    assert view.namespace_names() == [mine]


class Answer:
    """One answer of a fake API server: a list's body, or a watch that sends nothing."""

    def __init__(self, status: int, body: bytes = b"") -> None:
        self.status = status
        self._body = body
        self.content = self

    async def read(self) -> bytes:
        return self._body

    async def iter_any(self) -> AsyncIterator[bytes]:
        await asyncio.Event().wait()
        yield b""

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize("status", [200, 403])
async def test_the_namespaces_are_listed_before_the_rest_for_the_first_claims(
    status: int,
) -> None:
    """`weigh` lists and watches the Namespaces alone, before `run`, which goes on with
    them and starts the rest; a refused list says the weights will not come."""

    class NoServer:
        """The informers' requests are answered below."""

    calls: list[str] = []

    def answering(kind: str) -> Any:
        async def call(**kwargs: Any) -> Answer:
            calls.append(kind)
            if kwargs.get("watch"):
                return Answer(200)
            if kind != "Namespace":
                return Answer(200, b'{"items": [], "metadata": {"resourceVersion": "1"}}')
            if status != 200:
                return Answer(status, b'{"kind": "Status", "code": 403, "message": "forbidden"}')
            items = [{"metadata": {"name": name}} for name in namespaces()]
            return Answer(
                200, json.dumps({"items": items, "metadata": {"resourceVersion": "1"}}).encode()
            )

        return call

    view = ShardedView(shard_filter=ShardFilter(BUCKETS))
    resources = [r for r in WEBHOOK_RESOURCES if r.kind in ("Namespace", "Pod")]
    feed = ShardedFeed(NoServer(), view, resources)
    for informer in feed.informers:
        informer._call = answering(informer.resource.kind)
    assert feed.weighing() is Weighing.PENDING
    weigher = feed.weigh()
    assert weigher is not None and feed.weigh() is weigher
    want = Weighing.LISTED if status == 200 else Weighing.UNAVAILABLE
    for _ in range(100):
        if feed.weighing() is want:
            break
        await asyncio.sleep(0.01)
    assert feed.weighing() is want
    assert set(calls) == {"Namespace"}  # nothing per-workload before the claims
    if status == 200:
        assert sorted(view.namespace_names()) == sorted(namespaces())
    runner = asyncio.create_task(feed.run())
    for _ in range(100):
        if "Pod" in calls:
            break
        await asyncio.sleep(0.01)
    assert "Pod" in calls
    if status == 200:  # listed and watching: not started again (a list, a watch)
        await asyncio.sleep(0.05)
        assert calls.count("Namespace") == 2
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)
    assert weigher.cancelled()
    assert ShardedFeed(NoServer(), view, resources[1:]).weighing() is Weighing.UNAVAILABLE


def recommendations(*namespaces: str) -> dict[str, Any]:
    """A recommendation ConfigMap, with a row for a workload `web` in each namespace."""
    return b.configmap(*(b.row(namespace=ns) for ns in namespaces), namespace="kerf-system")


def test_a_replica_keeps_the_rows_of_its_buckets_and_takes_a_gained_buckets_with_the_relist() -> (
    None
):
    mine, theirs = namespaces()
    shard_filter = ShardFilter(BUCKETS, {bucket_of(mine, BUCKETS)})
    view = ShardedView(shard_filter=shard_filter)
    view.apply(recommendations(mine, theirs))

    def rows(namespace: str) -> list[str]:
        return sorted(view.recommendations("rows", WorkloadRef("Deployment", namespace, "web")))

    assert (rows(mine), rows(theirs)) == (["app"], [])
    # every row still counts in what the ConfigMap yielded (GlobalConfiguration's status)
    assert [s.counted for s in view.recommendations("sources")] == [2]
    shard_filter.held = frozenset({bucket_of(theirs, BUCKETS)})
    view.apply(recommendations(mine, theirs))  # as the relist brings it
    assert (rows(mine), rows(theirs)) == ([], ["app"])
