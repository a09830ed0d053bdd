"""Sharded reconcilers on kubesim (issue 37 part 1): three replicas split the buckets,
each keeps only its buckets' workloads, and every write for a workload is sent by the
holder of its namespace's bucket Lease at that moment (the simulator's write log names
the writer by its token and every Lease holder just after each write); with `--shards 1`
one replica leads on today's Lease, as before sharding. Member Leases do not pile up,
replicas of two bucket counts never both claim, and a ClusterRollbackPolicy's counters
count the workloads of every replica's buckets."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
from kubernetes_asyncio import client

from app.kube.leadertimings import LeaderTimings
from app.model.annotations import ROLLBACK_STATE
from app.model.owners import WorkloadRef
from app.model.shards import (
    BUCKETS_LABEL,
    MEMBER,
    at_rest,
    bucket_lease_name,
    bucket_of,
    bucket_weights,
    member_lease_name,
    shard_labels,
)
from app.store.allocatable import node_allocatable
from reconciler.main import Options, build_service
from reconciler.policystatus import ROLLBACK_COUNTS, decode_counts
from reconciler.service import run_cluster
from tests.app import builders as b
from tests.cluster import GROUP, VERSION, custom, eventually, strategy
from tests.integration.reconciler.harness import (
    FAST,
    LEASES,
    Kerf,
    create,
    deployment,
    requests_of,
    running_kerf,
    static_policy,
    wait_for,
)

BUCKETS = 8
#: Longer Leases than FAST's 2 s: a sharded replica renews several Leases a round, and on
#: a loaded machine a 1.3 s renew deadline is missed, which is safe but churns buckets.
SHARDED = replace(FAST, shards=BUCKETS, leader=LeaderTimings.scaled(6.0))
#: in five of the eight buckets (names alike, such as team-0 ... team-5, share the high
#: bits of FNV-1a and so one bucket)
NAMESPACES = ["payments", "search", "billing", "mail", "cart", "ads"]
WANTED = {"cpu": "250m", "memory": "256Mi"}


@contextlib.asynccontextmanager
async def replica(
    kerf: Kerf, identity: str, options: Options
) -> AsyncIterator[tuple[Any, asyncio.Event, asyncio.Task[int]]]:
    """One reconciler replica on an API client of its own, whose token names it in the
    simulator's write log."""
    configuration = client.Configuration()
    configuration.host = kerf.sim.url
    # the key kerf's raw requests (app/kube/transport.py) authenticate with
    configuration.api_key = {"BearerToken": identity}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    async with client.ApiClient(configuration) as api:
        feed, service = build_service(
            api, options, namespace="kerf-system", identity=identity, clock=kerf.sim.clock.now
        )
        stop = asyncio.Event()
        task = asyncio.create_task(run_cluster(feed, service, stop=stop))
        try:
            yield service, stop, task
        finally:
            stop.set()
            await asyncio.wait_for(task, 20)


async def workloads(kerf: Kerf) -> None:
    apps = client.AppsV1Api(kerf.api)
    for namespace in NAMESPACES:
        await kerf.sim.add_namespace(namespace)
        await custom(kerf.api).create_namespaced_custom_object(
            GROUP, VERSION, namespace, "automationstrategies", strategy("default", namespace)
        )
        await apps.create_namespaced_deployment(namespace, deployment("web", namespace=namespace))
    await kerf.settle()
    for namespace in NAMESPACES:
        await create(
            kerf,
            "staticpolicies",
            static_policy("web", "web", WANTED, namespace=namespace),
            namespace=namespace,
        )


async def resized(kerf: Kerf) -> bool:
    for namespace in NAMESPACES:
        pods = await kerf.pods("web", namespace)
        statuses = [(p["status"].get("containerStatuses") or [{}])[0] for p in pods]
        running = [(s.get("resources") or {}).get("requests") for s in statuses]
        if len(pods) != 2 or running != [WANTED, WANTED]:
            return False
        if any(requests_of(p) != WANTED for p in pods):
            return False
    return True


async def test_replicas_split_the_buckets_and_write_only_for_their_own(tmp_path: Path) -> None:
    options = SHARDED
    async with running_kerf(tmp_path) as kerf:
        await workloads(kerf)
        kerf.sim.writes.enabled = True
        async with contextlib.AsyncExitStack() as stack:
            services = [
                (await stack.enter_async_context(replica(kerf, f"r{i}", options)))[0]
                for i in range(3)
            ]

            def split() -> bool:
                held = [s.shards.held() for s in services]
                return sum(map(len, held)) == BUCKETS and frozenset().union(*held) == set(
                    range(BUCKETS)
                )

            await eventually(split, "the buckets split between the replicas", 60)
            await wait_for(kerf, lambda: resized(kerf), "every namespace's pods resized", 120)
            held = [s.shards.held() for s in services]
            assert all(held), held  # each replica works some buckets (3 x ⌈8/3⌉ >= 8)
            assert all(len(h) <= 3 for h in held), held
            for service, mine in zip(services, held, strict=True):
                # its view keeps only its buckets' pods and workloads, and every node
                pods = {p["metadata"]["namespace"] for p in service.view.pods()}
                assert all(bucket_of(ns, BUCKETS) in mine for ns in pods), (pods, mine)
                kept = {w.namespace for w in service.view.workloads()}
                assert kept == {ns for ns in NAMESPACES if bucket_of(ns, BUCKETS) in mine}
                assert node_allocatable(service.view, "node-a") is not None
            # bucket 00's holder is the one that writes for the whole cluster
            assert [s.leading for s in services].count(True) == 1
        by_writer: dict[str, set[str]] = {}
        for write in kerf.sim.writes.entries:
            if write.resource == "leases" or write.namespace not in NAMESPACES:
                continue
            lease = "kerf-system/" + bucket_lease_name(
                "reconciler", bucket_of(write.namespace, BUCKETS), BUCKETS
            )
            assert write.lease_holders.get(lease) == write.user, write
            by_writer.setdefault(write.user, set()).add(write.namespace)
        assert set().union(*by_writer.values()) == set(NAMESPACES)
        assert len(by_writer) >= 2  # five buckets, at most three a replica
        leases = {
            lease["metadata"]["name"]: lease
            for lease in kerf.sim.store.iter(LEASES)
            if lease["metadata"]["name"].startswith("kerf-reconciler")
        }
        assert "kerf-reconciler" not in leases
        assert leases["kerf-reconciler-bucket-07"]["metadata"]["labels"] == {
            "kerf.dev/shard-set": "reconciler",
            "kerf.dev/shard-role": "bucket",
            "kerf.dev/shard-buckets": str(BUCKETS),
        }
        # shut down gracefully: every bucket Lease released, every member Lease deleted
        assert set(leases) == {bucket_lease_name("reconciler", b, BUCKETS) for b in range(BUCKETS)}
        assert all(not lease["spec"].get("holderIdentity") for lease in leases.values())


async def test_one_shard_is_todays_single_leader(tmp_path: Path) -> None:
    options = replace(FAST, shards=1)
    async with running_kerf(tmp_path) as kerf:
        await workloads(kerf)
        kerf.sim.writes.enabled = True
        async with contextlib.AsyncExitStack() as stack:
            services = [
                (await stack.enter_async_context(replica(kerf, f"r{i}", options)))[0]
                for i in range(2)
            ]
            await wait_for(kerf, lambda: resized(kerf), "every namespace's pods resized", 120)
            assert all(s.shards is None for s in services)
            assert [s.leading for s in services].count(True) == 1
            leader = next(s for s in services if s.leading)
            assert {w.namespace for w in leader.view.workloads()} >= set(NAMESPACES)
        writers = {
            w.user
            for w in kerf.sim.writes.entries
            if w.resource != "leases" and w.namespace in NAMESPACES
        }
        assert len(writers) == 1
        names = {
            lease["metadata"]["name"]
            for lease in kerf.sim.store.iter(LEASES)
            if lease["metadata"]["name"].startswith("kerf-reconciler")
        }
        assert names == {"kerf-reconciler"}


def web(namespace: str) -> WorkloadRef:
    return WorkloadRef("Deployment", namespace, "web")


def recommendations(namespaces: list[str]) -> dict[str, Any]:
    """A recommendation ConfigMap with a row for each namespace's `web`."""
    rows = (b.row(namespace=ns, requests=WANTED, limits=WANTED) for ns in namespaces)
    return b.configmap(*rows, name="recommendations", namespace="kerf-system")


async def test_a_joining_replica_takes_buckets_and_the_views_follow(tmp_path: Path) -> None:
    """The first replica holds every bucket; once a second joins, the first releases
    its part by weight: its view drops their workloads and recommendation rows (a
    relist), the second's lists them."""
    options = SHARDED
    async with running_kerf(tmp_path) as kerf:
        await workloads(kerf)
        await client.CoreV1Api(kerf.api).create_namespaced_config_map(
            "kerf-system", recommendations(NAMESPACES)
        )
        async with contextlib.AsyncExitStack() as stack:
            first, *_ = await stack.enter_async_context(replica(kerf, "r0", options))
            await wait_for(kerf, lambda: resized(kerf), "every namespace's pods resized", 120)
            assert first.shards.held() == set(range(BUCKETS))
            second, *_ = await stack.enter_async_context(replica(kerf, "r1", options))

            def views_follow() -> bool:
                a, b = first.shards.held(), second.shards.held()
                owner = {bucket: "r0" for bucket in a} | {bucket: "r1" for bucket in b}
                weights = bucket_weights(first.view.namespace_names(), BUCKETS)
                if a & b or not at_rest(owner, weights, ["r0", "r1"], BUCKETS):
                    return False
                for service, mine in ((first, a), (second, b)):
                    kept = {w.namespace for w in service.view.workloads()}
                    pods = {p["metadata"]["namespace"] for p in service.view.pods()}
                    rows = {
                        ns for ns in NAMESPACES if service.view.recommendations("rows", web(ns))
                    }
                    owned = {ns for ns in NAMESPACES if bucket_of(ns, BUCKETS) in mine}
                    if kept != owned or not pods <= owned or rows != owned:
                        return False
                return True

            await eventually(views_follow, "the buckets split and each view following", 60)
            kept = len(first.shards.held())
            assert 0 < kept < BUCKETS
            assert first.metrics.bucket_rebalances.labels("released")._value.get() == BUCKETS - kept
            assert first.metrics.buckets_held._value.get() == kept


def member_leases(kerf: Kerf) -> set[str]:
    return {
        lease["metadata"]["name"]
        for lease in kerf.sim.store.iter(LEASES)
        if lease["metadata"]["name"].startswith("kerf-reconciler-member-")
    }


async def test_a_long_silent_member_lease_is_deleted_by_bucket_00s_holder(
    tmp_path: Path,
) -> None:
    """A member Lease left by a replica killed long ago (renewed once, never since) is
    deleted once bucket 00's holder has seen it unchanged for ten durations; the live
    members' Leases stay."""
    options = replace(FAST, shards=BUCKETS)
    async with running_kerf(tmp_path, webhook=False) as kerf:
        leases = client.CoordinationV1Api(kerf.api)
        gone = member_lease_name("reconciler", "killed-long-ago")
        await leases.create_namespaced_lease(
            "kerf-system",
            {
                "metadata": {"name": gone, "labels": shard_labels("reconciler", MEMBER, BUCKETS)},
                "spec": {"holderIdentity": "killed-long-ago", "leaseDurationSeconds": 2},
            },
        )
        async with contextlib.AsyncExitStack() as stack:
            services = [
                (await stack.enter_async_context(replica(kerf, f"r{i}", options)))[0]
                for i in range(2)
            ]
            await eventually(
                lambda: gone not in member_leases(kerf),
                "the silent member's Lease deleted",
                120,
            )
            assert member_leases(kerf) == {
                member_lease_name("reconciler", f"r{i}") for i in range(2)
            }
            assert sum(len(s.shards.held()) for s in services) == BUCKETS
        assert member_leases(kerf) == set()  # each deleted its own on shutdown


async def test_replicas_of_two_bucket_counts_never_both_claim(tmp_path: Path) -> None:
    """`--shards` changed in a rolling update: the replica of the new count claims nothing
    while one of the old count runs (its gauge says why), and everything once it is gone;
    meanwhile only the old one writes."""
    async with running_kerf(tmp_path) as kerf:
        await workloads(kerf)
        kerf.sim.writes.enabled = True
        old_count = replace(SHARDED, shards=4)
        async with contextlib.AsyncExitStack() as stack:
            old, stop_old, task_old = await stack.enter_async_context(
                replica(kerf, "old", old_count)
            )
            await eventually(lambda: len(old.shards.held()) == 4, "the old replica settled", 60)
            new, *_ = await stack.enter_async_context(replica(kerf, "new", SHARDED))
            await eventually(
                lambda: new.metrics.bucket_count_mismatch._value.get() == 1,
                "the new replica seeing the other count",
                60,
            )
            await wait_for(kerf, lambda: resized(kerf), "every namespace's pods resized", 120)
            assert new.shards.held() == frozenset()
            assert len(old.shards.held()) == 4  # the new one is no member of its count
            stop_old.set()
            await asyncio.wait_for(task_old, 20)
            writes_before = len(kerf.sim.writes.entries)
            await eventually(
                lambda: len(new.shards.held()) == BUCKETS, "the new replica claiming all", 60
            )
            assert new.metrics.bucket_count_mismatch._value.get() == 0
        writers = {
            w.user
            for w in kerf.sim.writes.entries[:writes_before]
            if w.resource != "leases" and w.namespace in NAMESPACES
        }
        assert writers == {"old"}
        relabelled = kerf.sim.store.get(
            LEASES, "kerf-system", bucket_lease_name("reconciler", 0, 8)
        )
        assert relabelled is not None
        assert relabelled["metadata"]["labels"][BUCKETS_LABEL] == str(BUCKETS)


async def test_a_single_leader_waits_for_the_sharded_replicas(tmp_path: Path) -> None:
    """`--shards` lowered to 1 in a rolling update: the single leader takes its Lease only
    once the sharded replica is gone; meanwhile only the sharded one writes."""
    async with running_kerf(tmp_path) as kerf:
        await workloads(kerf)
        kerf.sim.writes.enabled = True
        async with contextlib.AsyncExitStack() as stack:
            sharded, stop_sharded, task_sharded = await stack.enter_async_context(
                replica(kerf, "sharded", replace(SHARDED, shards=4))
            )
            await eventually(lambda: len(sharded.shards.held()) == 4, "the shards settled", 60)
            single, *_ = await stack.enter_async_context(
                replica(kerf, "single", replace(SHARDED, shards=1))
            )
            await eventually(
                lambda: single.metrics.bucket_count_mismatch._value.get() == 1,
                "the single leader seeing the sharded replica",
                60,
            )
            await wait_for(kerf, lambda: resized(kerf), "every namespace's pods resized", 120)
            assert not single.leading
            stop_sharded.set()
            await asyncio.wait_for(task_sharded, 20)
            writes_before = len(kerf.sim.writes.entries)
            await eventually(lambda: single.leading, "the single leader leading", 60)
            assert single.metrics.bucket_count_mismatch._value.get() == 0
        writers = {
            w.user
            for w in kerf.sim.writes.entries[:writes_before]
            if w.resource != "leases" and w.namespace in NAMESPACES
        }
        assert writers == {"sharded"}


async def test_a_cluster_rollback_policys_counters_count_every_replicas_buckets(
    tmp_path: Path,
) -> None:
    """Two replicas hold the buckets of the six namespaces between them; each namespace's
    workload has failed permanently under one ClusterRollbackPolicy, created once the
    buckets are split. Each replica publishes its buckets' counts on their Leases, and
    bucket 00's holder writes the sum: all six, not only those of its own buckets."""
    options = replace(SHARDED, service=replace(SHARDED.service, policy_status_s=0.5))
    failed = orjson.dumps({"mode": "failedPermanent", "turn": 2}).decode()
    async with running_kerf(tmp_path, webhook=False) as kerf:
        apps = client.AppsV1Api(kerf.api)
        for namespace in NAMESPACES:
            await kerf.sim.add_namespace(namespace)
            body = deployment("web", replicas=1, namespace=namespace)
            body["metadata"]["annotations"] = {ROLLBACK_STATE: failed}
            await apps.create_namespaced_deployment(namespace, body)
        await kerf.settle()
        async with contextlib.AsyncExitStack() as stack:
            services = [
                (await stack.enter_async_context(replica(kerf, f"r{i}", options)))[0]
                for i in range(2)
            ]
            occupied = {bucket_of(ns, BUCKETS) for ns in NAMESPACES}

            def split() -> bool:
                held = [s.shards.held() for s in services]
                owner = {b: f"r{i}" for i, h in enumerate(held) for b in h}
                weights = bucket_weights(services[0].view.namespace_names(), BUCKETS)
                return (
                    len(owner) == BUCKETS
                    and at_rest(owner, weights, ["r0", "r1"], BUCKETS)
                    and all(h & occupied for h in held)
                    and all(
                        s.view.shard_filter.listed == h for s, h in zip(services, held, strict=True)
                    )
                )

            await eventually(split, "each replica holding some of the namespaces' buckets", 60)
            writer = next(s for s in services if s.writes_cluster)
            kept = {w.namespace for w in writer.view.workloads()}
            assert kept < set(NAMESPACES)  # it keeps only some of the workloads it counts
            await custom(kerf.api).create_cluster_custom_object(
                GROUP,
                VERSION,
                "clusterrollbackpolicies",
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "ClusterRollbackPolicy",
                    "metadata": {"name": "everywhere"},
                    "spec": {
                        "scope": {"namespaceSelector": {"operator": "In", "values": ["*"]}},
                        "monitoringPeriod": "5m",
                        "rollbackTarget": "manifest",
                        "adoptionThresholdPercent": 50,
                        "backoff": {"timePeriod": "1m", "multiplyByTurn": 2, "maxAttempts": 2},
                    },
                },
            )

            def note_of(bucket: int) -> dict[str, Any]:
                lease = kerf.sim.store.get(
                    LEASES, "kerf-system", bucket_lease_name("reconciler", bucket, BUCKETS)
                )
                text = ((lease or {}).get("metadata", {}).get("annotations") or {}).get(
                    ROLLBACK_COUNTS
                )
                return decode_counts(text) if text else {}

            def published() -> bool:
                # each occupied bucket's Lease carries its holder's count of it
                return all(
                    note_of(b)
                    == {
                        "everywhere": {
                            "monitoring": 0,
                            "rolledBack": 0,
                            "failedPermanent": sum(
                                bucket_of(ns, BUCKETS) == b for ns in NAMESPACES
                            ),
                        }
                    }
                    for b in occupied
                )

            await eventually(published, "every bucket Lease carrying its counts", 60)

            async def counted() -> dict[str, Any] | None:
                policy = await custom(kerf.api).get_cluster_custom_object(
                    GROUP, VERSION, "clusterrollbackpolicies", "everywhere"
                )
                status = policy.get("status") or {}
                return status if status.get("failedPermanent") == len(NAMESPACES) else None

            status = await wait_for(kerf, counted, "the counters of every bucket", 60)
            assert (status["monitoring"], status["rolledBack"]) == (0, 0)
            assert writer.writes_cluster
