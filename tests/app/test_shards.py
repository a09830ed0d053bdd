"""The shard model: namespaces to buckets, fair shares, and who claims and releases."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from app.model.shards import (
    Seen,
    bucket_lease_name,
    bucket_of,
    bucket_range,
    fair_share,
    fnv1a64,
    member_lease_name,
    rebalance,
)

DURATION = 15.0
namespaces = st.text(min_size=1, max_size=63)
bucket_counts = st.integers(min_value=1, max_value=128)


def test_fnv1a64_matches_the_reference_vectors() -> None:
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


@given(namespaces, bucket_counts)
def test_every_namespace_is_in_exactly_one_bucket_whose_range_holds_its_hash(
    namespace: str, buckets: int
) -> None:
    bucket = bucket_of(namespace, buckets)
    assert 0 <= bucket < buckets
    h = fnv1a64(namespace.encode())
    holding = [
        b for b in range(buckets) if bucket_range(b, buckets)[0] <= h < bucket_range(b, buckets)[1]
    ]
    assert holding == [bucket]


@given(bucket_counts)
def test_the_ranges_tile_the_hash_space(buckets: int) -> None:
    ranges = [bucket_range(b, buckets) for b in range(buckets)]
    assert ranges[0][0] == 0 and ranges[-1][1] == 1 << 64
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))


def test_fair_share_is_the_ceiling() -> None:
    assert [fair_share(64, n) for n in (1, 2, 3, 4, 64, 65)] == [64, 32, 22, 16, 1, 1]
    assert fair_share(64, 0) == 64


def test_lease_names() -> None:
    assert bucket_lease_name("reconciler", 0, 1) == "kerf-reconciler"
    assert bucket_lease_name("reconciler", 7, 64) == "kerf-reconciler-bucket-07"
    assert bucket_lease_name("recommender", 63, 64) == "kerf-recommender-bucket-63"
    assert member_lease_name("reconciler", "kerf-0") == "kerf-reconciler-member-kerf-0"


def test_a_lone_replica_claims_every_bucket() -> None:
    plan = rebalance("a", 64, {}, {})
    assert sorted(plan.claim) == list(range(64)) and plan.release == () and plan.fair_share == 64


def test_live_buckets_of_others_are_left_and_expired_ones_claimed() -> None:
    members = {"b": Seen("b", 1.0, DURATION)}
    leases = {0: Seen("b", 1.0, DURATION), 1: Seen("c", DURATION, DURATION), 2: Seen("", 0, 1)}
    plan = rebalance("a", 4, members, leases)
    assert plan.fair_share == 2
    assert 0 not in plan.claim and len(plan.claim) == 2 and set(plan.claim) <= {1, 2, 3}


def test_a_replica_above_its_share_releases_the_excess_when_a_member_joins() -> None:
    leases = {b: Seen("a", 0.0, DURATION) for b in range(8)}
    alone = rebalance("a", 8, {}, leases)
    assert alone.release == () and alone.claim == ()
    joined = rebalance("a", 8, {"b": Seen("b", 0.0, DURATION)}, leases)
    assert len(joined.release) == 4 and len(joined.keep) == 4 and joined.claim == ()


def test_a_member_that_stopped_renewing_no_longer_counts() -> None:
    members = {"b": Seen("b", DURATION, DURATION)}
    assert rebalance("a", 8, members, {}).fair_share == 8


@st.composite
def clusters(draw: st.DrawFn) -> tuple[int, list[str], dict[int, str], int]:
    buckets = draw(st.integers(min_value=1, max_value=70))
    count = draw(st.integers(min_value=1, max_value=6))
    members = [f"r{i}" for i in range(count)]
    owners = draw(
        st.dictionaries(
            st.integers(min_value=0, max_value=buckets - 1),
            st.sampled_from([*members, "gone", ""]),
        )
    )
    seed = draw(st.integers(min_value=0, max_value=2**32))
    return buckets, members, owners, seed


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_live_members_come_to_cover_every_bucket_once_within_their_shares(
    cluster: tuple[int, list[str], dict[int, str], int],
) -> None:
    """Members take turns in any order; a claim succeeds only on a bucket still free when
    it is written (the Lease's resourceVersion), as on the API server."""
    buckets, members, owners, seed = cluster
    rng = random.Random(seed)
    seen_members = {m: Seen(m, 0.0, DURATION) for m in members}
    # a departed holder's Lease has gone unchanged past its duration
    owner = {b: h for b, h in owners.items() if h in members}
    for _ in range(4 * buckets + 8):
        changed = False
        for identity in rng.sample(members, len(members)):
            leases = {b: Seen(h, 0.0, DURATION) for b, h in owner.items()}
            leases.update(
                {
                    b: Seen("gone", DURATION, DURATION)
                    for b, h in owners.items()
                    if h == "gone" and b not in owner
                }
            )
            held = [b for b, h in owner.items() if h == identity]
            plan = rebalance(identity, buckets, seen_members, leases, held=held)
            for b in plan.release:
                del owner[b]
                changed = True
            for b in plan.claim:
                if b not in owner:
                    owner[b] = identity
                    changed = True
        if not changed:
            break
    share = fair_share(buckets, len(members))
    assert sorted(owner) == list(range(buckets))
    for identity in members:
        assert sum(1 for h in owner.values() if h == identity) <= share


@given(clusters(), st.randoms())
def test_the_decision_does_not_depend_on_input_order(
    cluster: tuple[int, list[str], dict[int, str], int], rnd: random.Random
) -> None:
    buckets, members, owners, _ = cluster
    seen_members = {m: Seen(m, float(i), DURATION) for i, m in enumerate(members)}
    leases = {b: Seen(h, 0.0 if h != "gone" else DURATION, DURATION) for b, h in owners.items()}
    held = [b for b, h in owners.items() if h == members[0]]

    def shuffled(d: dict) -> dict:  # type: ignore[type-arg]
        items = list(d.items())
        rnd.shuffle(items)
        return dict(items)

    shuffled_held = list(held)
    rnd.shuffle(shuffled_held)
    first = rebalance(members[0], buckets, seen_members, leases, held=held)
    again = rebalance(
        members[0], buckets, shuffled(seen_members), shuffled(leases), held=shuffled_held
    )
    assert first == again
