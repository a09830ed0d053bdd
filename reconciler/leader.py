"""Leader election on a `coordination.k8s.io/v1` Lease (client-go's algorithm).

The holder renews `renewTime` every `retry_s`; a candidate takes the Lease over once
`renewTime + leaseDurationSeconds` has passed, with an update that names the version it
read, so two candidates cannot both win (the loser gets 409). On shutdown the leader
releases the Lease (empty holder), so a follower takes over at once instead of waiting
for the duration to run out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from app.clock import Clock, utc_now
from app.informer import ApiStatusError
from app.workloads import parse_time
from reconciler.api import Transport, object_path
from webhook.lease import micro_time

logger = logging.getLogger("kerf.reconciler.leader")

LEASE_NAME = "kerf-reconciler"
LEASE_DURATION_S = 10.0
RETRY_S = 2.0


class LeaderElector:
    """Holds or waits for the Lease; `is_leader` says which, `lost` is set when a held
    Lease could not be renewed in time (the service stops writing at once)."""

    def __init__(
        self,
        transport: Transport,
        namespace: str,
        identity: str,
        *,
        name: str = LEASE_NAME,
        duration_s: float = LEASE_DURATION_S,
        retry_s: float = RETRY_S,
        clock: Clock = utc_now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_change: Callable[[bool], None] = lambda leading: None,
    ) -> None:
        self._t = transport
        self.namespace = namespace
        self.identity = identity
        self.name = name
        self.duration_s = duration_s
        self.retry_s = retry_s
        self._clock = clock
        self._sleep = sleep
        self._on_change = on_change
        self._path = object_path("coordination.k8s.io/v1", "Lease", namespace, name)
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.is_leader = False
        self.elected = asyncio.Event()
        self._renewed_at: datetime | None = None

    async def run(self) -> None:
        """Try to acquire, then renew, every `retry_s` until cancelled."""
        while True:
            try:
                await self._try()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("leader election: %s: %s", type(exc).__name__, exc)
            self._check_expiry()
            await self._sleep(self.retry_s)

    def _check_expiry(self) -> None:
        # A leader that could not renew for a whole duration must assume someone else leads.
        if (
            self.is_leader
            and self._renewed_at is not None
            and self._clock() - self._renewed_at >= timedelta(seconds=self.duration_s)
        ):
            self._set(False)

    def _set(self, leading: bool, *, released: bool = False) -> None:
        if leading == self.is_leader:
            return
        self.is_leader = leading
        fields = {"fields": {"identity": self.identity}}
        if leading:
            self.elected.set()
            logger.info("became the leader", extra=fields)
        else:
            self.elected.clear()
            if released:
                logger.info("released the leader Lease", extra=fields)
            else:
                logger.warning("lost the leader Lease", extra=fields)
        self._on_change(leading)

    async def _try(self) -> None:
        now = self._clock()
        try:
            lease = await self._t.request("get", "leases", "GET", self._path)
        except ApiStatusError as exc:
            if exc.code != 404:
                raise
            await self._write(None, now, acquire=True)
            return
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        renewed = parse_time(spec.get("renewTime"))
        duration = float(spec.get("leaseDurationSeconds") or self.duration_s)
        held_by_other = holder and holder != self.identity and renewed is not None
        if held_by_other and now < renewed + timedelta(seconds=duration):  # type: ignore[operator]
            self._set(False)
            return
        await self._write(lease, now, acquire=holder != self.identity)

    def _body(self, lease: dict[str, Any] | None, now: datetime, acquire: bool) -> dict[str, Any]:
        spec = dict((lease or {}).get("spec") or {})
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=max(1, round(self.duration_s)),
            renewTime=micro_time(now),
        )
        if acquire:
            spec["acquireTime"] = micro_time(now)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if lease else 0)
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if lease is not None:
            metadata["resourceVersion"] = lease["metadata"]["resourceVersion"]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": spec,
        }

    async def _write(self, lease: dict[str, Any] | None, now: datetime, acquire: bool) -> None:
        body = self._body(lease, now, acquire)
        try:
            if lease is None:
                await self._t.request("create", "leases", "POST", self._collection, body)
            else:
                await self._t.request("update", "leases", "PUT", self._path, body)
        except ApiStatusError as exc:
            if exc.code == 409:  # another candidate wrote first
                self._set(False)
                return
            raise
        self._renewed_at = now
        self._set(True)

    async def release(self) -> None:
        """Give the Lease up (graceful shutdown): empty holder, so others take it now."""
        if not self.is_leader:
            return
        self._set(False, released=True)
        try:
            lease = await self._t.request("get", "leases", "GET", self._path)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = dict(lease.get("spec") or {})
            spec.update(
                holderIdentity="", leaseDurationSeconds=1, renewTime=micro_time(self._clock())
            )
            body = {**lease, "spec": spec}
            await self._t.request("update", "leases", "PUT", self._path, body)
        except Exception as exc:  # the Lease then simply expires
            logger.warning("releasing the Lease failed: %s: %s", type(exc).__name__, exc)
