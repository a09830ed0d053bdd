"""Leader election on a `coordination.k8s.io/v1` Lease (client-go's algorithm).

The holder renews `renewTime` every `retry_s`. It leads only while its last successful
renewal was *sent* less than `renew_deadline_s` ago, on the monotonic clock: a process
resumed after a pause (SIGSTOP, a frozen VM) sees at once that time has passed and stops
before it writes anything, because every write asks `leading()` first (`write_fence`).

A candidate takes the Lease over once it has seen the same version of it, unchanged, for
`leaseDurationSeconds` by its own monotonic clock (client-go's observed time: no clock
need agree with another), with an update that names the version it read, so two
candidates cannot both win (the loser gets 409). The holder stops at most
`renew_deadline_s` after sending a renewal; nobody can take over until
`leaseDurationSeconds` after seeing it; the gap between the two keeps them apart.

On shutdown the leader releases the Lease (empty holder), so a follower takes over at once
instead of waiting for the duration to run out.

The reconciler and the recommender each elect their leader this way, on a Lease of their own;
sharded (`app.kube.shardleases`), each bucket Lease is one more Lease elected this way, fed the
copy a list of the shard set's Leases read (`step`) instead of a read of its own.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from datetime import datetime
from typing import Any, Protocol

from prometheus_client import Counter

from app.kube.errors import ApiStatusError
from app.kube.leadertimings import LeaderTimings
from app.kube.lease import LeaseClient
from app.kube.reachability import is_outage
from app.kube.transport import Requester
from app.model.apitime import micro_time
from app.model.shards import Seen
from app.runtime.clock import Clock, utc_now

#: The terms (by Lease name) a unit of work began under, set by a service around it (a
#: reconciler pass): its writes pass the fence only in those terms. A replica paused in
#: the middle of it, whose Lease another replica held and released meanwhile, may hold
#: the Lease again by the time the rest is sent: decided in a term that ended, it is not.
WORK_TERMS: ContextVar[dict[str, int] | None] = ContextVar("kerf_work_terms", default=None)


#: The annotations a write of a Lease carries, given the Lease as read (None: absent);
#: None: none (an update replaces the Lease's annotations).
Annotate = Callable[[Mapping[str, Any] | None], Mapping[str, str] | None]


class NotLeading(Exception):
    """A write was not sent: this replica does not hold the leader Lease (or has not
    renewed it within the renew deadline). Its work is dropped, not retried: the leader
    decides again from fresh state."""


class Fence(Protocol):
    """Called with the resource (and the namespace of the workload it is for, when it is
    for one) just before a write is sent; raises NotLeading to refuse it."""

    def __call__(self, resource: str, namespace: str | None = None) -> None: ...


class Answered(Protocol):
    """Called with the resource (and namespace, as the fence was) once a write sent
    through the fence has its answer (or failed)."""

    def __call__(self, resource: str, namespace: str | None = None) -> None: ...


class LeaderElector:
    """Holds or waits for the Lease. `leading()` says whether this replica may write now;
    `on_change` hears every change of that."""

    def __init__(
        self,
        requester: Requester,
        namespace: str,
        identity: str,
        *,
        name: str,
        logger: logging.Logger | None = None,
        timings: LeaderTimings | None = None,
        clock: Clock = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_change: Callable[[bool], None] = lambda leading: None,
        labels: dict[str, str] | None = None,
        changes_logged_at: int = logging.INFO,
        may_acquire: Callable[[], Awaitable[bool]] | None = None,
        annotations: Annotate | None = None,
    ) -> None:
        self._lease = LeaseClient(requester, namespace, name, labels)
        #: the annotations each write of the Lease carries, given the Lease as read
        self._annotate = annotations or (lambda lease: None)
        self._log = logger or logging.getLogger("kerf.leader")
        self.namespace = namespace
        self.identity = identity
        self.name = name
        self.timings = timings or LeaderTimings()
        self._clock = clock
        self._monotonic = monotonic
        self._sleep = sleep
        self._on_change = on_change
        #: asked before taking the Lease (not before renewing it): False holds off
        self._may_acquire = may_acquire
        #: the level "became the leader" is logged at (losing it: a level above)
        self._changes_level = changes_logged_at
        self.is_leader = False
        self.elected = asyncio.Event()
        #: counts the terms this replica has held the Lease (`WORK_TERMS`)
        self.term = 0
        #: monotonic time the last successful renewal was sent
        self._renew_sent: float | None = None
        #: the Lease version last seen, and the monotonic time it was first seen
        self._observed: tuple[str, float] | None = None

    async def run(self) -> None:
        """Try to acquire, then renew, every `retry_s` until cancelled."""
        while True:
            await self.attempt()
            await self._sleep(self.timings.retry_s)

    async def attempt(self) -> None:
        """One try to acquire or renew the Lease as read now; failures are logged."""
        try:
            # A renewal that hangs must not outlive the deadline it is meant to meet
            # (asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel
            # that lands as the renewal finishes, and the loop would never stop).
            async with asyncio.timeout(self.timings.renew_deadline_s):
                await self.step(await self._lease.get())
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # An API server that cannot be reached is said once for the process
            # (app/kube/reachability.py), not every retry period.
            level = logging.DEBUG if is_outage(exc) else logging.WARNING
            self._log.log(level, "leader election (%s): %s: %s", self.name, type(exc).__name__, exc)
        self.leading()

    def leading(self) -> bool:
        """This replica holds the Lease and renewed it within the renew deadline. Past the
        deadline it steps down here and now (whoever asks first, the renewal loop or a
        write), before anything else runs."""
        if not self.is_leader:
            return False
        if self._fresh():
            return True
        self._set(False)
        return False

    def _fresh(self) -> bool:
        sent = self._renew_sent
        return sent is not None and self._monotonic() - sent < self.timings.renew_deadline_s

    def _set(self, leading: bool, *, released: bool = False) -> None:
        if leading == self.is_leader:
            return
        self.is_leader = leading
        fields = {"fields": {"identity": self.identity, "lease": self.name}}
        if leading:
            self.term += 1
            self.elected.set()
            self._log.log(self._changes_level, "became the leader", extra=fields)
        else:
            self.elected.clear()
            if released:
                self._log.log(self._changes_level, "released the leader Lease", extra=fields)
            else:
                self._log.log(self._changes_level + 10, "lost the leader Lease", extra=fields)
        self._on_change(leading)

    def observe(self, lease: dict[str, Any] | None) -> Seen | None:
        """Note the Lease as read (None: absent): its holder, and how long its version has
        gone unchanged by this replica's monotonic clock."""
        if lease is None:
            return None
        now = self._monotonic()
        version = str(lease["metadata"].get("resourceVersion") or "")
        if self._observed is None or self._observed[0] != version:
            self._observed = (version, now)
        spec = lease.get("spec") or {}
        duration = float(spec.get("leaseDurationSeconds") or self.timings.duration_s)
        return Seen(str(spec.get("holderIdentity") or ""), now - self._observed[1], duration)

    async def step(self, lease: dict[str, Any] | None) -> None:
        """Acquire or renew the Lease as read (None: it does not exist): taken over only
        once another holder's version has gone unchanged for its duration."""
        # Past its renew deadline (a pause) this replica has stopped leading, whatever the
        # Lease says now: a Lease found free, or still its own, and claimed again is a new
        # term, and `on_change` hears the loss before the claim.
        self.leading()
        seen = self.observe(lease)
        if seen is not None and seen.holder and seen.holder != self.identity and seen.live:
            self._set(False)
            return
        acquire = lease is None or seen is None or seen.holder != self.identity
        if acquire and self._may_acquire is not None and not await self._may_acquire():
            self._set(False)
            return
        await self._write(lease, acquire=acquire)

    def _spec(self, lease: dict[str, Any] | None, now: datetime, acquire: bool) -> dict[str, Any]:
        spec = dict((lease or {}).get("spec") or {})
        spec.update(
            holderIdentity=self.identity,
            # Rounded up: a follower never waits less than this replica's own duration.
            leaseDurationSeconds=max(1, math.ceil(self.timings.duration_s)),
            renewTime=micro_time(now),
        )
        if acquire:
            spec["acquireTime"] = micro_time(now)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if lease else 0)
        return spec

    async def _write(self, lease: dict[str, Any] | None, acquire: bool) -> None:
        sent = self._monotonic()
        spec = self._spec(lease, self._clock(), acquire)
        try:
            notes = self._annotate(lease)
            if lease is None:
                answer = await self._lease.create(spec, notes)
            else:
                version = lease["metadata"]["resourceVersion"]
                answer = await self._lease.update(version, spec, notes)
        except ApiStatusError as exc:
            if exc.code == 409:  # another candidate wrote first
                self._set(False)
                return
            raise
        self._renew_sent = sent
        self._observed = (str((answer.get("metadata") or {}).get("resourceVersion") or ""), sent)
        # An answer that took longer than the deadline renews nothing this replica may use.
        self._set(self._fresh())

    async def release(
        self, answered: Callable[[], Awaitable[None]] | None = None, *, delete: bool = False
    ) -> None:
        """Give the Lease up (graceful shutdown, or a bucket above a fair share): empty
        holder, so others take it now. `answered`, when given, is awaited once this
        replica has stopped writing and before the Lease goes: the writes it sent before
        are answered before another holder can write. `delete`: delete it instead, at
        the version read (a shard member's Lease, named after a pod that will not
        return)."""
        if not self.is_leader:
            return
        self._set(False, released=True)
        try:
            if answered is not None:
                await answered()
            lease = await self._lease.get()
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            if delete:
                await self._lease.delete(lease["metadata"]["resourceVersion"])
                return
            spec = dict(lease.get("spec") or {})
            spec.update(
                holderIdentity="", leaseDurationSeconds=1, renewTime=micro_time(self._clock())
            )
            version = lease["metadata"]["resourceVersion"]
            await self._lease.update(version, spec, self._annotate(lease))
        except Exception as exc:  # the Lease then simply expires
            self._log.warning("releasing the Lease failed: %s: %s", type(exc).__name__, exc)


#: The Lease a write for a namespace (None: for no workload) needs: its elector, and the
#: `bucket` label a write refused or outlived is counted under ("" for the leader Lease).
Guard = Callable[[str | None], tuple[LeaderElector, str]]


def _guard(leader: LeaderElector | Guard) -> Guard:
    if isinstance(leader, LeaderElector):
        return lambda namespace: (leader, "")
    return leader


def write_fence(leader: LeaderElector | Guard, withheld: Counter) -> Fence:
    """The check every write of a service passes just before it is sent: refused
    (`NotLeading`, counted in `withheld` by resource and bucket) unless this replica holds
    the Lease the write needs (the leader's, or sharded the bucket's of its namespace)
    and renewed it within its renew deadline, in the term its work began under
    (`WORK_TERMS`, when set)."""
    guard = _guard(leader)

    def fence(resource: str, namespace: str | None = None) -> None:
        elector, bucket = guard(namespace)
        if not elector.leading():
            withheld.labels(resource, bucket).inc()
            raise NotLeading(f"not sent: {elector.identity} does not hold the Lease {elector.name}")
        terms = WORK_TERMS.get()
        if terms is not None and terms.get(elector.name, elector.term) != elector.term:
            withheld.labels(resource, bucket).inc()
            raise NotLeading(
                f"not sent: {elector.identity} holds the Lease {elector.name} again, in a "
                "term begun after this work"
            )

    return fence


def answer_check(
    leader: LeaderElector | Guard, outlived: Counter, logger: logging.Logger
) -> Answered:
    """Called once a write that passed the fence has its answer: a replica that no longer
    holds the Lease by then sent it across a pause or a hang after the check (the window
    the fence leaves, one write per pass under way), counted in `outlived` by resource and
    logged."""
    guard = _guard(leader)

    def answered(resource: str, namespace: str | None = None) -> None:
        elector, _ = guard(namespace)
        if not elector.leading():
            outlived.labels(resource).inc()
            logger.warning(
                "a write sent as the leader was answered after the Lease was lost",
                extra={
                    "fields": {
                        "identity": elector.identity,
                        "resource": resource,
                        "lease": elector.name,
                    }
                },
            )

    return answered
