"""Sharded reconciler replicas judged from the API server's audit log alone
(`harness.audit`): who held each bucket Lease when, and who wrote for which namespace.

A bucket Lease (`kerf-reconciler-bucket-<NN>` in kerf's namespace) is logged with the
holder each write named (devcluster's audit policy and kubesim log Lease writes at level
Request). Its terms follow from those writes alone: a term begins with the first
successful write naming a holder after a write naming another (or none), and ends at the
next successful write naming anyone else — a release (no holder) or a takeover. A replica
is known by the user its writes carry (a ServiceAccount of its own on the real control
plane, a token of its own on kubesim) and the holder its Lease writes name.

A write belongs to the bucket of its namespace (`app.model.shards.bucket_of`), as the replicas'
fence judges it; a write of a cluster-scoped object to the cluster bucket
(`app.model.shards.CLUSTER_BUCKET`). The cluster bucket's holder also writes the reports about
what every replica keeps (Events and conditions of policies, ConfigMaps, stored Kubex
kinds) wherever those live: a write of anything but a workload's own objects
(`WORKLOAD_RESOURCES`) may come from either holder. `foreign_writes` lists each one sent by a replica that did not hold that bucket when the
server received it: the bucket's holder at that instant is the only replica that may write
for it, so two replicas can never both write a workload within one term."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from harness.audit import AuditEntry

BUCKET_LEASE_PREFIX = "kerf-reconciler-bucket-"
#: Leases carry no workload; the member Leases and the leader Lease are the election's own.
_ELECTION = "leases"
#: What a workload's own writes touch: only its namespace's bucket holder writes these.
WORKLOAD_RESOURCES = frozenset(
    {
        "pods",
        "deployments",
        "statefulsets",
        "daemonsets",
        "replicasets",
        "jobs",
        "cronjobs",
        "rightsizingrecommendations",
        "rollbackpolicies",
    }
)


class AuditMismatch(Exception):
    """The audit log cannot be read as sharded replicas' (one user naming two holders)."""


@dataclass(frozen=True, slots=True)
class Term:
    """One holder's hold of one bucket Lease, as the audit log shows it."""

    bucket: int
    holder: str
    #: when the write that took the Lease was answered: its holder writes only after
    start: datetime
    #: when the server received the write that ended it (None: still held at the log's end)
    end: datetime | None
    #: ended by its holder's release (no holder named), not by another taking it
    released: bool


@dataclass(frozen=True, slots=True)
class ForeignWrite:
    """A write for a workload by a replica that did not hold its bucket at that instant."""

    entry: AuditEntry
    writer: str
    bucket: int
    #: the holder of the bucket when the write was received (None: nobody)
    holder: str | None

    def __str__(self) -> str:
        held = self.holder or "nobody"
        return f"{self.writer} at {self.entry.received.isoformat()}: {self.entry.what} (bucket {self.bucket} held by {held})"


def bucket_lease(name: str) -> int | None:
    """The bucket a Lease's name is for (None: not a bucket Lease)."""
    if not name.startswith(BUCKET_LEASE_PREFIX):
        return None
    suffix = name.removeprefix(BUCKET_LEASE_PREFIX)
    return int(suffix) if suffix.isdigit() else None


def _succeeded(entry: AuditEntry) -> bool:
    return 200 <= entry.code < 300


@dataclass
class ShardAudit:
    """The bucket Lease terms and the replicas' writes of one audit log."""

    entries: Sequence[AuditEntry]
    #: the namespace's bucket (app.model.shards.bucket_of with the replicas' bucket count)
    bucket_of: Callable[[str], int]
    #: kerf's namespace, where the Leases live
    namespace: str = "kerf-system"
    #: the bucket whose holder writes what belongs to no namespace
    cluster_bucket: int = 0

    def __post_init__(self) -> None:
        self.identities = self._identities()
        self.terms = self._terms()

    def _lease_writes(self) -> list[tuple[int, AuditEntry]]:
        writes = []
        for entry in self.entries:
            bucket = bucket_lease(entry.name)
            if (
                entry.resource == "leases"
                and entry.namespace == self.namespace
                and bucket is not None
                and entry.holder is not None
                and _succeeded(entry)
            ):
                writes.append((bucket, entry))
        return writes

    def _identities(self) -> dict[str, str]:
        """Each replica's user → the holder identity its Lease writes name."""
        found: dict[str, str] = {}
        for _, entry in self._lease_writes():
            if not entry.holder:
                continue
            known = found.setdefault(entry.user, entry.holder)
            if known != entry.holder:
                raise AuditMismatch(
                    f"user {entry.user} wrote bucket Leases as both {known} and {entry.holder}: "
                    "each replica needs a user of its own"
                )
        return found

    def _terms(self) -> list[Term]:
        open_terms: dict[int, tuple[str, datetime]] = {}
        terms: list[Term] = []
        for bucket, entry in sorted(self._lease_writes(), key=lambda w: w[1].received):
            holder = entry.holder or ""
            current = open_terms.get(bucket)
            if current is not None and current[0] == holder:
                continue  # a renewal
            if current is not None:
                terms.append(Term(bucket, current[0], current[1], entry.received, not holder))
                del open_terms[bucket]
            if holder:
                open_terms[bucket] = (holder, entry.completed)
        terms += [Term(b, h, start, None, False) for b, (h, start) in open_terms.items()]
        return sorted(terms, key=lambda t: (t.bucket, t.start))

    def holder_at(self, bucket: int, when: datetime) -> str | None:
        """Who held the bucket's Lease at `when` (None: nobody)."""
        for term in self.terms:
            if (
                term.bucket == bucket
                and term.start <= when
                and (term.end is None or when < term.end)
            ):
                return term.holder
        return None

    def holders_at(self, when: datetime) -> dict[int, str]:
        """Every held bucket's holder at `when`."""
        held = {}
        for term in self.terms:
            if term.start <= when and (term.end is None or when < term.end):
                held[term.bucket] = term.holder
        return held

    def workload_writes(self) -> list[tuple[str, int, AuditEntry]]:
        """(replica, bucket, entry) of each write a replica sent but its Lease writes: for
        a namespace, its bucket; for a cluster-scoped object, the cluster bucket."""
        writes = []
        for entry in self.entries:
            writer = self.identities.get(entry.user)
            if writer is None or entry.resource == _ELECTION:
                continue
            namespace = entry.namespace
            bucket = self.bucket_of(namespace) if namespace else self.cluster_bucket
            writes.append((writer, bucket, entry))
        return writes

    def foreign_writes(self, since: datetime | None = None) -> list[ForeignWrite]:
        """The workload writes (received at or after `since`) whose sender did not hold the
        bucket when the server received them."""
        foreign = []
        for writer, bucket, entry in self.workload_writes():
            if since is not None and entry.received < since:
                continue
            holder = self.holder_at(bucket, entry.received)
            if holder != writer and not self._cluster_report(writer, entry):
                foreign.append(ForeignWrite(entry, writer, bucket, holder))
        return foreign

    def _cluster_report(self, writer: str, entry: AuditEntry) -> bool:
        """A report about something every replica keeps, by the cluster bucket's holder."""
        if entry.resource in WORKLOAD_RESOURCES:
            return False
        return self.holder_at(self.cluster_bucket, entry.received) == writer

    def writers_per_term(self) -> dict[Term, set[str]]:
        """Each term's writers of workloads' own objects (a term written by two is a split
        brain)."""
        writers: dict[Term, set[str]] = defaultdict(set)
        by_bucket: dict[int, list[Term]] = defaultdict(list)
        for term in self.terms:
            by_bucket[term.bucket].append(term)
        for writer, bucket, entry in self.workload_writes():
            if entry.resource not in WORKLOAD_RESOURCES:
                continue
            for term in by_bucket[bucket]:
                if term.start <= entry.received and (term.end is None or entry.received < term.end):
                    writers[term].add(writer)
        return dict(writers)

    def unowned_gaps(self, since: datetime | None = None) -> list[tuple[int, float]]:
        """(bucket, seconds) from each release (at or after `since`) to the next term of
        that bucket; a release not yet followed counts up to the last entry logged."""
        last = max((e.received for e in self.entries), default=None)
        gaps = []
        for term in self.terms:
            if not term.released or term.end is None:
                continue
            if since is not None and term.end < since:
                continue
            following = [
                t.start for t in self.terms if t.bucket == term.bucket and t.start >= term.end
            ]
            until = min(following) if following else last
            if until is not None:
                gaps.append((term.bucket, (until - term.end).total_seconds()))
        return gaps

    def taken_over(self, holder: str, at: datetime) -> dict[int, str | None]:
        """The buckets `holder` held at `at`, each with the replica that holds it now
        (None: nobody yet)."""
        now = max((e.received for e in self.entries), default=at)
        return {
            bucket: self.holders_at(now).get(bucket)
            for bucket, held_by in self.holders_at(at).items()
            if held_by == holder
        }

    def writes_per_holder(self) -> dict[str, int]:
        """Workload writes each replica sent within its own terms."""
        counts: dict[str, int] = defaultdict(int)
        for writer, bucket, entry in self.workload_writes():
            if self.holder_at(bucket, entry.received) == writer or self._cluster_report(
                writer, entry
            ):
                counts[writer] += 1
        return dict(counts)


def describe(foreign: Iterable[ForeignWrite], limit: int = 20) -> str:
    """A failure message's list of foreign writes."""
    lines = [str(w) for w in foreign]
    more = f"\n... and {len(lines) - limit} more" if len(lines) > limit else ""
    return "\n".join(lines[:limit]) + more
