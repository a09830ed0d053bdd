"""The Lease as kerf's one Lease client (app.kube.lease) uses it, on both backends: a missing
Lease reads as None, a second create and an update at a version read before another
write are refused with 409, a Lease in a namespace that does not exist with 404, and the
MicroTime written is read back to the microsecond."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from app.kube.errors import ApiStatusError
from app.kube.informer import api_client_from_config
from app.kube.lease import LeaseClient
from app.kube.transport import ApiTransport
from app.model.apitime import micro_time
from harness.backend import Backend
from tests.conformance.conftest import NamespacedKubectl

T0 = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)


def spec(holder: str) -> dict[str, Any]:
    return {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": micro_time(T0)}


async def test_the_lease_client_on_the_api_server(
    backend: Backend, kubectl: NamespacedKubectl
) -> None:
    async with await api_client_from_config(backend.kubeconfig) as api:
        lease = LeaseClient(ApiTransport(api), kubectl.namespace, "kerf-conformance")
        assert await lease.get() is None
        created = await lease.create(spec("a"))
        with pytest.raises(ApiStatusError) as twice:
            await lease.create(spec("b"))
        assert twice.value.code == 409
        read_at = str(created["metadata"]["resourceVersion"])
        await lease.update(read_at, spec("b"))
        with pytest.raises(ApiStatusError) as stale:
            await lease.update(read_at, spec("c"))
        assert stale.value.code == 409
        stored = await lease.get()
        assert stored is not None and stored["spec"]["holderIdentity"] == "b"
        assert await lease.renewed_at() == T0

        nowhere = LeaseClient(ApiTransport(api), f"{kubectl.namespace}-absent", "kerf")
        with pytest.raises(ApiStatusError) as missing:
            await nowhere.create(spec("a"))
        assert missing.value.code == 404
