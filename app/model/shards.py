"""Shards: which replica works which namespaces (the pure model; the Leases are
`app.kube.shardleases`).

The key is a namespace, so a workload, its pods, its recommendation record and its
rollback state land together. Its 64-bit FNV-1a hash falls in one of `buckets`
contiguous ranges of the hash space, bucket `i` holding `[i*2^64/buckets,
(i+1)*2^64/buckets)`: the shape of 1.36's `shardRange` over `metadata.namespace`, so a
bucket maps onto a server-side shard selector unchanged.

Each bucket has a Lease; each replica renews a member Lease. From what it observed of
them (holder, and how long each Lease has gone unchanged by its own monotonic clock, as
client-go's leader election does), a replica decides what it claims and releases
(`rebalance`). Buckets are shared by weight, not by count: names that differ only at
their end (`team-0` … `team-999`) share a few buckets, so equal counts of buckets are
not equal work. A bucket weighs its namespaces plus one (an empty bucket still needs a
holder), and every replica weighs every bucket alike, since every replica keeps every
Namespace. From one snapshot every replica therefore computes the same plan:

- each free bucket (never created, released, or expired) goes, heaviest first, to the
  live member holding the least weight (ties by a hash of (identity, bucket)); each
  replica claims the ones that go to it, so a free bucket always has a claimer;
- then buckets move (`plan_moves`): the heaviest member that holds a bucket `b` with
  `load - w(b) > least + margin` releases the one that lowers the sum of squared loads
  most, and the next round's plan gives it to the least loaded. A round plans such moves
  one after another, all to one receiver and only as many as the next round's claims
  give it, so they are single moves in a row. Each lowers that sum by at least
  `2·w(b)·(margin + 1)`, so the moves stop; at rest no member could give any of its
  buckets to the least loaded without ending above it (plus the margin). With equal
  weights that is counts within one of each other, the old fair share
  ⌈buckets / members⌉. The margin, about 2/buckets of a member's average namespaces (0
  when there are none), keeps a namespace created or deleted from moving a bucket back
  and forth.

If replicas weigh buckets differently for a while (one's Namespace list is refused or
slow), a free bucket might go to no one: any replica claims one that has stayed free for
`patience_s`. A race is safe either way (the Lease update names the version it read,
one writer wins).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

DEFAULT_BUCKETS = 64
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1

#: the Leases' labels: which service's shard set, and member or bucket
SHARD_SET_LABEL = "kerf.dev/shard-set"
SHARD_ROLE_LABEL = "kerf.dev/shard-role"
MEMBER = "member"
BUCKET = "bucket"
#: how many buckets the replica that wrote a Lease divides the hash space into: bucket
#: `i` of one count is another range than bucket `i` of another
BUCKETS_LABEL = "kerf.dev/shard-buckets"
#: the bucket whose holder writes what belongs to no namespace (docs/decisions.md)
CLUSTER_BUCKET = 0
#: a member Lease seen unchanged for this many of its durations is deleted (by bucket
#: 00's holder): its replica is long gone, and `kerf status --shards` showed it expired
#: for a while (docs/decisions.md)
STALE_MEMBER_DURATIONS = 10
#: at most this many stale member Leases are deleted a round
STALE_MEMBERS_PER_ROUND = 4


def fnv1a64(data: bytes) -> int:
    """The 64-bit FNV-1a hash of `data`."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


def bucket_of(namespace: str, buckets: int) -> int:
    """The bucket of a namespace: its hash's contiguous range out of `buckets`."""
    return (fnv1a64(namespace.encode()) * buckets) >> 64


def bucket_range(bucket: int, buckets: int) -> tuple[int, int]:
    """The hashes of a bucket, `[start, end)` (what a `shardRange` selector names)."""
    return -(-(bucket << 64) // buckets), -(-((bucket + 1) << 64) // buckets)


def namespace_of(path: str) -> str | None:
    """The namespace a REST path is in, as the API server scopes it; None when it names
    a cluster-scoped object. Sharded, the fence asks for that namespace's bucket."""
    _, found, rest = path.partition("/namespaces/")
    return rest.split("/", 1)[0] if found and "/" in rest else None


def fair_share(buckets: int, members: int) -> int:
    """How many buckets one of `members` replicas holds at most: ⌈buckets / members⌉."""
    return math.ceil(buckets / max(1, members))


def member_lease_name(shard_set: str, identity: str) -> str:
    """The member Lease a replica renews."""
    return f"kerf-{shard_set}-member-{identity}"


def leader_lease_name(shard_set: str) -> str:
    """The single leader's Lease of a shard set (`--shards 1`, or a version before sharding)."""
    return f"kerf-{shard_set}"


def bucket_lease_name(shard_set: str, bucket: int, buckets: int) -> str:
    """A bucket's Lease. One bucket keeps the single leader's name, so an upgrade meets the
    Lease the previous version held."""
    if buckets == 1:
        return leader_lease_name(shard_set)
    return f"kerf-{shard_set}-bucket-{bucket:02d}"


def shard_labels(shard_set: str, role: str, buckets: int | None = None) -> dict[str, str]:
    """The labels of a shard set's Leases (`role`: MEMBER or BUCKET), written by a replica
    of `buckets` buckets (None: without the count)."""
    labels = {SHARD_SET_LABEL: shard_set, SHARD_ROLE_LABEL: role}
    if buckets is not None:
        labels[BUCKETS_LABEL] = str(buckets)
    return labels


def buckets_of(labels: Mapping[str, str]) -> int | None:
    """The bucket count a shard Lease's labels say; None when they say none (a Lease
    written before the count was labelled) or nonsense."""
    value = labels.get(BUCKETS_LABEL, "")
    return int(value) if value.isdigit() and int(value) > 0 else None


@dataclass(frozen=True, slots=True)
class Seen:
    """One Lease as observed: its holder ("" when released), for how long its current
    version has gone unchanged (seconds, by the observer's monotonic clock), and its
    `leaseDurationSeconds`."""

    holder: str
    unchanged_s: float
    duration_s: float

    @property
    def live(self) -> bool:
        """Held, and renewed within its duration as far as the observer can tell."""
        return bool(self.holder) and self.unchanged_s < self.duration_s

    def stale(self, duration_s: float) -> bool:
        """Unchanged for STALE_MEMBER_DURATIONS durations (its own or `duration_s`,
        whichever is longer: a released Lease says 1 s): a member Lease that may go."""
        return self.unchanged_s >= STALE_MEMBER_DURATIONS * max(self.duration_s, duration_s)


@dataclass(frozen=True, slots=True)
class Rebalance:
    """What one replica does with the bucket Leases this round."""

    #: buckets to try to take (free, released or expired), best first
    claim: tuple[int, ...]
    #: buckets it gives up (its part of the round's moves)
    release: tuple[int, ...]
    #: what it holds and keeps renewing
    keep: tuple[int, ...]
    #: ⌈buckets / live members⌉: what each would hold were all buckets alike
    fair_share: int
    members: int
    #: nothing left to claim or move in the plan, as far as this replica can tell
    settled: bool = False


def _preference(identity: str, bucket: int) -> int:
    return fnv1a64(f"{identity}/{bucket}".encode())


def namespaces_by_bucket(namespaces: Iterable[str], buckets: int) -> dict[int, int]:
    """How many of `namespaces` each bucket holds (every bucket, 0 for none)."""
    counts = dict.fromkeys(range(buckets), 0)
    for namespace in namespaces:
        counts[bucket_of(namespace, buckets)] += 1
    return counts


def weights_of(occupancy: Mapping[int, int]) -> dict[int, int]:
    """Each bucket's weight from its namespaces: plus one (an empty bucket still needs a
    holder)."""
    return {b: n + 1 for b, n in occupancy.items()}


def bucket_weights(namespaces: Iterable[str], buckets: int) -> dict[int, int]:
    """Every bucket's weight: its namespaces plus one."""
    return weights_of(namespaces_by_bucket(namespaces, buckets))


def margin(weights: Mapping[int, int], buckets: int, members: int) -> int:
    """How much lighter than the least loaded member a move must leave its giver:
    ⌊2·(total weight − buckets) / (members · buckets)⌋, 0 with equal weights of 1, and
    below the weight itself with any equal weights (so they still share by count)."""
    extra = sum(max(1, weights.get(b, 1)) for b in range(buckets)) - buckets
    return (2 * extra) // (max(1, members) * buckets)


def _free_for(seen: Seen | None) -> float:
    """How long a bucket not held live has been free as observed (0: not known)."""
    if seen is None:
        return 0.0
    return seen.unchanged_s if not seen.holder else seen.unchanged_s - seen.duration_s


def _gain(giver: str, bucket: int, gap: int, weights: Mapping[int, int]) -> tuple[int, int, int]:
    """A move's rank, best first: how much it lowers the sum of squared loads
    (w·(gap - w), halved), then preference and number."""
    w = max(1, weights.get(bucket, 1))
    return (-w * (gap - w), _preference(giver, bucket), bucket)


def best_move(
    owner: Mapping[int, str],
    load: Mapping[str, int],
    weights: Mapping[int, int],
    slack: int,
) -> tuple[str, int] | None:
    """The plan's one move from these holdings, (giver, bucket), or None at rest: the
    heaviest member (ties by identity) that holds a bucket `b` with
    `load - w(b) > least other + slack` gives the one that lowers the sum of squared
    loads most (`w(b)·(load - least - w(b))`; ties by preference, then number)."""
    if len(load) < 2:
        return None
    for giver in sorted(load, key=lambda m: (-load[m], m)):
        least = min(v for m, v in load.items() if m != giver)
        gap = load[giver] - least
        movable = [
            b
            for b, m in owner.items()
            if m == giver and load[giver] - max(1, weights.get(b, 1)) > least + slack
        ]
        if movable:
            return giver, min(movable, key=lambda b: _gain(giver, b, gap, weights))
    return None


def assign(free: Iterable[int], load: dict[str, int], weights: Mapping[int, int]) -> dict[int, str]:
    """Free buckets to members, heaviest first, each to the least loaded (ties by
    preference, then identity); `load` (every live member's) is updated."""
    given = {}
    for b in sorted(free, key=lambda b: (-max(1, weights.get(b, 1)), b)):
        taker = min(load, key=lambda m: (load[m], _preference(m, b), m))
        load[taker] += max(1, weights.get(b, 1))
        given[b] = taker
    return given


def plan_moves(
    owner: Mapping[int, str], load: Mapping[str, int], weights: Mapping[int, int], slack: int
) -> dict[int, str]:
    """This round's moves from the projected holdings, bucket to giver: `best_move` one
    after another, all to one receiver, and only while the next round's `assign` of the
    moved buckets (from the loads with them released) gives every one to that receiver.
    So a round's moves are single moves made in a row, each lowering the sum of squared
    loads, and the next round's claims carry them out as planned."""
    owned, after = dict(owner), dict(load)
    moves: dict[int, str] = {}
    while (move := best_move(owned, after, weights, slack)) is not None:
        giver, b = move
        trial = {**moves, b: giver}
        base = dict(load)
        for moved, g in trial.items():
            base[g] -= max(1, weights.get(moved, 1))
        if len(set(assign(trial, base, weights).values())) > 1:
            break
        moves, after = trial, base
        del owned[b]
    return moves


def at_rest(
    owner: Mapping[int, str], weights: Mapping[int, int], members: Iterable[str], buckets: int
) -> bool:
    """Every bucket held by one of `members`, and no move left: where the rounds stop
    when every replica sees these holdings and weights."""
    load = dict.fromkeys(members, 0)
    if sorted(owner) != list(range(buckets)) or any(m not in load for m in owner.values()):
        return False
    for b, m in owner.items():
        load[m] += max(1, weights.get(b, 1))
    return best_move(owner, load, weights, margin(weights, buckets, len(load))) is None


def rebalance(
    identity: str,
    buckets: int,
    members: Mapping[str, Seen],
    bucket_leases: Mapping[int, Seen],
    *,
    held: Iterable[int] = (),
    weights: Mapping[int, int] | None = None,
    patience_s: float = math.inf,
) -> Rebalance:
    """Decide which buckets `identity` claims and releases.

    `members`: member Leases by member identity; `bucket_leases`: bucket Leases by
    bucket (a missing one is free); `held`: buckets this replica holds by its own account
    (its renewals), whatever was observed; `weights`: each bucket's weight (missing: 1);
    `patience_s`: how long a bucket may stay free before any replica claims it. The plan
    is the module's: free buckets to the least loaded, then the round's moves."""
    weights = weights or {}

    def w(b: int) -> int:
        return max(1, weights.get(b, 1))

    live = {name for name, seen in members.items() if seen.live} | {identity}
    mine = {b for b in held if 0 <= b < buckets} | {
        b for b, seen in bucket_leases.items() if seen.holder == identity and 0 <= b < buckets
    }
    owner = dict.fromkeys(mine, identity)
    taken = set(mine)
    for b, seen in bucket_leases.items():
        if 0 <= b < buckets and b not in mine and seen.live:
            taken.add(b)
            if seen.holder in live:
                owner[b] = seen.holder
    load = dict.fromkeys(live, 0)
    for b, m in owner.items():
        load[m] += w(b)
    free = [b for b in range(buckets) if b not in taken]
    claim = [b for b, m in assign(free, load, weights).items() if m == identity]
    if not claim:
        # weighed otherwise elsewhere, a free bucket might go to no one: one at a time
        overdue = [b for b in free if _free_for(bucket_leases.get(b)) >= patience_s]
        overdue.sort(key=lambda b: (_preference(identity, b), b))
        claim = overdue[:1]
    moves = plan_moves(owner, load, weights, margin(weights, buckets, len(live)))
    release = tuple(sorted(b for b, giver in moves.items() if giver == identity))
    keep = sorted(mine - set(release))
    return Rebalance(
        claim=tuple(claim),
        release=release,
        keep=tuple(keep),
        fair_share=fair_share(buckets, len(live)),
        members=len(live),
        settled=not free and not moves,
    )
