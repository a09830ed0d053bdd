"""A shard set on Leases: replicas split the buckets, take over a silent member's after
its Leases expire on their own clocks, give up their excess when a member joins, and
release everything on shutdown; the fence follows the bucket of each write."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge

from app.kube.informer import ApiStatusError
from app.kube.leader import WORK_TERMS, LeaderElector, NotLeading
from app.kube.leadertimings import LeaderTimings
from app.kube.shardleases import ShardedReplicas, ShardLeases, Weighing
from app.model.shards import (
    BUCKETS_LABEL,
    SHARD_ROLE_LABEL,
    SHARD_SET_LABEL,
    STALE_MEMBER_DURATIONS,
    at_rest,
    bucket_of,
    bucket_weights,
    fair_share,
)

TIMINGS = LeaderTimings(duration_s=15.0, renew_deadline_s=10.0, retry_s=2.0)


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Leases:
    """A namespace's Leases with optimistic concurrency and label selection."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.deleted: list[str] = []

    async def request(
        self, verb: str, resource: str, method: str, path: str, body: Any = None, **_: Any
    ) -> dict[str, Any]:
        url = urlsplit(path)
        if method == "GET" and url.path.endswith("/leases"):
            key, _, value = parse_qs(url.query)["labelSelector"][0].partition("=")
            items = [
                copy.deepcopy(lease)
                for lease in self.items.values()
                if (lease["metadata"].get("labels") or {}).get(key) == value
            ]
            return {"items": items}
        name = url.path.rsplit("/", 1)[1]
        if method == "GET":
            if name not in self.items:
                raise ApiStatusError(404, "not found")
            return copy.deepcopy(self.items[name])
        if method == "DELETE":
            if name not in self.items:
                raise ApiStatusError(404, "not found")
            if (
                body["preconditions"]["resourceVersion"]
                != self.items[name]["metadata"]["resourceVersion"]
            ):
                raise ApiStatusError(409, "Precondition failed")
            self.deleted.append(name)
            del self.items[name]
            return {"kind": "Status", "status": "Success"}
        name = body["metadata"]["name"]
        if method == "POST" and name in self.items:
            raise ApiStatusError(409, "exists")
        if method == "PUT" and (
            name not in self.items
            or body["metadata"]["resourceVersion"]
            != self.items[name]["metadata"]["resourceVersion"]
        ):
            raise ApiStatusError(409, "the object has been modified")
        self.version += 1
        lease = copy.deepcopy(body)
        lease["metadata"]["resourceVersion"] = str(self.version)
        self.items[name] = lease
        return copy.deepcopy(lease)

    def holders(self) -> dict[int, str]:
        return {
            int(name.rsplit("-", 1)[1]): lease["spec"]["holderIdentity"]
            for name, lease in self.items.items()
            if lease["metadata"]["labels"][SHARD_ROLE_LABEL] == "bucket"
            and lease["spec"]["holderIdentity"]
        }


class Replica:
    def __init__(
        self,
        server: Leases,
        identity: str,
        buckets: int = 64,
        namespaces: list[str] | Callable[[], list[str]] | None = None,
        weighing: Callable[[], Weighing] = lambda: Weighing.LISTED,
        note: str | None = None,
    ) -> None:
        self.clock = Monotonic()
        registry = CollectorRegistry()
        self.mismatch = Gauge("m", "m", registry=registry)
        self.changes: list[tuple[frozenset[int], frozenset[int]]] = []
        self.rebalances = Counter("r", "r", ["reason"], registry=registry)
        self.withheld = Counter("w", "w", ["resource", "bucket"], registry=registry)
        self.namespaces = Gauge("n", "n", registry=registry)
        self.shards = ShardLeases(
            server,  # type: ignore[arg-type]
            "kerf-system",
            identity,
            shard_set="reconciler",
            buckets=buckets,
            held_gauge=Gauge("h", "h", registry=registry),
            rebalances=self.rebalances,
            mismatch_gauge=self.mismatch,
            timings=TIMINGS,
            clock=lambda: datetime(2026, 12, 1, tzinfo=UTC),
            monotonic=self.clock,
            on_change=lambda gained, lost: self.changes.append((gained, lost)),
            namespaces=namespaces if callable(namespaces) else lambda: namespaces or [],
            namespaces_gauge=self.namespaces,
            weighing=weighing,
            note=note,
        )

    def count(self, reason: str) -> float:
        return self.rebalances.labels(reason)._value.get()


async def rounds(replicas: list[Replica], n: int = 4, step_s: float = 2.0) -> None:
    for _ in range(n):
        for replica in replicas:
            await replica.shards.round()
        for replica in replicas:
            replica.clock.now += step_s


def assert_split(server: Leases, replicas: list[Replica], buckets: int = 64) -> None:
    holders = server.holders()
    assert sorted(holders) == list(range(buckets))
    held = [r.shards.held() for r in replicas]
    assert sum(len(h) for h in held) == buckets  # no bucket held by two
    for replica, mine in zip(replicas, held, strict=True):
        assert mine == {b for b, h in holders.items() if h == replica.shards.identity}
        assert len(mine) <= fair_share(buckets, len(replicas))


async def test_replicas_split_the_buckets_with_labelled_leases() -> None:
    server = Leases()
    replicas = [Replica(server, f"r{i}") for i in range(3)]
    await rounds(replicas)
    assert_split(server, replicas)
    assert "kerf-reconciler-bucket-00" in server.items
    assert server.items["kerf-reconciler-member-r0"]["metadata"]["labels"] == {
        SHARD_SET_LABEL: "reconciler",
        SHARD_ROLE_LABEL: "member",
        BUCKETS_LABEL: "64",
    }
    assert server.items["kerf-reconciler-bucket-00"]["metadata"]["labels"][BUCKETS_LABEL] == "64"
    assert "kerf-reconciler" not in server.items  # the single leader's name: one bucket only
    for replica in replicas:
        assert replica.count("claimed") == len(replica.shards.held())


async def test_a_lone_replica_holds_everything_and_one_bucket_is_the_leader_lease() -> None:
    server = Leases()
    alone = Replica(server, "r0", buckets=1)
    await rounds([alone], 2)
    assert alone.shards.held() == {0}
    assert server.items["kerf-reconciler"]["spec"]["holderIdentity"] == "r0"


async def test_a_joining_member_gets_buckets_released_to_it() -> None:
    server = Leases()
    first = Replica(server, "r0")
    await rounds([first])
    assert len(first.shards.held()) == 64
    second = Replica(server, "r1")
    await rounds([first, second])
    assert_split(server, [first, second])
    assert first.count("released") == 32 and first.count("lost") == 0


async def test_buckets_are_shared_by_the_namespaces_in_them() -> None:
    """`team-0` … `team-999` fill 10 of the 64 buckets: two replicas hold 500 each, not
    32 buckets each, and say so in their gauge."""
    server = Leases()
    teams = [f"team-{i}" for i in range(1000)]
    replicas = [Replica(server, f"r{i}", namespaces=teams) for i in range(2)]
    await rounds(replicas)
    holders = server.holders()
    assert sorted(holders) == list(range(64))
    held = [r.shards.namespaces_held() for r in replicas]
    assert held == [500, 500]
    assert [r.namespaces._value.get() for r in replicas] == [500, 500]
    # a namespace more moves nothing: the margin
    teams.append("team-1000")
    await rounds(replicas, n=2)
    assert server.holders() == holders


TEAMS = [f"team-{i}" for i in range(1000)]


async def start_together(
    count: int, *, weigh_first: bool, list_rounds: int = 1, limit: int = 60
) -> tuple[int, int, int]:
    """Start `count` replicas together over `team-0` … `team-999` and run rounds until
    the buckets are at rest by weight: (rounds, buckets moved, relists). A replica's
    Namespaces are in `list_rounds` rounds after its feed starts them: at once
    (`weigh_first`: the Namespaces go first and the claims wait for them), or once its
    first claims are in (the feed started after them, as before)."""
    server = Leases()
    clock = [0]
    started: dict[str, int] = {}

    def listed(identity: str) -> bool:
        return identity in started and clock[0] - started[identity] >= list_rounds

    def replica(identity: str) -> Replica:
        if weigh_first:
            started[identity] = 0
            return Replica(
                server,
                identity,
                namespaces=lambda: TEAMS if listed(identity) else [],
                weighing=lambda: Weighing.LISTED if listed(identity) else Weighing.PENDING,
            )
        return Replica(server, identity, namespaces=lambda: TEAMS if listed(identity) else [])

    replicas = [replica(f"r{i}") for i in range(count)]
    members = [r.shards.identity for r in replicas]
    weights = bucket_weights(TEAMS, 64)
    while clock[0] < limit:
        clock[0] += 1
        await rounds(replicas, 1)
        for r in replicas:
            if r.shards.settled.is_set():
                started.setdefault(r.shards.identity, clock[0])
        if all(map(listed, members)) and at_rest(server.holders(), weights, members, 64):
            break
    moved = sum(int(r.count("released")) for r in replicas)
    # every change of the held buckets after the first claims lists the per-workload kinds
    relists = sum(max(0, len(r.changes) - 1) for r in replicas)
    return clock[0], moved, relists


async def test_replicas_started_together_claim_by_weight_at_once() -> None:
    """With the Namespaces listed before the first claims, four replicas over `team-0` …
    `team-999` are at rest after their first claims: no bucket moves, no relist. Claimed
    before the Namespaces are in (the order before), they split by count and then move
    buckets, a relist each."""
    after = await start_together(4, weigh_first=True)
    before = await start_together(4, weigh_first=False)
    print(f"4 replicas, team-0 … team-999: (rounds, moved, relists) {before} -> {after}")
    rested, moved, relists = after
    assert rested <= 3 and moved <= 2 and relists <= 2, after
    assert before[1] > 10, before  # what this guards against
    # a slow Namespaces list only delays the first claims
    rested, moved, relists = await start_together(4, weigh_first=True, list_rounds=4)
    assert rested <= 6 and moved <= 2 and relists <= 2


async def test_claims_wait_for_the_namespaces_a_lease_duration_at_most(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While the Namespaces are not listed a replica claims nothing and is not settled;
    after a Lease duration it claims with every bucket weighed alike (said once), and
    once they are listed it weighs them."""
    server = Leases()
    state = [Weighing.PENDING]
    alone = Replica(server, "r0", namespaces=TEAMS, weighing=lambda: state[0])
    with caplog.at_level("INFO", logger="kerf.shards"):
        await rounds([alone], n=7)  # 14 s: less than the 15 s duration
        assert alone.shards.held() == frozenset() and not alone.shards.settled.is_set()
        await rounds([alone], n=2)
        assert len(alone.shards.held()) == 64 and alone.shards.settled.is_set()
        assert alone.shards.namespaces_held() == 0  # weighed alike: no names counted
        state[0] = Weighing.LISTED
        await rounds([alone], n=1)
        assert alone.shards.namespaces_held() == 1000
    said = [r.getMessage() for r in caplog.records if "weigh" in r.getMessage()]
    assert said == [
        "weighing every bucket alike: the Namespaces are not listed "
        "(not in after the Lease duration)",
        "weighing the buckets by their namespaces: the Namespaces are listed",
    ]


async def test_a_refused_namespaces_list_claims_at_once_weighed_alike(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No permission to list Namespaces (403): the replicas claim at once and share the
    buckets by count, said once each."""
    server = Leases()
    replicas = [
        Replica(server, f"r{i}", namespaces=[], weighing=lambda: Weighing.UNAVAILABLE)
        for i in range(2)
    ]
    with caplog.at_level("INFO", logger="kerf.shards"):
        await rounds(replicas)
    assert_split(server, replicas)
    said = [r.getMessage() for r in caplog.records if "weigh" in r.getMessage()]
    assert said == ["weighing every bucket alike: the Namespaces are not listed (refused)"] * 2


async def test_a_silent_members_buckets_are_taken_over_once_they_expire() -> None:
    server = Leases()
    replicas = [Replica(server, f"r{i}") for i in range(3)]
    await rounds(replicas)
    silent, rest = replicas[0], replicas[1:]
    theirs = silent.shards.held()
    await rounds(rest, n=7)  # 14 s of the others' clocks: less than the 15 s duration
    assert theirs <= set(server.holders()) and all(server.holders()[b] == "r0" for b in theirs)
    await rounds(rest, n=4)
    assert_split(server, rest)
    # the silent one, resumed past its renew deadline, holds nothing it may write for
    silent.clock.now += 30
    assert silent.shards.held() == frozenset()
    assert silent.changes[-1][1] == theirs
    assert silent.count("lost") == len(theirs)


async def test_the_fence_follows_the_bucket_of_each_write() -> None:
    server = Leases()
    replicas = [Replica(server, f"r{i}") for i in range(2)]
    await rounds(replicas)
    a, b = replicas
    namespace = next(ns for ns in (f"ns-{i}" for i in range(100)) if a.shards.owns(ns))
    bucket = bucket_of(namespace, 64)
    a.shards.fence(a.withheld)("pods/resize", namespace)  # sent
    with pytest.raises(NotLeading):
        b.shards.fence(b.withheld)("pods/resize", namespace)
    assert b.withheld.labels("pods/resize", f"{bucket:02d}")._value.get() == 1
    cluster_writer = a if a.shards.holds(0) else b
    cluster_writer.shards.fence(cluster_writer.withheld)("globalconfigurations/status")


async def test_shutdown_releases_every_lease() -> None:
    server = Leases()
    replicas = [Replica(server, f"r{i}") for i in range(2)]
    await rounds(replicas)
    held = replicas[0].shards.held()
    await replicas[0].shards.release()
    assert replicas[0].shards.held() == frozenset()
    assert all(server.holders().get(b) != "r0" for b in held)
    assert "kerf-reconciler-member-r0" not in server.items  # deleted, not left behind
    assert server.deleted == ["kerf-reconciler-member-r0"]
    assert replicas[0].count("released") == len(held)
    await rounds(replicas[1:], n=2)
    assert len(replicas[1].shards.held()) == 64


async def test_an_old_single_leader_keeps_the_shards_from_claiming() -> None:
    server = Leases()
    server.items["kerf-reconciler"] = {
        "metadata": {"name": "kerf-reconciler", "resourceVersion": "0"},
        "spec": {"holderIdentity": "old-leader", "leaseDurationSeconds": 15},
    }
    new = Replica(server, "r0")
    await rounds([new], n=4)
    assert new.shards.held() == frozenset()
    server.items["kerf-reconciler"]["spec"]["holderIdentity"] = ""  # released on shutdown
    server.items["kerf-reconciler"]["metadata"]["resourceVersion"] = "1"
    await rounds([new], n=2)
    assert len(new.shards.held()) == 64


def member(server: Leases, identity: str) -> dict[str, Any]:
    return server.items[f"kerf-reconciler-member-{identity}"]


async def test_bucket_00s_holder_deletes_long_silent_member_leases_a_few_a_round() -> None:
    server = Leases()
    replicas = [Replica(server, f"r{i}") for i in range(2)]
    gone = [Replica(server, f"gone-{i}") for i in range(6)]
    await rounds([*replicas, *gone], n=2)
    assert all(f"kerf-reconciler-member-gone-{i}" in server.items for i in range(6))
    # the six stop renewing (SIGKILL: nothing released); long past their expiry, but
    # short of STALE_MEMBER_DURATIONS durations on the others' clocks, they stay
    # (each round is 2 s; the first sees their last version)
    await rounds(replicas, n=int(STALE_MEMBER_DURATIONS * TIMINGS.duration_s / 2))
    assert_split(server, replicas)
    assert server.deleted == []
    await rounds(replicas, n=1)
    # then bucket 00's holder deletes them, at most four a round
    cleaner = next(r for r in replicas if r.shards.holds(0)).shards.identity
    assert len(server.deleted) == 4
    await rounds(replicas, n=1)
    assert sorted(server.deleted) == [f"kerf-reconciler-member-gone-{i}" for i in range(6)]
    assert {name for name in server.items if "member" in name} == {
        f"kerf-reconciler-member-{r.shards.identity}" for r in replicas
    }
    assert cleaner in {"r0", "r1"}
    # bucket Leases are never deleted, expired or not
    assert len([name for name in server.items if "bucket" in name]) == 64


async def test_a_member_that_came_back_keeps_its_lease() -> None:
    server = Leases()
    a, b = Replica(server, "r0"), Replica(server, "r1")
    await rounds([a, b], n=2)
    # r1 goes silent long enough to be stale on r0's clock; just before r0's sweep it
    # renews again (resumed from SIGSTOP): the delete names the version r0 read, and fails
    await rounds([a], n=int(STALE_MEMBER_DURATIONS * TIMINGS.duration_s / 2))
    assert a.shards.holds(0) and member(server, "r1")
    original = a.shards._sweep
    swept: list[str] = []

    async def resumed_first(name: str, version: str) -> None:
        b.clock.now += 200
        await b.shards.round()
        swept.append(name)
        await original(name, version)

    a.shards._sweep = resumed_first  # type: ignore[method-assign]
    await rounds([a], n=1)
    assert swept == ["kerf-reconciler-member-r1"] and server.deleted == []
    assert member(server, "r1")["spec"]["holderIdentity"] == "r1"


async def test_a_replica_of_another_bucket_count_claims_nothing_until_the_others_go(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Leases()
    old = [Replica(server, f"old-{i}", buckets=16) for i in range(2)]
    await rounds(old)
    assert_split(server, old, buckets=16)
    new = Replica(server, "new-0", buckets=64)
    with caplog.at_level("INFO", logger="kerf.shards"):
        await rounds([*old, new], n=6)
    assert new.shards.held() == frozenset()
    assert new.mismatch._value.get() == 1
    assert sorted(new.shards.mismatched.values()) == [16] * len(new.shards.mismatched)
    warnings = [r for r in caplog.records if "another bucket count" in r.getMessage()]
    # one line each (the old two see the new one too), not one every round
    assert sorted(r.fields["identity"] for r in warnings) == ["new-0", "old-0", "old-1"]
    assert {r.levelname for r in warnings} == {"WARNING"}
    # the old replicas see the new one as another count too: no buckets released to it
    # (a member of another count is no member of theirs), and none claimed from them
    assert all(len(r.shards.held()) == 8 for r in old)
    assert all(r.mismatch._value.get() == 1 for r in old)
    # a rolling update ends: the old replicas stop on SIGTERM, releasing everything
    for replica in old:
        await replica.shards.release()
    caplog.clear()
    with caplog.at_level("INFO", logger="kerf.shards"):
        await rounds([new], n=2)
    assert len(new.shards.held()) == 64
    assert new.mismatch._value.get() == 0
    assert any("claiming again" in r.getMessage() for r in caplog.records)
    assert server.items["kerf-reconciler-bucket-03"]["metadata"]["labels"][BUCKETS_LABEL] == "64"


async def test_an_expired_lease_of_another_count_does_not_hold_claims_back() -> None:
    server = Leases()
    old = Replica(server, "old-0", buckets=16)
    await rounds([old])
    new = Replica(server, "new-0", buckets=64)
    await rounds([new], n=2)
    assert new.shards.held() == frozenset()
    # old-0 was killed: once its Leases are unchanged for their duration on new-0's
    # clock, new-0 claims every bucket, the expired ones of the other count included
    await rounds([new], n=8)
    assert len(new.shards.held()) == 64 and not new.shards.mismatched


def single_leader(server: Leases, gauge: Gauge) -> tuple[LeaderElector, Monotonic]:
    clock = Monotonic()
    sharded = ShardedReplicas(
        server,  # type: ignore[arg-type]
        "kerf-system",
        "single",
        shard_set="reconciler",
        mismatch_gauge=gauge,
        monotonic=clock,
    )
    leader = LeaderElector(
        server,  # type: ignore[arg-type]
        "kerf-system",
        "single",
        name="kerf-reconciler",
        timings=TIMINGS,
        clock=lambda: datetime(2026, 12, 1, tzinfo=UTC),
        monotonic=clock,
        may_acquire=sharded.absent,
    )
    return leader, clock


async def test_a_single_leader_waits_while_sharded_replicas_hold_leases() -> None:
    """`--shards` lowered to 1 in a rolling update: the single leader does not take its
    Lease while a sharded replica's Leases are live, and does once it has left."""
    server = Leases()
    sharded = Replica(server, "sharded-0", buckets=8)
    await rounds([sharded])
    gauge = Gauge("g", "g", registry=CollectorRegistry())
    leader, clock = single_leader(server, gauge)
    for _ in range(10):  # 20 s: longer than a Lease duration, the sharded one renewing
        await leader.attempt()
        await rounds([sharded], n=1)
        clock.now += 2
    assert not leader.leading() and "kerf-reconciler" not in server.items
    assert gauge._value.get() == 1
    await sharded.shards.release()
    await leader.attempt()
    assert leader.leading() and gauge._value.get() == 0


async def test_a_single_leader_takes_over_once_a_killed_sharded_replica_expires() -> None:
    server = Leases()
    sharded = Replica(server, "sharded-0", buckets=8)
    await rounds([sharded])
    leader, clock = single_leader(server, Gauge("g", "g", registry=CollectorRegistry()))
    await leader.attempt()
    assert not leader.leading()
    clock.now += TIMINGS.duration_s  # seen unchanged for a whole duration on its clock
    await leader.attempt()
    assert leader.leading()


async def test_a_bucket_released_while_its_holder_was_paused_is_told_lost_and_gained() -> None:
    """A replica paused past its Leases, whose buckets another held and released
    meanwhile, claims them again in its first round after the pause: that is another term
    (the other replica may have written), told as lost and gained, not as nothing."""
    server = Leases()
    paused, other = Replica(server, "r0"), Replica(server, "r1")
    await rounds([paused, other])
    theirs = paused.shards.held()
    await rounds([other], n=12)  # past the 15 s duration on the other's clock
    assert theirs <= other.shards.held()
    await other.shards.release()  # say, rebalanced away or shut down
    paused.clock.now += 30
    changes = len(paused.changes)
    await paused.shards.round()  # the first thing it does once resumed
    assert theirs <= paused.shards.held()
    assert len(paused.changes) == changes + 1
    gained, lost = paused.changes[-1]
    assert lost == theirs and theirs <= gained
    assert paused.count("lost") == len(theirs)


async def test_work_begun_before_the_pause_writes_nothing_in_the_new_term() -> None:
    """A pass begun before the pause, and resumed after its bucket was lost and claimed
    again, sends nothing more: it was decided in a term that ended."""
    server = Leases()
    paused, other = Replica(server, "r0"), Replica(server, "r1")
    await rounds([paused, other])
    namespace = next(ns for ns in (f"ns-{i}" for i in range(100)) if paused.shards.owns(ns))
    elector, _ = paused.shards.guard(namespace)
    fence = paused.shards.fence(paused.withheld)
    began = WORK_TERMS.set({elector.name: elector.term})
    try:
        fence("pods/resize", namespace)  # sent
        await rounds([other], n=12)
        await other.shards.release()
        paused.clock.now += 30
        await paused.shards.round()
        assert paused.shards.owns(namespace)  # held again...
        with pytest.raises(NotLeading):
            fence("pods/resize", namespace)  # ...but not for the work begun before
    finally:
        WORK_TERMS.reset(began)
    fence("pods/resize", namespace)  # work begun now is sent


NOTE = "kerf.dev/rollback-counts"


def notes_on(server: Leases) -> dict[int, str]:
    """Each bucket Lease's note as stored."""
    return {
        int(name.rsplit("-", 1)[1]): lease["metadata"]["annotations"][NOTE]
        for name, lease in server.items.items()
        if NOTE in (lease["metadata"].get("annotations") or {})
    }


async def test_each_bucket_lease_carries_its_holders_note_which_every_replica_reads() -> None:
    server = Leases()
    replicas = [Replica(server, f"r{i}", buckets=8, note=NOTE) for i in range(2)]
    await rounds(replicas)
    assert notes_on(server) == {}  # nothing published yet: no annotation
    for replica in replicas:
        replica.shards.publish({b: f"{replica.shards.identity}:{b}" for b in range(8)})
    holder = {b: r.shards.identity for r in replicas for b in r.shards.held()}
    assert len(holder) == 8
    # mine at once where I hold the bucket; the others' once their renewals carry them
    assert replicas[0].shards.notes() == {b: f"r0:{b}" for b in replicas[0].shards.held()}
    await rounds(replicas, n=2)
    expected = {b: f"{h}:{b}" for b, h in holder.items()}
    assert notes_on(server) == expected
    assert all(r.shards.notes() == expected for r in replicas)
    # published again unchanged: the renewals carry the same value, no write of its own
    writes = server.version
    await rounds(replicas, n=1)
    assert server.version == writes + 2 + 8  # a member and the held buckets' renewals


async def test_a_note_stays_on_its_lease_until_the_next_holder_publishes() -> None:
    """Released to a joining replica, a bucket's Lease keeps its note through the
    release and the claim; its new holder's own replaces it once published."""
    server = Leases()
    first = Replica(server, "r0", buckets=8, note=NOTE)
    await rounds([first])
    first.shards.publish({b: f"r0:{b}" for b in range(8)})
    await rounds([first], n=1)
    second = Replica(server, "r1", buckets=8, note=NOTE)
    await rounds([first, second])
    moved = second.shards.held()
    assert moved and not moved & first.shards.held()
    assert notes_on(server) == {b: f"r0:{b}" for b in range(8)}
    assert second.shards.notes() == {b: f"r0:{b}" for b in range(8)}
    second.shards.publish({b: f"r1:{b}" for b in moved})
    await rounds([first, second], n=1)
    assert notes_on(server) == {b: f"r1:{b}" if b in moved else f"r0:{b}" for b in range(8)}


async def test_a_note_written_for_another_bucket_count_is_not_read_nor_kept() -> None:
    server = Leases()
    old = Replica(server, "old", buckets=4, note=NOTE)
    await rounds([old])
    old.shards.publish({b: "old" for b in range(4)})
    await rounds([old], n=1)
    await old.shards.release()
    new = Replica(server, "new", buckets=8, note=NOTE)
    assert new.shards.notes() == {}
    await rounds([new])
    assert len(new.shards.held()) == 8
    assert new.shards.notes() == {}
    assert notes_on(server) == {}  # bucket i of 4 is not bucket i of 8


async def test_a_shard_set_without_a_note_writes_no_annotation() -> None:
    server = Leases()
    replica = Replica(server, "r0", buckets=8)
    await rounds([replica])
    replica.shards.publish({0: "ignored"})
    await rounds([replica], n=1)
    assert all("annotations" not in lease["metadata"] for lease in server.items.values())
