"""The shard model: namespaces to buckets, fair shares, and who claims and releases."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.model.shards import (
    Rebalance,
    Seen,
    at_rest,
    best_move,
    bucket_lease_name,
    bucket_of,
    bucket_range,
    bucket_weights,
    fair_share,
    fnv1a64,
    margin,
    member_lease_name,
    rebalance,
)

DURATION = 15.0
namespaces = st.text(min_size=1, max_size=63)
bucket_counts = st.integers(min_value=1, max_value=128)


def carry_out(plan: Rebalance, owner: dict[int, str], identity: str) -> bool:
    """A replica's releases, then its claims of buckets still free (as on the API server);
    whether anything changed."""
    changed = bool(plan.release)
    for b in plan.release:
        del owner[b]
    for b in plan.claim:
        if b not in owner:
            owner[b] = identity
            changed = True
    return changed


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
    assert alone.release == () and alone.claim == () and alone.settled
    joined = rebalance("a", 8, {"b": Seen("b", 0.0, DURATION)}, leases)
    assert len(joined.release) == 4 and len(joined.keep) == 4 and joined.claim == ()
    # the next round, b claims exactly those
    leases = {b: Seen("a", 0.0, DURATION) for b in joined.keep}
    leases.update({b: Seen("", 0.0, 1.0) for b in joined.release})
    claimed = rebalance("b", 8, {"a": Seen("a", 0.0, DURATION)}, leases)
    assert claimed.claim == joined.release and claimed.release == ()


def test_a_joining_member_gets_its_share_in_one_round_of_moves() -> None:
    """With equal weights the moves of a round all go to the newcomer, as many as the
    next round's claims give it: one round to release, one to claim."""
    members = [f"r{i}" for i in range(4)]
    start = {b: members[b % 3] for b in range(64)}
    owner, rounds_taken = settle(64, members, {}, start)
    assert rounds_taken == 2
    assert sorted(list(owner.values()).count(m) for m in members) == [16, 16, 16, 16]


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
            changed = carry_out(plan, owner, identity) or changed
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


# ---------------------------------------------------------------- weighted balance

TEAMS = [f"team-{i}" for i in range(1000)]


def settle(
    buckets: int,
    members: list[str],
    weights: dict[int, int],
    owner: dict[int, str],
    *,
    rng: random.Random | None = None,
    rounds: int = 400,
) -> tuple[dict[int, str], int]:
    """Rounds until nothing changes: (holders, rounds taken). With `rng`, members act one
    after another in a random order, each seeing the others' writes of the round; without,
    they all decide on the round's one snapshot (as replicas listing at once do). A claim
    succeeds only on a bucket still free when it is written, as on the API server."""
    seen_members = {m: Seen(m, 0.0, DURATION) for m in members}
    owner = dict(owner)
    for taken in range(rounds):
        changed = False
        snapshot = dict(owner)
        order = rng.sample(members, len(members)) if rng else members
        for identity in order:
            view = owner if rng else snapshot
            leases = {b: Seen(h, 0.0, DURATION) for b, h in view.items()}
            held = [b for b, h in view.items() if h == identity]
            plan = rebalance(identity, buckets, seen_members, leases, held=held, weights=weights)
            changed = carry_out(plan, owner, identity) or changed
        if not changed:
            return owner, taken
    raise AssertionError(f"still moving after {rounds} rounds: {owner}")


def loads(owner: dict[int, str], weights: dict[int, int], members: list[str]) -> dict[str, int]:
    found = dict.fromkeys(members, 0)
    for b, m in owner.items():
        found[m] += weights.get(b, 1)
    return found


@st.composite
def weighted(draw: st.DrawFn) -> tuple[int, list[str], dict[int, int], dict[int, str], int]:
    """Buckets of skewed weights (most empty, a few heavy), members, and holders."""
    buckets = draw(st.integers(min_value=1, max_value=70))
    count = draw(st.integers(min_value=1, max_value=6))
    members = [f"r{i}" for i in range(count)]
    heavy = draw(st.dictionaries(st.integers(0, buckets - 1), st.integers(1, 200), max_size=12))
    weights = {b: 1 + heavy.get(b, 0) for b in range(buckets)}
    owners = draw(st.dictionaries(st.integers(0, buckets - 1), st.sampled_from(members)))
    return buckets, members, weights, owners, draw(st.integers(0, 2**32))


@settings(max_examples=150, deadline=None)
@given(weighted(), st.booleans())
def test_weighted_rounds_converge_with_every_bucket_owned_and_no_move_left(
    case: tuple[int, list[str], dict[int, int], dict[int, str], int], one_snapshot: bool
) -> None:
    buckets, members, weights, owners, seed = case
    owner, _ = settle(
        buckets, members, weights, owners, rng=None if one_snapshot else random.Random(seed)
    )
    assert sorted(owner) == list(range(buckets))
    assert at_rest(owner, weights, members, buckets)
    # and it stays there: a round more changes nothing
    assert settle(buckets, members, weights, owner)[1] == 0


@settings(max_examples=100, deadline=None)
@given(weighted())
def test_every_move_lowers_the_sum_of_squared_loads(
    case: tuple[int, list[str], dict[int, int], dict[int, str], int],
) -> None:
    """The convergence argument: a move gives `b` from a member of load H to the least
    loaded L only when H - w(b) > L + margin, so H² + L² falls by 2·w(b)·(H - L - w(b))."""
    buckets, members, weights, owners, _ = case
    load = loads(owners, weights, members)
    slack = margin(weights, buckets, len(members))
    move = best_move(owners, load, weights, slack)
    if move is None:
        return
    giver, b = move
    receiver = min((m for m in members if m != giver), key=lambda m: load[m])
    after = dict(load)
    after[giver] -= weights[b]
    after[receiver] += weights[b]
    drop = sum(v * v for v in load.values()) - sum(v * v for v in after.values())
    assert owners[b] == giver and drop >= 2 * weights[b] * (slack + 1)


@settings(max_examples=100, deadline=None)
@given(weighted(), st.randoms())
def test_the_weighted_decision_does_not_depend_on_input_order(
    case: tuple[int, list[str], dict[int, int], dict[int, str], int], rnd: random.Random
) -> None:
    buckets, members, weights, owners, _ = case
    seen_members = {m: Seen(m, 0.0, DURATION) for m in members}
    leases = {b: Seen(h, 0.0, DURATION) for b, h in owners.items()}
    for identity in members:
        held = [b for b, h in owners.items() if h == identity]
        first = rebalance(identity, buckets, seen_members, leases, held=held, weights=weights)

        def shuffled(d: dict) -> dict:  # type: ignore[type-arg]
            items = list(d.items())
            rnd.shuffle(items)
            return dict(items)

        again = rebalance(
            identity,
            buckets,
            shuffled(seen_members),
            shuffled(leases),
            held=rnd.sample(held, len(held)),
            weights=shuffled(weights),
        )
        assert first == again


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 70), st.integers(1, 6), st.integers(1, 50), st.integers(0, 2**32), st.booleans()
)
def test_equal_weights_share_by_count_as_before(
    buckets: int, count: int, weight: int, seed: int, one_snapshot: bool
) -> None:
    """Whatever the one weight, the buckets end within one of each other: at most
    ⌈buckets / members⌉ each, the fair share of a count-based split."""
    members = [f"r{i}" for i in range(count)]
    weights = dict.fromkeys(range(buckets), weight)
    rng = random.Random(seed)
    start = {b: rng.choice(members) for b in range(buckets) if rng.random() < 0.5}
    owner, _ = settle(buckets, members, weights, start, rng=None if one_snapshot else rng)
    counts = [list(owner.values()).count(m) for m in members]
    assert sorted(owner) == list(range(buckets))
    assert max(counts) <= fair_share(buckets, count)
    assert max(counts) - min(counts) <= 1


def test_margin_is_none_for_equal_weights_and_a_few_namespaces_otherwise() -> None:
    assert margin({}, 64, 4) == 0
    assert margin(dict.fromkeys(range(64), 7), 64, 2) < 7
    assert margin(bucket_weights(TEAMS, 64), 64, 4) == 7


def test_team_names_fill_ten_buckets() -> None:
    weights = bucket_weights(TEAMS, 64)
    assert sum(1 for w in weights.values() if w > 1) == 10
    assert sum(weights.values()) == 1064


@pytest.mark.parametrize(
    ("replicas", "low", "high"),
    # 10 buckets of 90 to 110 namespaces cannot split finer than this: 3 replicas hold 4, 3
    # and 3 of them, 4 replicas 3, 3, 2 and 2
    [(2, 0.45, 0.55), (3, 0.25, 0.42), (4, 0.15, 0.35)],
)
@pytest.mark.parametrize("start", ["fresh", "by count"])
def test_team_namespaces_are_shared_by_weight(
    replicas: int, low: float, high: float, start: str
) -> None:
    """`team-0` … `team-999` fill 10 of 64 buckets. Shared by count, one of 4 replicas
    could hold 7 of those 10; by weight each holds its part of the namespaces, whether
    the replicas start together or first split by count (weights not known yet)."""
    members = [f"kerf-reconciler-{i}" for i in range(replicas)]
    weights = bucket_weights(TEAMS, 64)
    begin = {b: members[b % replicas] for b in range(64)} if start == "by count" else {}
    owner, taken = settle(64, members, weights, begin)
    shares = {
        m: (v - sum(1 for h in owner.values() if h == m)) / 1000
        for m, v in loads(owner, weights, members).items()
    }
    print(f"{replicas} replicas, {start}: {taken} rounds, namespace shares {shares}")
    assert all(low <= s <= high for s in shares.values()), shares


def test_a_bucket_free_past_the_patience_is_claimed_even_by_replicas_that_weigh_otherwise() -> None:
    """Each replica weighs the other's bucket heavier (one has not listed the Namespaces
    yet): each leaves the free bucket to the other, until it has been free that long."""
    members = {m: Seen(m, 0.0, DURATION) for m in ("a", "b")}
    leases = {1: Seen("a", 0.0, DURATION), 2: Seen("b", 0.0, DURATION), 0: Seen("", 5.0, 1.0)}
    a_weights, b_weights = {1: 10, 2: 1}, {1: 1, 2: 10}
    assert rebalance("a", 3, members, leases, weights=a_weights, patience_s=15).claim == ()
    assert rebalance("b", 3, members, leases, weights=b_weights, patience_s=15).claim == ()
    leases[0] = Seen("", 15.0, 1.0)
    assert rebalance("a", 3, members, leases, weights=a_weights, patience_s=15).claim == (0,)
    assert rebalance("b", 3, members, leases, weights=b_weights, patience_s=15).claim == (0,)
    # an expired Lease is free from the end of its duration
    leases[0] = Seen("gone", DURATION + 14.0, DURATION)
    assert rebalance("a", 3, members, leases, weights=a_weights, patience_s=15).claim == ()
