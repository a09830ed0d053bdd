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
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from app.clock import Clock, utc_now

logger = logging.getLogger("kerf.webhook.lease")

LEASE_NAME = "kerf-webhook"
RENEW_INTERVAL_S = 10.0
#: How often a replica that is not ready yet checks again, so it renews soon after it is.
READY_POLL_S = 1.0
#: Writes tried per renewal when other replicas keep winning the race.
MAX_CONFLICTS = 5
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_NAMESPACE = "kerf-system"


def micro_time(at: datetime) -> str:
    """A Kubernetes MicroTime: RFC 3339 in UTC with microseconds."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def holder_identity() -> str:
    """The pod name (downward API `POD_NAME`), else the host name (a pod's by default)."""
    return os.environ.get("POD_NAME") or socket.gethostname()


def own_namespace() -> str:
    """`POD_NAMESPACE`, else the service account's namespace, else kerf-system."""
    if namespace := os.environ.get("POD_NAMESPACE"):
        return namespace
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


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
        name: str = LEASE_NAME,
        interval_s: float = RENEW_INTERVAL_S,
        ready: Callable[[], bool] = lambda: True,
        clock: Clock = utc_now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._api = client.CoordinationV1Api(api_client)
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
                logger.warning(
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
            try:
                current = await self._api.read_namespaced_lease(self.name, self.namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                current = None
            try:
                if current is None:
                    await self._api.create_namespaced_lease(self.namespace, self._body(None))
                else:
                    version = current.metadata.resource_version
                    await self._api.replace_namespaced_lease(
                        self.name, self.namespace, self._body(version)
                    )
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise
        raise LeaseConflict(f"Lease {self.namespace}/{self.name}: {MAX_CONFLICTS} conflicts")

    def _body(self, resource_version: str | None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version is not None:
            # A replace must name the version it read: a concurrent renewal then gets 409.
            metadata["resourceVersion"] = resource_version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.holder,
                # Informative: the reconciler judges freshness with webhookLeaseMaxAge.
                "leaseDurationSeconds": max(1, round(3 * self.interval_s)),
                "renewTime": micro_time(self._clock()),
            },
        }
