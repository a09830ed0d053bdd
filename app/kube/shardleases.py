"""A replica's part of a shard set (`app.model.shards`), on Leases in kerf's namespace.

Every `retry_s` a replica lists its shard set's Leases (one request, by label), renews its
member Lease, and decides (`app.model.shards.rebalance`) from what it observed which bucket
Leases it keeps, claims and releases, each bucket weighed by its namespaces plus one (the
names come from `namespaces`, the view's Namespaces, which every replica keeps whole). The
claims wait until `weighing` says the Namespaces are listed (a Lease duration at most;
refused, the buckets are weighed alike): replicas started together then split by weight
at their first claims, not by count and then by moves. Each bucket Lease is elected by a
`app.kube.leader.LeaderElector` of its own, fed the listed copy: the same observed-time
takeover, update naming the version read (one claimant wins, the others get 409),
renew deadline on the monotonic clock and release on shutdown as the single leader's
Lease. `holds(bucket)` is that elector's `leading()`, so a write for a bucket is fenced
exactly as a leader's write is (`fence`).

`on_change(gained, lost)` is told once per round what the round changed, and at once
when a bucket is lost between rounds (a fence found its renew deadline passed). A bucket
lost and claimed again within one round (a replica resumed after a pause past its Lease,
finding it released) is in both: another replica may have held it meanwhile.

An upgrade from a single leader meets its Lease, `kerf-<set>`, held by a replica of the
previous version: while that Lease is live under another holder, this replica claims
nothing, so the old leader and the new shards never write side by side. In the same way,
every Lease says the bucket count of the replica that wrote it (`BUCKETS_LABEL`): while a
live Lease of the set says another count (`--shards` changed in a rolling update), this
replica claims nothing and does not count that Lease's replica as a member; a single
leader (`--shards 1`) does not take its Lease while a live one exists
(`ShardedReplicas`).

A shard set may give its bucket Leases a note (`note`, an annotation): each holder
`publish`es a value per bucket it holds, which its renewals carry (no write of its own),
and every replica reads every bucket's back from the Leases it lists (`notes`). A claim
or a release keeps the value the Lease carries, until the next holder publishes its own;
a value written by a replica of another bucket count is neither read nor kept. The
reconciler's say each bucket's ClusterRollbackPolicy counters
(`reconciler.policystatus`).

Member Leases do not pile up: a replica deletes its own on shutdown, and the holder of
bucket 00 deletes those it has seen unchanged for STALE_MEMBER_DURATIONS durations (a few
a round), each at the version it read, so a member that came back is never deleted.
Bucket Leases are never deleted: they are the fence's record.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from prometheus_client import Counter, Gauge

from app.kube.errors import ApiStatusError
from app.kube.leader import Answered, Fence, LeaderElector, answer_check, write_fence
from app.kube.leadertimings import LeaderTimings
from app.kube.lease import LeaseClient
from app.kube.reachability import is_outage
from app.kube.transport import Requester
from app.model.shards import (
    BUCKET,
    CLUSTER_BUCKET,
    MEMBER,
    SHARD_ROLE_LABEL,
    SHARD_SET_LABEL,
    STALE_MEMBERS_PER_ROUND,
    Seen,
    bucket_lease_name,
    bucket_of,
    buckets_of,
    member_lease_name,
    namespaces_by_bucket,
    rebalance,
    shard_labels,
    weights_of,
)
from app.runtime.clock import Clock, utc_now

#: what a shard set tells its service: buckets gained, buckets lost
OnChange = Callable[[frozenset[int], frozenset[int]], None]


class Weighing(enum.Enum):
    """Whether the Namespaces the buckets are weighed by are in (`ShardedFeed.weighing`)."""

    LISTED = "listed"
    #: not listed yet: the first claims wait (a Lease duration at most)
    PENDING = "pending"
    #: they will not come (the list is refused): the buckets are weighed alike
    UNAVAILABLE = "unavailable"


class ShardLeases:
    """This replica's member Lease and bucket Leases of one shard set."""

    def __init__(
        self,
        requester: Requester,
        namespace: str,
        identity: str,
        *,
        shard_set: str,
        buckets: int,
        held_gauge: Gauge,
        rebalances: Counter,
        mismatch_gauge: Gauge,
        logger: logging.Logger | None = None,
        timings: LeaderTimings | None = None,
        clock: Clock = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_change: OnChange = lambda gained, lost: None,
        namespaces: Callable[[], Iterable[str]] = lambda: (),
        namespaces_gauge: Gauge | None = None,
        weighing: Callable[[], Weighing] = lambda: Weighing.LISTED,
        note: str | None = None,
    ) -> None:
        self._requester = requester
        self.namespace = namespace
        self.identity = identity
        self.shard_set = shard_set
        self.buckets = buckets
        self.timings = timings or LeaderTimings()
        self._log = logger or logging.getLogger("kerf.shards")
        self._clock = clock
        self._monotonic = monotonic
        self._sleep = sleep
        self._held_gauge = held_gauge
        self._rebalances = rebalances
        self._mismatch_gauge = mismatch_gauge
        self.on_change = on_change
        #: every namespace's name (the view's Namespaces): each bucket weighs its
        #: namespaces plus one, alike on every replica
        self._namespaces = namespaces
        self._namespaces_gauge = namespaces_gauge
        #: whether `namespaces` is whole yet: the first claims wait for it, so replicas
        #: started together split by weight at once instead of by count and then move
        #: buckets, a relist of the per-workload kinds each
        self.weighing = weighing
        #: when the first claiming round found the Namespaces not listed (monotonic)
        self._unweighed_since: float | None = None
        #: the buckets are weighed by the view's Namespaces (False: alike, for now)
        self._weighed = False
        #: the wait for the Namespaces is over (listed, refused or timed out)
        self._weigh_waited = False
        #: namespaces by bucket, as last counted
        self.occupancy: dict[int, int] = {}
        #: when each bucket whose Lease was not listed was first found so (monotonic)
        self._absent_since: dict[int, float] = {}
        #: the annotation each bucket Lease carries (None: none): a value per bucket its
        #: holder `publish`es, which every replica reads back from the listed Leases
        self._note = note
        #: this replica's values, for the buckets it holds
        self._notes: dict[int, str] = {}
        #: each bucket Lease's value as last listed
        self._listed_notes: dict[int, str] = {}
        self._listing = LeaseClient(requester, namespace, "")
        self.member = self._elector(member_lease_name(shard_set, identity), MEMBER)
        #: the single leader's Lease of a previous version (watched, never written)
        self._legacy = self._elector(bucket_lease_name(shard_set, 0, 1), MEMBER)
        self.electors = [
            self._elector(bucket_lease_name(shard_set, b, buckets), BUCKET, b)
            for b in range(buckets)
        ]
        self._bucket_names = {elector.name for elector in self.electors}
        #: live Leases of the set that say another bucket count, as last seen: while there
        #: is one, this replica claims nothing
        self.mismatched: dict[str, int | None] = {}
        #: other members' Leases by name, each watched for change by an elector of its own
        #: that never writes (its observed time is the member's liveness)
        self._others: dict[str, LeaderElector] = {}
        #: what `on_change` was last told this replica holds
        self._published: frozenset[int] = frozenset()
        self._in_round = False
        #: the task running the rounds (`run`)
        self._runner: asyncio.Task[Any] | None = None
        #: the member Lease has been renewed once (claims start in the next round)
        self._announced = False
        #: buckets given up on purpose since the last publication (not counted as lost)
        self._released: set[int] = set()
        #: buckets whose Lease this replica stopped holding since the last publication
        self._dropped: set[int] = set()
        #: writes sent through `writes`' fence and not answered yet, by bucket
        self._in_flight: dict[int, int] = {}
        self._idle: dict[int, asyncio.Event] = {}
        #: the last rebalance, for the log and `kerf status`
        self.members = 1
        self.fair_share = buckets
        #: the last round found nothing to claim or move
        self.at_rest = False
        #: set once a round has claimed (the first only announces the member): the
        #: buckets this replica starts with are held
        self.settled = asyncio.Event()
        #: what the last round failed with (None once one succeeds): a one-shot run says it
        self.last_error: BaseException | None = None
        #: a one-shot run's rounds log nothing: its last line says what went wrong
        self.quiet = False

    def _elector(self, name: str, role: str, bucket: int | None = None) -> LeaderElector:
        return LeaderElector(
            self._requester,
            self.namespace,
            self.identity,
            name=name,
            logger=self._log,
            timings=self.timings,
            clock=self._clock,
            monotonic=self._monotonic,
            sleep=self._sleep,
            on_change=(
                (lambda leading: None)
                if bucket is None
                else lambda leading: self._bucket_changed(bucket, leading)
            ),
            labels=shard_labels(self.shard_set, role, self.buckets),
            # one line per rebalance (`_publish`), not one per Lease
            changes_logged_at=logging.DEBUG,
            annotations=(
                None
                if bucket is None or self._note is None
                else lambda lease: self._annotations(bucket, lease)
            ),
        )

    # ----------------------------------------------------------------- notes

    def publish(self, notes: Mapping[int, str]) -> None:
        """The values of the note the held buckets' Leases carry from their next renewal
        on (a bucket not given keeps the value its Lease carries)."""
        self._notes = {b: value for b, value in notes.items() if self.holds(b)}

    def notes(self) -> dict[int, str]:
        """Each bucket's note: this replica's own for the buckets it holds, else as its
        Lease was last listed (written by a replica of this bucket count)."""
        own = {b: value for b, value in self._notes.items() if self.holds(b)}
        return {**self._listed_notes, **own}

    def _annotations(self, bucket: int, lease: Mapping[str, Any] | None) -> dict[str, str] | None:
        """A bucket Lease's note as this replica writes it: its own on a renewal; on a
        claim or a release the one the Lease carries, if a replica of this bucket count
        wrote it, so the value stays until the next holder publishes its own."""
        assert self._note is not None
        value = self._notes.get(bucket) if self.electors[bucket].is_leader else None
        if value is None and lease is not None:
            value = self._listed_note(lease)
        return {self._note: value} if value is not None else None

    def _listed_note(self, lease: Mapping[str, Any]) -> str | None:
        metadata = lease.get("metadata") or {}
        if self._note is None or buckets_of(metadata.get("labels") or {}) != self.buckets:
            return None
        value = (metadata.get("annotations") or {}).get(self._note)
        return value if isinstance(value, str) else None

    # ----------------------------------------------------------------- asking

    def holds(self, bucket: int) -> bool:
        """This replica holds the bucket's Lease, renewed within its renew deadline."""
        return self.electors[bucket].leading()

    def held(self) -> frozenset[int]:
        """The buckets this replica holds now."""
        return frozenset(b for b in range(self.buckets) if self.holds(b))

    def bucket_for(self, namespace: str | None) -> int:
        """The bucket a write is for: its namespace's, or for no workload the cluster
        bucket (docs/decisions.md)."""
        return CLUSTER_BUCKET if namespace is None else bucket_of(namespace, self.buckets)

    def owns(self, namespace: str | None) -> bool:
        """This replica may write for the namespace (None: for no workload) now."""
        return self.holds(self.bucket_for(namespace))

    def guard(self, namespace: str | None) -> tuple[LeaderElector, str]:
        """The elector a write for the namespace passes, and its `bucket` label."""
        bucket = self.bucket_for(namespace)
        return self.electors[bucket], f"{bucket:02d}"

    def fence(self, withheld: Counter) -> Fence:
        """`app.kube.leader.write_fence` on the bucket of each write's namespace."""
        return write_fence(self.guard, withheld)

    def writes(
        self,
        withheld: Counter,
        outlived: Counter,
        logger: logging.Logger,
        *,
        cluster: bool = False,
    ) -> tuple[Fence, Answered]:
        """The fence and the answer check of a writer, on the bucket of each write's
        namespace (`cluster`: on bucket 00 whatever the namespace, for the writes one
        replica makes for the whole cluster, docs/decisions.md). The writes between the
        two are counted per bucket: a bucket given up is released only once they are
        answered, so its next holder never writes beside one of them."""

        def which(namespace: str | None) -> int:
            return CLUSTER_BUCKET if cluster else self.bucket_for(namespace)

        def guard(namespace: str | None) -> tuple[LeaderElector, str]:
            bucket = which(namespace)
            return self.electors[bucket], f"{bucket:02d}"

        check = write_fence(guard, withheld)
        after = answer_check(guard, outlived, logger)

        def fence(resource: str, namespace: str | None = None) -> None:
            check(resource, namespace)
            bucket = which(namespace)
            self._in_flight[bucket] = self._in_flight.get(bucket, 0) + 1
            self._idle.setdefault(bucket, asyncio.Event()).clear()

        def answered(resource: str, namespace: str | None = None) -> None:
            bucket = which(namespace)
            self._in_flight[bucket] -= 1
            if not self._in_flight[bucket]:
                self._idle[bucket].set()
            after(resource, namespace)

        return fence, answered

    async def _answered(self, bucket: int) -> None:
        """Wait until no write sent for the bucket is still without its answer."""
        if self._in_flight.get(bucket):
            await self._idle[bucket].wait()

    async def _release(self, bucket: int) -> None:
        self._released.add(bucket)
        await self.electors[bucket].release(lambda: self._answered(bucket))

    # ----------------------------------------------------------------- running

    async def run(self) -> None:
        """A round every `retry_s` until cancelled."""
        self._runner = asyncio.current_task()
        while True:
            await self.round()
            await self._sleep(self.timings.retry_s)

    async def round(self) -> None:
        """List, renew the member Lease, rebalance, renew and claim: failures logged."""
        self._in_round = True
        try:
            async with asyncio.timeout(self.timings.renew_deadline_s):
                await self._round()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.last_error = exc
            level = logging.DEBUG if self.quiet or is_outage(exc) else logging.WARNING
            self._log.log(level, "shard leases: %s: %s", type(exc).__name__, exc)
        else:
            self.last_error = None
        finally:
            self._in_round = False
        self._publish()

    async def _round(self) -> None:
        selector = f"{SHARD_SET_LABEL}={self.shard_set}"
        listed = {
            str(lease["metadata"]["name"]): lease for lease in await self._listing.list(selector)
        }
        members: dict[str, Seen] = {}
        # member Leases long unchanged, at the version read
        stale: list[tuple[str, str]] = []
        mismatched: dict[str, int | None] = {}
        observed: dict[int, Seen] = {}
        notes: dict[int, str] = {}
        for b, elector in enumerate(self.electors):
            listed_lease = listed.get(elector.name)
            if listed_lease is not None and (seen := elector.observe(listed_lease)) is not None:
                observed[b] = seen
                self._match(elector.name, listed_lease, seen, mismatched)
                if (note := self._listed_note(listed_lease)) is not None:
                    notes[b] = note
        self._listed_notes = notes
        for name, lease in listed.items():
            if name == self.member.name or name in self._bucket_names:
                continue
            seen = (self._others.get(name) or self._watcher(name)).observe(lease)
            if seen is None:
                continue
            same = self._match(name, lease, seen, mismatched)
            if (lease["metadata"].get("labels") or {}).get(SHARD_ROLE_LABEL) != MEMBER:
                continue
            if seen.stale(self.timings.duration_s):
                stale.append((name, str(lease["metadata"].get("resourceVersion") or "")))
            elif seen.holder and same:
                members[seen.holder] = seen
        for gone in set(self._others) - set(listed):
            del self._others[gone]
        self._mismatch(mismatched)
        now = self._monotonic()
        for b in range(self.buckets):
            if b in observed:
                self._absent_since.pop(b, None)
            else:
                # never created: free since this replica first found it so
                since = self._absent_since.setdefault(b, now)
                observed[b] = Seen("", now - since, 0.0)
        # The first round only announces this member: replicas started together then
        # see one another before any claims, instead of the first taking every bucket.
        first, self._announced = not self._announced, True
        unweighed = not self._weigh() and not first
        weights = self._weights()
        held = [b for b, elector in enumerate(self.electors) if elector.is_leader]
        plan = rebalance(
            self.identity,
            self.buckets,
            members,
            observed,
            held=held,
            weights=weights,
            patience_s=self.timings.duration_s,
        )
        self.members, self.fair_share = plan.members, plan.fair_share
        self.at_rest = plan.settled
        paused = first or unweighed or bool(self.mismatched)
        claim = () if paused or await self._old_leader_lives(plan.claim) else plan.claim
        # One step for every Lease this replica writes; a release waits for its bucket's
        # writes under way.
        await asyncio.gather(
            self._step(self.member, listed.get(self.member.name)),
            *(self._release(b) for b in plan.release),
            *(
                self._step(self.electors[b], listed.get(self.electors[b].name))
                for b in (*plan.keep, *claim)
            ),
        )
        if not first and not unweighed:
            self.settled.set()
        if stale and self.holds(CLUSTER_BUCKET):
            await asyncio.gather(*(self._sweep(*s) for s in stale[:STALE_MEMBERS_PER_ROUND]))

    def _weigh(self) -> bool:
        """Whether this round may claim as far as the weights go: the Namespaces are
        listed, or will not be soon (refused, or not in after a Lease duration, about
        when the others would claim a bucket left free anyway). Then the buckets are
        weighed alike until they are listed, said once."""
        fields = {"identity": self.identity, "shard_set": self.shard_set}
        state = self.weighing()
        if not self._weighed and state is Weighing.LISTED:
            self._weighed = True
            if self._weigh_waited:
                self._log.info(
                    "weighing the buckets by their namespaces: the Namespaces are listed",
                    extra={"fields": fields},
                )
        if self._weighed or self._weigh_waited:
            return True
        now = self._monotonic()
        if self._unweighed_since is None:
            self._unweighed_since = now
        if state is Weighing.PENDING and now - self._unweighed_since < self.timings.duration_s:
            return False
        self._weigh_waited = True
        self._log.warning(
            "weighing every bucket alike: the Namespaces are not listed (%s)",
            "refused" if state is Weighing.UNAVAILABLE else "not in after the Lease duration",
            extra={"fields": fields},
        )
        return True

    def _weights(self) -> dict[int, int]:
        """Each bucket's weight: its namespaces, as the view has them, plus one; alike
        (one) until the Namespaces are listed, not by a list's first pages."""
        names = self._namespaces() if self._weighed else ()
        self.occupancy = namespaces_by_bucket(names, self.buckets)
        return weights_of(self.occupancy)

    def namespaces_held(self) -> int:
        """The namespaces of the buckets this replica holds, as last counted."""
        return sum(self.occupancy.get(b, 0) for b in self.held())

    def _match(
        self, name: str, lease: dict[str, Any], seen: Seen, mismatched: dict[str, int | None]
    ) -> bool:
        """Whether a listed Lease says this replica's bucket count; a live one of another
        count (or none: written before the count was labelled) held by another replica
        goes into `mismatched`."""
        count = buckets_of(lease["metadata"].get("labels") or {})
        if count == self.buckets:
            return True
        if seen.live and seen.holder != self.identity:
            mismatched[name] = count
        return False

    def _mismatch(self, mismatched: dict[str, int | None]) -> None:
        """Note the live Leases of another bucket count: said once when they appear and
        once when they are gone, not every round."""
        before, self.mismatched = self.mismatched, mismatched
        self._mismatch_gauge.set(1 if mismatched else 0)
        fields = {"identity": self.identity, "shard_set": self.shard_set, "buckets": self.buckets}
        if mismatched and not before:
            counts = sorted({str(c) if c else "unlabelled" for c in mismatched.values()})
            self._log.warning(
                "claiming no bucket: live Leases of the shard set say another bucket count "
                "(--shards changed while replicas of the old count run)",
                extra={
                    "fields": {
                        **fields,
                        "other_counts": counts,
                        "leases": sorted(mismatched)[:5],
                    }
                },
            )
        elif before and not mismatched:
            self._log.info(
                "claiming again: no live Lease of another bucket count", extra={"fields": fields}
            )

    async def _sweep(self, name: str, version: str) -> None:
        """Delete a stale member Lease at the version read: a member that renewed it since
        (it came back) keeps it, with a 409."""
        try:
            await LeaseClient(self._requester, self.namespace, name).delete(version)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # 404: another replica deleted it; 409: its member renewed it
            if not (isinstance(exc, ApiStatusError) and exc.code in (404, 409)):
                level = logging.DEBUG if is_outage(exc) else logging.WARNING
                self._log.log(level, "lease %s: %s: %s", name, type(exc).__name__, exc)
            return
        self._others.pop(name, None)
        self._log.info(
            "deleted a stale member Lease",
            extra={"fields": {"identity": self.identity, "lease": name}},
        )

    async def _old_leader_lives(self, claims: tuple[int, ...]) -> bool:
        """A single leader of a previous version holds its Lease (read only when there
        is something to claim: once claimed, the buckets are renewed as they are)."""
        if not claims:
            return False
        lease = await LeaseClient(self._requester, self.namespace, self._legacy.name).get()
        seen = self._legacy.observe(lease)
        return seen is not None and seen.live and seen.holder != self.identity

    def _watcher(self, name: str) -> LeaderElector:
        watcher = self._elector(name, MEMBER)
        self._others[name] = watcher
        return watcher

    async def _step(self, elector: LeaderElector, lease: dict[str, Any] | None) -> None:
        try:
            await elector.step(lease)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            level = logging.DEBUG if is_outage(exc) else logging.WARNING
            self._log.log(level, "lease %s: %s: %s", elector.name, type(exc).__name__, exc)
        elector.leading()

    def _bucket_changed(self, bucket: int, leading: bool) -> None:
        if not leading:
            self._dropped.add(bucket)
        if not self._in_round:
            self._publish()

    def _publish(self) -> None:
        if self._namespaces_gauge is not None:
            # namespaces come and go without a bucket changing hands: set every round
            self._namespaces_gauge.set(self.namespaces_held())
        held = self.held()
        # A bucket lost and claimed again within one round is told lost and gained: its
        # Lease had another term, in which another replica may have written.
        dropped, self._dropped = self._dropped & self._published, set()
        lost = (self._published - held) | dropped
        gained = (held - self._published) | (dropped & held)
        if not gained and not lost:
            return
        self._published = held
        for bucket in lost:
            # a value counted while this replica held the bucket: its next term counts anew
            self._notes.pop(bucket, None)
        released = lost & self._released
        self._released -= lost
        self._rebalances.labels("claimed").inc(len(gained))
        self._rebalances.labels("released").inc(len(released))
        self._rebalances.labels("lost").inc(len(lost - released))
        self._held_gauge.set(len(held))
        self._log.info(
            "buckets changed",
            extra={
                "fields": {
                    "identity": self.identity,
                    "shard_set": self.shard_set,
                    "held": len(held),
                    "namespaces": self.namespaces_held(),
                    "gained": sorted(gained),
                    "lost": sorted(lost),
                    "members": self.members,
                    "fair_share": self.fair_share,
                }
            },
        )
        self.on_change(frozenset(gained), frozenset(lost))

    async def release(self) -> None:
        """Give every bucket up and delete the member Lease (graceful shutdown); the
        rounds stop first, so no renewal races the releases."""
        if self._runner is not None and self._runner is not asyncio.current_task():
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        self._in_round = True
        try:
            await asyncio.gather(*(self._release(b) for b in self.held()))
            await self.member.release(delete=True)
        finally:
            self._in_round = False
        self._publish()


class ShardedReplicas:
    """What a single leader (`--shards 1`) asks before it takes its Lease: that no
    sharded replica of its set still holds a live member or bucket Lease (`--shards`
    lowered to 1 in a rolling update), live as a takeover judges it: seen unchanged for
    less than its duration by this replica's monotonic clock. Said once in the log when
    they appear and once when they are gone, and in `mismatch_gauge`."""

    def __init__(
        self,
        requester: Requester,
        namespace: str,
        identity: str,
        *,
        shard_set: str,
        mismatch_gauge: Gauge,
        logger: logging.Logger | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._listing = LeaseClient(requester, namespace, "")
        self.identity = identity
        self.shard_set = shard_set
        self._gauge = mismatch_gauge
        self._log = logger or logging.getLogger("kerf.shards")
        self._monotonic = monotonic
        #: each listed Lease's version and the monotonic time it was first seen
        self._seen: dict[str, tuple[str, float]] = {}
        self.live: list[str] = []

    async def absent(self) -> bool:
        """List the set's Leases (one request): True when none is live under another
        holder."""
        leases = await self._listing.list(f"{SHARD_SET_LABEL}={self.shard_set}")
        now = self._monotonic()
        seen: dict[str, tuple[str, float]] = {}
        live = []
        for lease in leases:
            name = str(lease["metadata"]["name"])
            version = str(lease["metadata"].get("resourceVersion") or "")
            before = self._seen.get(name)
            seen[name] = before if before is not None and before[0] == version else (version, now)
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            duration = float(spec.get("leaseDurationSeconds") or 0)
            if holder and holder != self.identity and now - seen[name][1] < duration:
                live.append(name)
        self._seen = seen
        was, self.live = self.live, sorted(live)
        self._gauge.set(1 if live else 0)
        fields = {"identity": self.identity, "shard_set": self.shard_set, "buckets": 1}
        if live and not was:
            self._log.warning(
                "not taking the leader Lease: sharded replicas of another bucket count hold "
                "live Leases (--shards changed while they run)",
                extra={"fields": {**fields, "leases": self.live[:5]}},
            )
        elif was and not live:
            self._log.info(
                "taking the leader Lease: no live Lease of another bucket count",
                extra={"fields": fields},
            )
        return not live
