"""Eviction (SPEC §7): the Eviction API with PDBs, one disruption at a time, never while
the webhook's Lease is stale; the replacement is sized at admission with the same values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from app.model.annotations import POD_INFO
from tests.integration.reconciler.harness import (
    Kerf,
    create,
    deployment,
    requests_of,
    running_kerf,
    static_policy,
    wait_for,
)

EVICT_ONLY = {"inPlaceResize": {"enabled": False}, "podEviction": {"enabled": True}}
TARGET = {"cpu": "250m", "memory": "256Mi"}


def pdb(min_available: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}},
    }


async def all_sized(kerf: Kerf, count: int = 2) -> list[dict[str, Any]] | None:
    pods = await kerf.pods("web")
    ok = len(pods) == count and all(requests_of(p) == TARGET for p in pods)
    return pods if ok else None


async def start(kerf: Kerf, replicas: int = 2) -> list[dict[str, Any]]:
    await client.AppsV1Api(kerf.api).create_namespaced_deployment(
        "shop", deployment("web", replicas=replicas)
    )
    await kerf.settle()
    return await kerf.pods("web")


async def evicted_events(kerf: Kerf, count: int) -> list[dict[str, Any]] | None:
    events = [e for e in await kerf.events() if e["reason"] == "Evicted"]
    return events if len(events) == count else None


def policy(**guardrails: Any) -> dict[str, Any]:
    return static_policy("web", "web", TARGET, guardrails={"cooldown": "0s", **guardrails})


async def test_pods_are_evicted_one_by_one_and_replaced_sized(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, strategy_spec=EVICT_ONLY) as kerf:
        before = await start(kerf)
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", policy())
        pods = await wait_for(kerf, lambda: all_sized(kerf), "both pods replaced, sized")
        assert not {p["metadata"]["uid"] for p in pods} & {p["metadata"]["uid"] for p in before}
        # Sized at admission by the webhook with the values the reconciler decided.
        assert all(POD_INFO in p["metadata"]["annotations"] for p in pods)
        # The reconciler records each eviction after the API answers it, so the last Event
        # may land just after the replacement is sized: wait for it rather than race it.
        await wait_for(kerf, lambda: evicted_events(kerf, 2), "an Evicted event per pod")
        metrics = replica.service.metrics
        assert metrics.evictions.labels("evicted")._value.get() == 2


async def test_a_pdb_refusal_is_retried_until_the_budget_allows(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, strategy_spec=EVICT_ONLY) as kerf:
        await start(kerf)
        await client.PolicyV1Api(kerf.api).create_namespaced_pod_disruption_budget("shop", pdb(2))
        await kerf.settle()
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", policy())
        metrics = replica.service.metrics

        async def refused_twice() -> bool:
            return metrics.evictions.labels("refused")._value.get() >= 2

        await wait_for(kerf, refused_twice, "the PDB to refuse evictions")
        assert [requests_of(p) for p in await kerf.pods("web")] == [
            {"cpu": "100m", "memory": "128Mi"}
        ] * 2
        await client.PolicyV1Api(kerf.api).patch_namespaced_pod_disruption_budget(
            "web", "shop", {"spec": {"minAvailable": 1}}
        )
        await wait_for(kerf, lambda: all_sized(kerf), "evictions once the PDB allows")


async def test_no_eviction_while_the_webhook_lease_is_stale(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, strategy_spec=EVICT_ONLY, webhook=False) as kerf:
        await start(kerf)
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", policy())

        async def held() -> dict[str, Any] | None:
            record = await kerf.recommendation("deployment-web")
            status = (record or {}).get("status") or {}
            return status if status.get("reason") == "WebhookUnavailable" else None

        status = await wait_for(kerf, held, "the eviction to be held")
        assert status["phase"] == "Blocked"
        assert replica.service.metrics.evictions.labels("evicted")._value.get() == 0
        assert len(await kerf.pods("web")) == 2
