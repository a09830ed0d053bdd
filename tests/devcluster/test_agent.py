"""The node agent's watch loop: list, watch, relist after 410 Expired."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

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
