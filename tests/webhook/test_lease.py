"""The webhook Lease against the kubesim API server."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from app.kube.lease import WEBHOOK_LEASE as LEASE_NAME
from app.model.apitime import micro_time
from kubesim.sim import Simulator
from kubesim.testing import running_sim
from webhook.lease import LeaseConflict, LeaseRenewer

T0 = datetime(2026, 11, 28, 10, 0, 0, 123456, tzinfo=UTC)


class Stop(Exception):
    """Ends a renewal loop from its injected sleep."""


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with running_sim(tmp_path) as simulator:
        await simulator.add_namespace("kerf-system")
        yield simulator


@pytest.fixture
async def api(sim: Simulator) -> AsyncIterator[client.ApiClient]:
    async with sim.api_client() as api_client:
        yield api_client


async def lease_spec(api: client.ApiClient) -> dict[str, Any]:
    raw = await client.CoordinationV1Api(api).read_namespaced_lease(
        LEASE_NAME, "kerf-system", _preload_content=False
    )
    return (await raw.json())["spec"]


def renewer(api: client.ApiClient, holder: str = "kerf-webhook-a", **options: Any) -> LeaseRenewer:
    return LeaseRenewer(api, "kerf-system", holder, clock=lambda: T0, **options)


async def test_creates_the_lease_when_missing(api: client.ApiClient) -> None:
    await renewer(api).renew()
    spec = await lease_spec(api)
    assert spec["holderIdentity"] == "kerf-webhook-a"
    assert spec["renewTime"] == "2026-11-28T10:00:00.123456Z"
    assert spec["leaseDurationSeconds"] == 30


async def test_each_replica_renews_the_same_lease(api: client.ApiClient) -> None:
    await renewer(api).renew()
    later = T0 + timedelta(seconds=10)
    await LeaseRenewer(api, "kerf-system", "kerf-webhook-b", clock=lambda: later).renew()
    spec = await lease_spec(api)
    assert (spec["holderIdentity"], spec["renewTime"]) == ("kerf-webhook-b", micro_time(later))


async def test_a_conflict_rereads_and_retries(sim: Simulator, api: client.ApiClient) -> None:
    await renewer(api).renew()
    sim.faults.conflict(times=2, resource="leases")
    await renewer(api, holder="kerf-webhook-b").renew()
    assert (await lease_spec(api))["holderIdentity"] == "kerf-webhook-b"


async def test_a_create_race_lost_updates_the_winners_lease(
    sim: Simulator, api: client.ApiClient
) -> None:
    sim.faults.conflict(times=1, resource="leases", verbs={"create"})
    await renewer(api).renew()
    assert (await lease_spec(api))["holderIdentity"] == "kerf-webhook-a"


async def test_endless_conflicts_give_up_with_a_clear_error(
    sim: Simulator, api: client.ApiClient
) -> None:
    await renewer(api).renew()
    sim.faults.conflict(times=100, resource="leases")
    with pytest.raises(LeaseConflict, match="kerf-system/kerf-webhook"):
        await renewer(api).renew()


async def test_run_renews_every_interval_only_while_ready(
    sim: Simulator, api: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    ready = False
    ticks: list[float] = []
    times = iter(T0 + timedelta(seconds=s) for s in range(0, 100, 10))

    async def sleep(seconds: float) -> None:
        nonlocal ready
        ticks.append(seconds)
        if len(ticks) == 1:  # not ready on the first tick: nothing written
            assert await sim_has_no_lease(api)
            ready = True
        elif len(ticks) == 2:
            assert (await lease_spec(api))["renewTime"] == micro_time(T0)
            sim.faults.error_rate(1.0, resource="leases")  # a failing renewal is logged
        else:
            raise Stop

    loop = LeaseRenewer(
        api,
        "kerf-system",
        "kerf-webhook-a",
        interval_s=2.5,
        ready=lambda: ready,
        clock=lambda: next(times),
        sleep=sleep,
    )
    with caplog.at_level(logging.WARNING, logger="kerf.webhook.lease"), pytest.raises(Stop):
        await loop.run()
    assert ticks == [1.0, 2.5, 2.5]  # not ready: checked again sooner
    assert any(
        "renewing Lease kerf-system/kerf-webhook failed" in r.getMessage() for r in caplog.records
    )


async def sim_has_no_lease(api: client.ApiClient) -> bool:
    leases = await client.CoordinationV1Api(api).list_namespaced_lease("kerf-system")
    return not leases.items
