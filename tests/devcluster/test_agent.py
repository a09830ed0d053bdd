"""The node agent's watch loop: list, watch, relist after 410 Expired; node statuses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from devcluster import nodes
from devcluster.agent import NodeAgent
from devcluster.nodes import NodeShape

Obj = dict[str, Any]


def _pod(name: str, rv: str) -> Obj:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": rv}}


class FakeClient:
    """Two lists, with a watch between them that expires."""

    def __init__(self) -> None:
        self.lists = [
            {"metadata": {"resourceVersion": "10"}, "items": [_pod("a", "5"), _pod("b", "6")]},
            {"metadata": {"resourceVersion": "30"}, "items": [_pod("b", "25"), _pod("c", "28")]},
        ]
        self.watched: list[str] = []
        self.done = asyncio.Event()

    async def get(self, path: str) -> Obj:
        return self.lists.pop(0)

    async def watch(self, path: str, version: str) -> AsyncIterator[Obj]:
        self.watched.append(version)
        if version == "10":
            yield {"type": "MODIFIED", "object": _pod("a", "12")}
            yield {"type": "ERROR", "object": {"kind": "Status", "code": 410}}
        else:
            self.done.set()
            await asyncio.Event().wait()


async def test_an_expired_watch_relists_and_drops_what_is_gone() -> None:
    fake = FakeClient()
    agent = NodeAgent(fake, NodeShape(), 0)  # type: ignore[arg-type]
    store: dict[str, Obj] = {}
    seen: list[Obj | None] = []
    task = asyncio.create_task(agent._informer("/api/v1/pods", store, seen.append))
    await asyncio.wait_for(fake.done.wait(), 5)
    task.cancel()
    assert fake.watched == ["10", "30"]
    assert sorted(store) == ["uid-b", "uid-c"]
    assert store["uid-b"]["metadata"]["resourceVersion"] == "25"
    assert seen[0] is None and seen[1]["metadata"]["name"] == "a" and seen[2] is None


class RecordingClient:
    """Answers every write with what was sent, and records its path."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.written = asyncio.Event()

    async def request(self, method: str, path: str, body: Obj | None = None, **_: Any) -> Obj:
        self.writes.append(f"{method} {path}")
        self.written.set()
        return body or {}


async def test_listed_nodes_without_their_status_get_it() -> None:
    # node-1's status write at registration lost a race (409) and left it without one;
    # node-2 has the status its kubelet reports.
    client = RecordingClient()
    agent = NodeAgent(client, NodeShape(), 0)  # type: ignore[arg-type]
    bare = {**nodes.new_node("node-1"), "status": {}}
    bare["metadata"].update(uid="uid-1", resourceVersion="7")
    reported = nodes.new_node("node-2")
    reported["metadata"].update(uid="uid-2", resourceVersion="8")
    reported["status"] = nodes.desired_status(reported, NodeShape(), datetime.now(UTC), False)
    agent.nodes = {"uid-1": bare, "uid-2": reported}
    agent._node_changed(None)  # what a list (or relist) calls
    await asyncio.wait_for(client.written.wait(), 5)
    await asyncio.gather(*agent._tasks)
    assert client.writes == ["PUT /api/v1/nodes/node-1/status"]


def test_a_node_reports_ephemeral_storage_as_a_kubelet_does() -> None:
    """Without it the scheduler refuses any pod asking for ephemeral storage (an upstream
    resize spec's pod stayed Pending: Insufficient ephemeral-storage)."""
    status = nodes.desired_status(nodes.new_node("n"), NodeShape(), datetime.now(UTC), False)
    assert status["capacity"]["ephemeral-storage"] == "100Gi"
    assert status["allocatable"]["ephemeral-storage"] == "100Gi"
