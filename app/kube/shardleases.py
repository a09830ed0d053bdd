"""A replica's part of a shard set (`app.model.shards`), on Leases in kerf's namespace.

Every `retry_s` a replica lists its shard set's Leases (one request, by label), renews its
member Lease, and decides (`app.model.shards.rebalance`) from what it observed which bucket
Leases it keeps, claims and releases. Each bucket Lease is elected by a
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
nothing, so the old leader and the new shards never write side by side.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import Counter, Gauge

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
    Seen,
    bucket_lease_name,
    bucket_of,
    member_lease_name,
    rebalance,
    shard_labels,
)
from app.runtime.clock import Clock, utc_now

#: what a shard set tells its service: buckets gained, buckets lost
OnChange = Callable[[frozenset[int], frozenset[int]], None]


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
        logger: logging.Logger | None = None,
        timings: LeaderTimings | None = None,
        clock: Clock = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_change: OnChange = lambda gained, lost: None,
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
        self.on_change = on_change
        self._listing = LeaseClient(requester, namespace, "")
        self.member = self._elector(member_lease_name(shard_set, identity), MEMBER)
        #: the single leader's Lease of a previous version (watched, never written)
        self._legacy = self._elector(bucket_lease_name(shard_set, 0, 1), MEMBER)
        self.electors = [
            self._elector(bucket_lease_name(shard_set, b, buckets), BUCKET, b)
            for b in range(buckets)
        ]
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
        #: set once a round has claimed (the first only announces the member): the
        #: buckets this replica starts with are held
        self.settled = asyncio.Event()

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
            labels=shard_labels(self.shard_set, role),
            # one line per rebalance (`_publish`), not one per Lease
            changes_logged_at=logging.DEBUG,
        )

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
            level = logging.DEBUG if is_outage(exc) else logging.WARNING
            self._log.log(level, "shard leases: %s: %s", type(exc).__name__, exc)
        finally:
            self._in_round = False
        self._publish()

    async def _round(self) -> None:
        selector = f"{SHARD_SET_LABEL}={self.shard_set}"
        listed = {
            str(lease["metadata"]["name"]): lease for lease in await self._listing.list(selector)
        }
        members: dict[str, Seen] = {}
        for name, lease in listed.items():
            labels = lease["metadata"].get("labels") or {}
            if labels.get(SHARD_ROLE_LABEL) != MEMBER or name == self.member.name:
                continue
            watcher = self._others.get(name) or self._watcher(name)
            seen = watcher.observe(lease)
            if seen is not None and seen.holder:
                members[seen.holder] = seen
        for gone in set(self._others) - set(listed):
            del self._others[gone]
        observed = {
            b: seen
            for b, elector in enumerate(self.electors)
            if (seen := elector.observe(listed.get(elector.name))) is not None
        }
        held = [b for b, elector in enumerate(self.electors) if elector.is_leader]
        plan = rebalance(self.identity, self.buckets, members, observed, held=held)
        self.members, self.fair_share = plan.members, plan.fair_share
        # The first round only announces this member: replicas started together then
        # see one another before any claims, instead of the first taking every bucket.
        first, self._announced = not self._announced, True
        claim = () if first or await self._old_leader_lives(plan.claim) else plan.claim
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
        if not first:
            self.settled.set()

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
        held = self.held()
        # A bucket lost and claimed again within one round is told lost and gained: its
        # Lease had another term, in which another replica may have written.
        dropped, self._dropped = self._dropped & self._published, set()
        lost = (self._published - held) | dropped
        gained = (held - self._published) | (dropped & held)
        if not gained and not lost:
            return
        self._published = held
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
                    "gained": sorted(gained),
                    "lost": sorted(lost),
                    "members": self.members,
                    "fair_share": self.fair_share,
                }
            },
        )
        self.on_change(frozenset(gained), frozenset(lost))

    async def release(self) -> None:
        """Give every bucket and the member Lease up (graceful shutdown); the rounds stop
        first, so no renewal races the releases."""
        if self._runner is not None and self._runner is not asyncio.current_task():
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        self._in_round = True
        try:
            await asyncio.gather(*(self._release(b) for b in self.held()))
            await self.member.release()
        finally:
            self._in_round = False
        self._publish()
