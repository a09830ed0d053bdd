"""Shards: which replica works which namespaces (the pure model; the Leases are
`app.kube.shardleases`).

The key is a namespace, so a workload, its pods, its recommendation record and its
rollback state land together. Its 64-bit FNV-1a hash falls in one of `buckets`
contiguous ranges of the hash space, bucket `i` holding `[i*2^64/buckets,
(i+1)*2^64/buckets)`: the shape of 1.36's `shardRange` over `metadata.namespace`, so a
bucket maps onto a server-side shard selector unchanged.

Each bucket has a Lease; each replica renews a member Lease. From what it observed of
them (holder, and how long each Lease has gone unchanged by its own monotonic clock, as
client-go's leader election does), a replica claims free or expired buckets up to its
fair share, ⌈buckets / live members⌉, and releases those it holds above it. It prefers
buckets by a hash of (identity, bucket), so replicas starting together reach for
different buckets instead of all racing for bucket 00; a race is still safe (the Lease
update names the version it read, one writer wins).
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
    #: buckets it holds above its fair share, to give up
    release: tuple[int, ...]
    #: what it holds and keeps renewing
    keep: tuple[int, ...]
    fair_share: int
    members: int


def _preference(identity: str, bucket: int) -> int:
    return fnv1a64(f"{identity}/{bucket}".encode())


def rebalance(
    identity: str,
    buckets: int,
    members: Mapping[str, Seen],
    bucket_leases: Mapping[int, Seen],
    *,
    held: Iterable[int] = (),
) -> Rebalance:
    """Decide which buckets `identity` claims and releases.

    `members`: member Leases by member identity; `bucket_leases`: bucket Leases by
    bucket (a missing one is free); `held`: buckets this replica holds by its own account
    (its renewals), whatever was observed. The live members and this replica share the
    buckets; this replica keeps the buckets it holds with the lowest preference rank up
    to its fair share, and claims the free ones it prefers most to fill it."""
    live = {name for name, seen in members.items() if seen.live} | {identity}
    share = fair_share(buckets, len(live))
    mine = {b for b in held if 0 <= b < buckets} | {
        b for b, seen in bucket_leases.items() if seen.holder == identity and 0 <= b < buckets
    }
    ranked = sorted(mine, key=lambda b: (_preference(identity, b), b))
    keep, release = ranked[:share], ranked[share:]
    free = [
        b
        for b in range(buckets)
        if b not in mine and ((seen := bucket_leases.get(b)) is None or not seen.live)
    ]
    free.sort(key=lambda b: (_preference(identity, b), b))
    claim = free[: max(0, share - len(keep))]
    return Rebalance(
        claim=tuple(claim),
        release=tuple(sorted(release)),
        keep=tuple(sorted(keep)),
        fair_share=share,
        members=len(live),
    )
