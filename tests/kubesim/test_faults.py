"""Fault injection: errors, slowness, forced 409/410, dropped watches."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.faults import FaultRule, WatchLag


async def test_error_rate_answers_500(sim, core: client.CoreV1Api) -> None:
    rule = sim.faults.error_rate(1.0, verbs={"list"}, resource="configmaps")
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_config_map("default")
    assert err.value.status == 500
    assert json.loads(err.value.body)["reason"] == "InternalError"
    await core.list_namespaced_pod("default")
    sim.faults.remove(rule)
    await core.list_namespaced_config_map("default")


async def test_partial_error_rate_is_seeded(sim, core: client.CoreV1Api) -> None:
    sim.faults.error_rate(0.5, verbs={"get"})
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    failures = 0
    for _ in range(40):
        try:
            await core.read_namespaced_config_map("c", "default")
        except ApiException as exc:
            assert exc.status == 500
            failures += 1
    assert 5 < failures < 35


async def test_forced_conflict_then_success(sim, core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    sim.faults.conflict(times=1, resource="configmaps")
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_config_map("c", "default", {"data": {"a": "1"}})
    assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "Conflict"
    assert (await core.patch_namespaced_config_map("c", "default", {"data": {"a": "1"}})).data == {
        "a": "1"
    }


async def test_forced_gone_on_watch(sim, core: client.CoreV1Api) -> None:
    sim.faults.gone(times=1)
    rv = (await core.list_namespaced_config_map("default")).metadata.resource_version
    with pytest.raises(ApiException) as err:
        async for _ in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=5
        ):
            pass
    assert err.value.status == 410


async def test_too_many_requests_carries_retry_after(sim, core: client.CoreV1Api) -> None:
    sim.faults.add(FaultRule(status=429, times=1))
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_pod("default")
    assert err.value.status == 429 and err.value.headers["Retry-After"] == "1"


async def test_slow_answers(sim, api: client.ApiClient, core: client.CoreV1Api) -> None:
    sim.faults.slow(0.5, verbs={"list"}, times=1)
    with pytest.raises(asyncio.TimeoutError):
        await core.list_namespaced_pod("default", _request_timeout=0.1)
    await core.list_namespaced_pod("default", _request_timeout=5)


async def test_dropped_watch_ends_stream(sim, core: client.CoreV1Api) -> None:
    events: list[str] = []

    async def consume() -> None:
        async for event in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version="0", timeout_seconds=30
        ):
            events.append(event["type"])

    task = asyncio.create_task(consume())
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    while not events:
        await asyncio.sleep(0.01)
    assert sim.faults.drop_watches() == 1
    await asyncio.wait_for(task, 5)
    assert events == ["ADDED"]


async def test_after_commit_fault_applies_the_write_and_loses_the_answer(
    sim, core: client.CoreV1Api
) -> None:
    sim.faults.after_commit(1.0, status=504, verbs={"create"}, resource="configmaps")
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    assert err.value.status == 504 and json.loads(err.value.body)["reason"] == "Timeout"
    assert (await core.read_namespaced_config_map("c", "default")).metadata.name == "c"
    with pytest.raises(ApiException) as again:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    assert again.value.status == 409  # the retry finds what the lost answer created


async def test_after_commit_rules_do_not_act_before_the_write(sim, core: client.CoreV1Api) -> None:
    sim.faults.after_commit(1.0, status=500, verbs={"patch"})
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    with pytest.raises(ApiException):
        await core.patch_namespaced_config_map("c", "default", {"data": {"a": "1"}})
    assert (await core.read_namespaced_config_map("c", "default")).data == {"a": "1"}


async def test_write_log_names_the_client_and_the_lease_holders(sim) -> None:
    sim.writes.enabled = True
    # The kubeconfig's user sends its token, the client identity the log records.
    api = await config.new_client_from_config(config_file=str(sim.kubeconfig_path))
    async with api:
        leases = client.CoordinationV1Api(api)
        lease = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "replica-a"}}
        await leases.create_namespaced_lease("default", lease)
        sim.faults.after_commit(1.0, verbs={"create"}, resource="configmaps")
        with pytest.raises(ApiException):
            await client.CoreV1Api(api).create_namespaced_config_map(
                "default", {"metadata": {"generateName": "c-"}}
            )
        await client.CoreV1Api(api).list_namespaced_config_map("default")
    created_lease, created_map = sim.writes.entries
    assert (created_lease.resource, created_lease.user) == ("leases", "kubesim")
    assert created_lease.lease_holders == {"default/l": "replica-a"}
    assert created_map.name.startswith("c-") and created_map.answer_lost
    assert (created_map.verb, created_map.status, created_map.seq) == ("create", 201, 1)


async def test_write_log_is_off_by_default(sim, core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    assert sim.writes.entries == []


async def test_an_answer_lost_after_the_commit(sim, core: client.CoreV1Api) -> None:
    sim.faults.after_commit(times=1, resource="configmaps")
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    assert err.value.status == 500
    # The write went in all the same: a retry meets the object it made.
    assert (await core.read_namespaced_config_map("c", "default")).metadata.name == "c"
    with pytest.raises(ApiException) as again:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    assert again.value.status == 409


async def test_a_held_answer_comes_once_released_and_the_write_is_in_before(
    sim, core: client.CoreV1Api
) -> None:
    release = sim.faults.hold_answers(verbs={"create"}, resource="configmaps")
    created = asyncio.create_task(
        core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    )
    # Stored while its client still waits for the answer.
    while sim.store.get(("", "configmaps"), "default", "c") is None:
        await asyncio.sleep(0.01)
    assert not created.done()
    release.set()
    assert (await created).metadata.name == "c"
    # Only the next matching write was held.
    await core.create_namespaced_config_map("default", {"metadata": {"name": "d"}})


async def test_watches_lag_from_a_write_whose_answer_was_lost(sim, core: client.CoreV1Api) -> None:
    # What each watch received, and in which phase of the test it arrived.
    phase = 0
    seen: dict[str, list[tuple[int, str, str]]] = {"configmaps": [], "secrets": []}

    async def consume(plural: str, lister: Any) -> None:
        async for event in watch.Watch().stream(
            lister, "default", resource_version=rv, timeout_seconds=30
        ):
            seen[plural].append((phase, event["type"], event["object"].metadata.name))

    async def until(check: Any) -> None:
        while not check():
            await asyncio.sleep(0.01)

    rv = (await core.list_namespaced_config_map("default")).metadata.resource_version
    tasks = [
        asyncio.create_task(consume("configmaps", core.list_namespaced_config_map)),
        asyncio.create_task(consume("secrets", core.list_namespaced_secret)),
    ]
    await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    await until(lambda: seen["configmaps"])
    lag = sim.faults.lose_answer_and_lag_watches("configmaps", verbs={"patch"})
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    assert err.value.status == 504 and lag.started
    # The write is in; a read sees it, the watch does not yet.
    assert (await core.read_namespaced_config_map("a", "default")).data == {"k": "v"}
    await core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    # Other resources' watches are not held back.
    await core.create_namespaced_secret("default", {"metadata": {"name": "s"}})
    await until(lambda: seen["secrets"])
    phase = 1
    lag.let_through(lag.first or 0)
    await until(lambda: len(seen["configmaps"]) >= 2)
    phase = 2
    lag.release()
    await until(lambda: len(seen["configmaps"]) >= 3)
    for task in tasks:
        task.cancel()
    assert seen["configmaps"] == [(0, "ADDED", "a"), (1, "MODIFIED", "a"), (2, "ADDED", "b")]
    assert seen["secrets"] == [(0, "ADDED", "s")]


async def test_removing_a_lagging_rule_lets_the_watches_catch_up(
    sim, core: client.CoreV1Api
) -> None:
    rule = sim.faults.add(
        FaultRule(
            status=504,
            times=1,
            verbs=frozenset({"create"}),
            resource="configmaps",
            after_commit=True,
            lag=WatchLag("configmaps"),
        )
    )
    rv = (await core.list_namespaced_config_map("default")).metadata.resource_version
    seen: list[str] = []

    async def consume() -> None:
        async for event in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=30
        ):
            seen.append(event["object"].metadata.name)

    task = asyncio.create_task(consume())
    with pytest.raises(ApiException):
        await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    await core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    assert rule.lag is not None and rule.lag.started and not seen
    sim.faults.remove(rule)
    while len(seen) < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    assert seen == ["a", "b"] and sim.faults.lags == []
