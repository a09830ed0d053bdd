"""The `coordination.k8s.io/v1` Lease client of every kerf service: read a Lease, create
it, or update it naming the `resourceVersion` it was read at (so of two writers who read
the same version, one gets 409), and who a replica is: its holder identity and namespace.

The webhook renews its readiness Lease with it (`webhook.lease`); the reconciler and the
recommender elect their leader with it (`app.kube.leader`); the reconciler reads the webhook's.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from app.kube.errors import ApiStatusError
from app.kube.transport import Requester
from app.model.workloads import parse_time

LEASE_API_VERSION = "coordination.k8s.io/v1"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_NAMESPACE = "kerf-system"
#: The webhook's readiness Lease: renewed by its ready replicas, read by the reconciler.
WEBHOOK_LEASE = "kerf-webhook"


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


@dataclass(frozen=True, slots=True)
class LeaseClient:
    """One named Lease: get, create, update and delete (each one request, counted as `leases`)."""

    requester: Requester
    namespace: str
    name: str
    #: the labels it is created and updated with (a shard set's: `app.model.shards`)
    labels: dict[str, str] | None = None

    @property
    def path(self) -> str:
        """The Lease's REST path."""
        return f"{self.collection}/{self.name}"

    @property
    def collection(self) -> str:
        """The REST path of the namespace's Leases (where a create goes)."""
        return f"/apis/{LEASE_API_VERSION}/namespaces/{self.namespace}/leases"

    async def get(self) -> dict[str, Any] | None:
        """The Lease as stored; None when it does not exist."""
        try:
            return await self.requester.request("get", "leases", "GET", self.path)
        except ApiStatusError as exc:
            if exc.code == 404:
                return None
            raise

    async def create(
        self, spec: dict[str, Any], annotations: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Create the Lease with `spec`; 409 (ApiStatusError) when someone created it first."""
        return await self.requester.request(
            "create", "leases", "POST", self.collection, self.body(None, spec, annotations)
        )

    async def update(
        self,
        resource_version: str,
        spec: dict[str, Any],
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Replace the Lease's spec and annotations, only if it is still at
        `resource_version`: 409 (ApiStatusError) when someone wrote it since it was read."""
        body = self.body(resource_version, spec, annotations)
        return await self.requester.request("update", "leases", "PUT", self.path, body)

    async def delete(self, resource_version: str) -> None:
        """Delete the Lease, only if it is still at `resource_version` (409,
        ApiStatusError, when someone wrote it since it was read; 404 when it is gone)."""
        options = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"resourceVersion": resource_version},
        }
        await self.requester.request("delete", "leases", "DELETE", self.path, options)

    def body(
        self,
        resource_version: str | None,
        spec: dict[str, Any],
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The Lease object to send: `spec` (and `annotations`, the whole set: an update
        replaces them), at `resource_version` when it is an update."""
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self.labels:
            metadata["labels"] = dict(self.labels)
        if annotations:
            metadata["annotations"] = dict(annotations)
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        return {
            "apiVersion": LEASE_API_VERSION,
            "kind": "Lease",
            "metadata": metadata,
            "spec": spec,
        }

    async def list(self, label_selector: str) -> list[dict[str, Any]]:
        """The namespace's Leases with these labels (one request)."""
        path = f"{self.collection}?labelSelector={quote(label_selector)}"
        answer = await self.requester.request("list", "leases", "GET", path)
        return list(answer.get("items") or [])

    async def renewed_at(self) -> datetime | None:
        """The Lease's renewTime; None when it does not exist (or was never renewed)."""
        lease = await self.get()
        return parse_time(((lease or {}).get("spec") or {}).get("renewTime"))
