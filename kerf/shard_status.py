"""`kerf status --shards`: which replica holds which buckets, from the shard sets' Leases
(`app.model.shards`), as table rows.

A bucket Lease is held while it names a holder and its `renewTime` is within its
`leaseDurationSeconds` of now; expired when it names a holder that stopped renewing (the
other replicas claim it once they have seen it unchanged that long); free when released
(no holder) or not created yet. The bucket count is the one the Leases' label
`kerf.dev/shard-buckets` says (a Lease written before the label: the highest bucket
seen). While Leases of two counts are in use (`--shards` changing in a rolling update)
each count's rows are shown apart, the set named with its count. The command reads the times
the holders wrote against its own clock: a skewed clock shifts the ages, not who holds
what.

The single leader's Lease, `kerf-<set>` without shard labels (`--shards 1`, or a version
before sharding), is a row of its own: while it is live a sharded replica claims nothing.
It is shown when live, or when its set has no shard Lease.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.kube.reachability import format_seconds
from app.model.shards import (
    BUCKET,
    MEMBER,
    SHARD_ROLE_LABEL,
    SHARD_SET_LABEL,
    buckets_of,
    leader_lease_name,
    namespaces_by_bucket,
)
from app.model.workloads import parse_time

HEADER = ["SET", "REPLICA", "BUCKETS", "RANGES", "RENEWED"]
#: with the namespaces in each replica's buckets, the weight they are shared by
WEIGHED_HEADER = ["SET", "REPLICA", "BUCKETS", "NAMESPACES", "RANGES", "RENEWED"]
#: the shard sets, in the order they are printed
SHARD_SETS = ("reconciler", "recommender")
FREE = "(free)"
EXPIRED = "(expired)"
NONE = "-"
#: the role of the single leader's Lease (no shard labels)
LEADER = "leader"
ONE_LEADER = "(one leader)"


@dataclass(frozen=True, slots=True)
class ShardLease:
    """One Lease of a shard set, as the table needs it."""

    shard_set: str
    role: str
    name: str
    holder: str
    #: seconds since its last renewal by now's clock; None when never renewed
    age_s: float | None
    duration_s: float
    #: the bucket count its label says (None: no label, or the single leader's Lease)
    buckets: int | None = None

    @property
    def live(self) -> bool:
        """Names a holder who renewed it within its duration."""
        return bool(self.holder) and self.age_s is not None and self.age_s < self.duration_s


def shard_lease(lease: Mapping[str, Any], now: datetime) -> ShardLease | None:
    """A Lease as a shard set's member, bucket or single leader; None when it is none of
    them (another set or role, or another Lease)."""
    meta = lease.get("metadata") or {}
    labels = meta.get("labels") or {}
    shard_set, role = labels.get(SHARD_SET_LABEL), labels.get(SHARD_ROLE_LABEL)
    if shard_set is None and role is None:
        leaders = {leader_lease_name(s): s for s in SHARD_SETS}
        shard_set, role = leaders.get(str(meta.get("name"))), LEADER
    if shard_set not in SHARD_SETS or role not in (MEMBER, BUCKET, LEADER):
        return None
    spec = lease.get("spec") or {}
    renewed = parse_time(spec.get("renewTime") or spec.get("acquireTime"))
    return ShardLease(
        shard_set=str(shard_set),
        role=str(role),
        name=str(meta.get("name") or ""),
        holder=str(spec.get("holderIdentity") or ""),
        age_s=None if renewed is None else max(0.0, (now - renewed).total_seconds()),
        duration_s=float(spec.get("leaseDurationSeconds") or 0),
        buckets=buckets_of(labels),
    )


def bucket_index(lease: ShardLease) -> int | None:
    """The bucket a bucket Lease stands for: `kerf-<set>-bucket-NN` is NN; `kerf-<set>`
    (one bucket: the single leader's Lease) is 0; None for another name."""
    if lease.name == leader_lease_name(lease.shard_set):
        return 0
    prefix = f"kerf-{lease.shard_set}-bucket-"
    suffix = lease.name.removeprefix(prefix)
    if suffix != lease.name and suffix.isdigit():
        return int(suffix)
    return None


def compact(buckets: Iterable[int]) -> str:
    """Bucket numbers as runs: `00-15,32,40-41`; `-` for none."""
    runs: list[list[int]] = []
    for b in sorted(set(buckets)):
        if runs and b == runs[-1][1] + 1:
            runs[-1][1] = b
        else:
            runs.append([b, b])
    return ",".join(f"{a:02d}" if a == z else f"{a:02d}-{z:02d}" for a, z in runs) or NONE


def _renewed(lease: ShardLease | None) -> str:
    """How long ago a member (or the single leader) renewed its Lease, and whether it
    has left (released it) or expired."""
    if lease is None or lease.age_s is None:
        return NONE
    age = f"{format_seconds(lease.age_s)} ago"
    if not lease.holder:
        return f"{age}, left"
    return age if lease.live else f"{age}, expired"


def set_rows(
    shard_set: str, leases: Iterable[ShardLease], namespaces: Iterable[str] | None = None
) -> list[list[str]]:
    """The rows of one shard set: the single leader's Lease (when live, or alone); a
    replica per line (the members that have not left, and any holder of a live bucket
    without a member Lease), by identity; then the expired and the free buckets, when
    there are any. No row when the set has no Lease. With `namespaces` (every
    Namespace's name) each row says how many are in its buckets, after BUCKETS."""
    leader: ShardLease | None = None
    by_count: dict[int | None, list[ShardLease]] = {}
    for lease in leases:
        if lease.shard_set != shard_set:
            continue
        if lease.role == LEADER:
            leader = lease
        # A member that left (released its Lease: a version that did not delete it on
        # SIGTERM) holds nothing, and is not shown.
        elif lease.holder or lease.role == BUCKET:
            by_count.setdefault(lease.buckets, []).append(lease)
    rows = []
    if leader is not None and (leader.live or not by_count):
        holder = leader.holder or "(none)"
        row = [shard_set, holder, "all", ONE_LEADER, _renewed(leader)]
        if namespaces is not None:
            row.insert(3, str(len(list(namespaces))))
        rows.append(row)
    # The counts in use: of a running member or a live bucket. Another count's released
    # or expired bucket Leases stay behind (they are never deleted) and are not shown.
    in_use = [
        count
        for count, group in by_count.items()
        if any(lease.live or lease.role == MEMBER for lease in group)
    ]
    shown = sorted(in_use or by_count, key=lambda count: count or 0)
    for count in shown:
        name = shard_set if len(shown) == 1 else f"{shard_set} ({count or '?'} buckets)"
        rows += _count_rows(name, count, by_count[count], namespaces)
    return rows


def _count_rows(
    name: str, count: int | None, leases: list[ShardLease], namespaces: Iterable[str] | None
) -> list[list[str]]:
    """The rows of one bucket count's members and buckets (None: unlabelled Leases, the
    count inferred from the highest bucket); with `namespaces`, each row's namespaces
    after BUCKETS."""
    members: dict[str, ShardLease] = {}
    buckets: dict[int, ShardLease] = {}
    for lease in leases:
        if lease.role == MEMBER:
            members[lease.holder] = lease
        elif (index := bucket_index(lease)) is not None:
            buckets[index] = lease
    rows = []
    held: dict[str, list[int]] = {}
    expired: list[int] = []
    for index, lease in buckets.items():
        if lease.live:
            held.setdefault(lease.holder, []).append(index)
        elif lease.holder:
            expired.append(index)
    total = count or max(buckets, default=-1) + 1
    free = [b for b in range(total) if b not in buckets or not buckets[b].holder]
    per_bucket = None if namespaces is None else namespaces_by_bucket(namespaces, max(1, total))

    def row(who: str, numbers: list[int], renewed: str) -> list[str]:
        weight = [] if per_bucket is None else [str(sum(per_bucket[b] for b in numbers))]
        return [name, who, str(len(numbers)), *weight, compact(numbers), renewed]

    for identity in sorted(set(members) | set(held)):
        rows.append(row(identity, held.get(identity, []), _renewed(members.get(identity))))
    if expired:
        rows.append(row(EXPIRED, expired, NONE))
    if free:
        rows.append(row(FREE, free, NONE))
    return rows


def shard_rows(
    leases: Iterable[Mapping[str, Any]], now: datetime, namespaces: Iterable[str] | None = None
) -> list[list[str]]:
    """The table under HEADER for `leases` (Lease objects as the API returns them; other
    Leases are left out): the reconciler's set, then the recommender's. With
    `namespaces`, under WEIGHED_HEADER."""
    parsed = [s for lease in leases if (s := shard_lease(lease, now)) is not None]
    names = None if namespaces is None else list(namespaces)
    return [row for shard_set in SHARD_SETS for row in set_rows(shard_set, parsed, names)]
