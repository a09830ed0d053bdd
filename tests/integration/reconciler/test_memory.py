"""The reconciler's memory of a workload is one record, made by its first pass and
dropped when the workload is deleted: nothing of a deleted workload is left behind (the
pods it resized, the versions it wrote, its quiet pass and the objects that pass read)."""

from __future__ import annotations

from pathlib import Path

from kubernetes_asyncio import client

from tests.integration.reconciler.harness import (
    create,
    deployment,
    idle,
    requests_of,
    running_kerf,
    static_policy,
    status_of,
    wait_for,
)

TARGET = {"cpu": "250m", "memory": "256Mi"}


async def test_deleted_workloads_leave_nothing_in_the_reconcilers_memory(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        apps = client.AppsV1Api(kerf.api)
        for name in ("web", "api"):
            await apps.create_namespaced_deployment("shop", deployment(name, replicas=2))
        await kerf.settle()
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))
        memory = replica.service.reconciler.memory

        async def converged() -> bool:
            pods = await kerf.pods("web")
            resized = len(pods) == 2 and all(requests_of(p) == TARGET for p in pods)
            return resized and (await status_of(kerf)).get("phase") == "Applied"

        await wait_for(kerf, converged, "web resized and Applied")
        await wait_for(kerf, idle(replica), "the reconciler to settle")
        assert set(memory) == {("Deployment", "shop", "web"), ("Deployment", "shop", "api")}

        for name in ("web", "api"):
            await apps.delete_namespaced_deployment(name, "shop")

        async def forgotten() -> bool:
            return len(memory) == 0 and replica.service.queue.idle

        await wait_for(kerf, forgotten, "both workloads forgotten")
