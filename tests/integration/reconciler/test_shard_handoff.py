"""A bucket handed from one sharded replica to another in the middle of a rollout (issue
37): the one that gains it works its workloads only once its view holds them whole, so
an eviction recorded by the previous holder and never carried out is dropped untold, not
told as done because the workload was seen before its pods (the sharded soak, seed 12)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from app.kube.leadertimings import LeaderTimings
from kubesim.faults import FaultRule
from tests.integration.reconciler.harness import (
    FAST,
    RunningReconciler,
    create,
    running_kerf,
    status_of,
    wait_for,
)
from tests.integration.reconciler.test_eviction_events import (
    EVICT_ONLY,
    finish,
    held_eviction_refusal,
    kerf_events,
    policy,
    start_web,
)

SHARDED = replace(FAST, shards=8, leader=LeaderTimings.scaled(4.0))


async def test_a_gained_bucket_is_worked_once_its_pods_are_listed(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, strategy_spec=EVICT_ONLY) as kerf:
        before = await start_web(kerf)
        # The first holder records an eviction and asks for it; the request is refused
        # before it is carried out, and the answer waits until the replica is dead.
        release, rule = held_eviction_refusal(kerf)
        first = await kerf.start_reconciler(SHARDED, identity="first")
        await create(kerf, "staticpolicies", policy())

        async def refused() -> dict[str, Any] | None:
            intent = (await status_of(kerf)).get("pendingEviction")
            return intent if intent and rule.times == 0 else None

        intent = await wait_for(kerf, refused, "an eviction recorded, then asked for")
        await first.kill()  # its bucket Leases expire, unreleased
        # and its workers take nothing more (a dead process retries nothing)
        first.service.queue.close()
        release.set()
        # The next holder's pods come late to every list: a relist brings the workload
        # and its record first.
        slow = kerf.sim.faults.add(
            FaultRule(status=0, delay=2.0, verbs=frozenset({"list"}), resource="pods")
        )
        second = await kerf.start_reconciler(SHARDED, identity="second")
        await wait_for(kerf, _listed(second), "the buckets taken over and listed")
        kerf.sim.faults.remove(slow)
        await finish(kerf, second, ["Evicted", "Evicted"])
        names = {e["metadata"]["name"] for e in await kerf_events(kerf)}
        assert intent["events"][0]["name"] not in names  # that eviction is not told
        assert intent["podUid"] in {p["metadata"]["uid"] for p in before}


def _listed(replica: RunningReconciler) -> Any:
    """A check: the replica's view holds every bucket it holds whole."""

    async def check() -> bool:
        service = replica.service
        assert service.shards is not None and service.view.shard_filter is not None
        listed = service.view.shard_filter.listed
        return bool(listed) and listed == service.shards.held()

    return check
