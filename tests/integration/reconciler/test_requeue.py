"""A workload whose pass wrote nothing is looked at again when its decisions can change
(their `Horizon`), not a `steady_horizon` later: kerf on kubesim, on its fake clock."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from app.model.annotations import PAUSE_UNTIL
from app.model.owners import WorkloadRef
from kubesim.clock import rfc3339
from tests.integration.reconciler.harness import (
    create,
    deployment,
    quiet,
    requests_of,
    running_kerf,
    static_policy,
    status_of,
    wait_for,
)

TARGET = {"cpu": "250m", "memory": "256Mi"}


async def test_a_pause_that_runs_out_is_acted_on_at_its_end(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        until = kerf.sim.clock.now() + timedelta(minutes=2)
        body = deployment("web", replicas=1)
        body["metadata"]["annotations"] = {PAUSE_UNTIL: rfc3339(until)}
        await client.AppsV1Api(kerf.api).create_namespaced_deployment("shop", body)
        await kerf.settle()
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))

        async def paused() -> bool:
            return (await status_of(kerf)).get("reason") == "Paused"

        await wait_for(kerf, paused, "the status to say Paused")
        await quiet(kerf, replica)
        # The quiet pass asked to look again when the pause ends (in two minutes of the
        # reconciler's clock), long before the ten-minute steady horizon.
        queue = replica.service.queue
        assert queue.scheduled_within(timedelta(minutes=2, seconds=1).total_seconds()) == 1
        assert queue.scheduled_within(timedelta(minutes=1).total_seconds()) == 0

        await kerf.sim.advance(timedelta(minutes=2).total_seconds())
        # What that timer does when it fires (the queue runs on the event loop's clock,
        # not on the simulator's): the workload comes back, and the pause has run out.
        queue.add(WorkloadRef("Deployment", "shop", "web"))

        async def resized() -> list[dict[str, Any]] | None:
            pods = await kerf.pods("web")
            return pods if pods and all(requests_of(p) == TARGET for p in pods) else None

        await wait_for(kerf, resized, "the pod resized once the pause ran out")
