"""The webhook's Lease: proof for the reconciler that admission works (SPEC §7).

Every replica renews the one `coordination.k8s.io/v1` Lease `kerf-webhook` in its
namespace every 10 s, but only while it is ready (its view is synced and it serves), so a
fresh renewTime means "some replica can admit pods with their recommendations". The
reconciler does not evict while that Lease is older than `webhookLeaseMaxAge`, because
the replacement pod would start without its recommendation.

Replicas write the same object, so conflicts are expected: a 409 (someone renewed or
created it first) re-reads the Lease and writes again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client

from app.kube.errors import ApiStatusError
from app.kube.lease import WEBHOOK_LEASE, LeaseClient
from app.kube.reachability import is_outage
from app.kube.transport import ApiTransport
from app.model.apitime import micro_time
from app.runtime.clock import Clock, utc_now

logger = logging.getLogger("kerf.webhook.lease")

RENEW_INTERVAL_S = 10.0
#: How often a replica that is not ready yet checks again, so it renews soon after it is.
READY_POLL_S = 1.0
#: Writes tried per renewal when other replicas keep winning the race.
MAX_CONFLICTS = 5


class LeaseConflict(RuntimeError):
    """Every write of one renewal lost a race with another replica."""


class LeaseRenewer:
    """Renews the webhook Lease every `interval_s` while `ready()` holds."""

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        holder: str,
        *,
        name: str = WEBHOOK_LEASE,
        interval_s: float = RENEW_INTERVAL_S,
        ready: Callable[[], bool] = lambda: True,
        clock: Clock = utc_now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._lease = LeaseClient(ApiTransport(api_client), namespace, name)
        self.namespace = namespace
        self.holder = holder
        self.name = name
        self.interval_s = interval_s
        self._ready = ready
        self._clock = clock
        self._sleep = sleep

    async def run(self) -> None:
        """Renew until cancelled; a failed renewal is logged and tried at the next tick."""
        while True:
            if not self._ready():
                await self._sleep(min(READY_POLL_S, self.interval_s))
                continue
            try:
                await self.renew()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # An API server that cannot be reached is said once for the process.
                logger.log(
                    logging.DEBUG if is_outage(exc) else logging.WARNING,
                    "renewing Lease %s/%s failed: %s: %s",
                    self.namespace,
                    self.name,
                    type(exc).__name__,
                    exc,
                )
            await self._sleep(self.interval_s)

    async def renew(self) -> None:
        """Set renewTime to now (creating the Lease when missing)."""
        for _ in range(MAX_CONFLICTS):
            current = await self._lease.get()
            try:
                if current is None:
                    await self._lease.create(self._spec())
                else:
                    # The version it read: a concurrent renewal then gets 409.
                    version = str(current["metadata"]["resourceVersion"])
                    await self._lease.update(version, self._spec())
                return
            except ApiStatusError as exc:
                if exc.code != 409:
                    raise
        raise LeaseConflict(f"Lease {self.namespace}/{self.name}: {MAX_CONFLICTS} conflicts")

    def _spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            # Informative: the reconciler judges freshness with webhookLeaseMaxAge.
            "leaseDurationSeconds": max(1, round(3 * self.interval_s)),
            "renewTime": micro_time(self._clock()),
        }
