"""kubesim's log of the writes it received, by token (what a test of who wrote counts)."""

from __future__ import annotations

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException


async def test_writes_are_logged_in_order_with_their_token(sim, core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", {"metadata": {"name": "before"}})
    assert sim.http.requests.writes == []  # off until enabled
    sim.http.requests.enable()
    sim.faults.error_rate(1.0, verbs={"patch"}, resource="configmaps")
    async with aiohttp.ClientSession() as http:
        answer = await http.post(
            f"{sim.url}/api/v1/namespaces/default/configmaps",
            json={"metadata": {"name": "c"}},
            headers={"Authorization": "Bearer replica-a"},
        )
        assert answer.status == 201
    await core.read_namespaced_config_map("c", "default")  # a read is not logged
    with pytest.raises(ApiException):
        await core.patch_namespaced_config_map("c", "default", {"data": {"k": "v"}})
    logged = [(w.seq, w.token, w.verb, w.name) for w in sim.http.requests.writes]
    # The refused patch counts: it was received.
    assert logged == [(0, "replica-a", "create", ""), (1, "", "patch", "c")]
