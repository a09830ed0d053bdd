"""Unbounded policy quantities on a cluster: a zero limit is refused by the API server, a
value no node can hold blocks the workload `Infeasible` (never resized) with one Warning
Event on the policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.cluster import GROUP, VERSION, custom
from tests.integration.reconciler.harness import (
    Kerf,
    create,
    deployment,
    resync,
    running_kerf,
    static_policy,
    status_of,
    wait_for,
)


async def policy_events(kerf: Kerf) -> list[dict[str, Any]]:
    return [e for e in await kerf.events() if e["regarding"].get("kind") == "StaticPolicy"]


@pytest.mark.parametrize("memory", [0, "0"])
async def test_a_zero_memory_limit_is_refused_by_the_api_server(
    tmp_path: Path, memory: Any
) -> None:
    async with running_kerf(tmp_path, webhook=False) as kerf:
        body = static_policy("zero", "web", {"cpu": "100m"}, limits={"memory": memory})
        with pytest.raises(client.ApiException) as caught:
            await custom(kerf.api).create_namespaced_custom_object(
                GROUP, VERSION, "shop", "staticpolicies", body
            )
        assert caught.value.status == 422
        assert "spec.resources.containers.app.limits.memory" in caught.value.body


async def test_a_value_no_node_can_hold_is_infeasible_and_told_on_the_policy(
    tmp_path: Path,
) -> None:
    async with running_kerf(tmp_path) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=2)
        )
        await kerf.settle()
        replica = await kerf.start_reconciler()
        # A CPU request (the pods have no CPU limit to set: setFromUnspecified is off).
        body = static_policy("huge", "web", {"cpu": 200000}, limits={"memory": "9999Ei"})  # type: ignore[dict-item]
        await create(kerf, "staticpolicies", body)

        async def blocked() -> dict[str, Any] | None:
            status = await status_of(kerf)
            return status if status.get("reason") == "Infeasible" else None

        status = await wait_for(kerf, blocked, "web blocked Infeasible")
        condition = next(c for c in status["conditions"] if c["type"] == "Blocked")
        assert "app.limits.memory 9999Ei, app.requests.cpu 200000 is more" in condition["message"]
        assert "the largest: cpu 4, memory 8Gi" in condition["message"]

        async def told() -> list[dict[str, Any]]:
            return await policy_events(kerf)

        (event,) = await wait_for(kerf, told, "an Event on StaticPolicy huge")
        assert (event["type"], event["reason"]) == ("Warning", "Infeasible")
        assert event["regarding"]["name"] == "huge"
        assert "app.limits.memory 9999Ei, app.requests.cpu 200000 is more" in event["note"]
        for _ in range(2):
            await resync(kerf, replica)
            await replica.service.write_input_reports()
        assert len(await policy_events(kerf)) == 1
        for pod in await kerf.pods("web"):
            resources = pod["spec"]["containers"][0]["resources"]
            assert resources == {"requests": {"cpu": "100m", "memory": "128Mi"}}
