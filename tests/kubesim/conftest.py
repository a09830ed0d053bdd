"""Fixtures for the simulator's own tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from kubesim.sim import Simulator
from kubesim.testing import running_sim


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    """A running simulator with a kubeconfig in tmp_path."""
    async with running_sim(tmp_path) as simulator:
        yield simulator


@pytest.fixture
async def api(sim: Simulator) -> AsyncIterator[client.ApiClient]:
    """A kubernetes-asyncio client for `sim`."""
    async with sim.api_client() as api_client:
        yield api_client


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    """CoreV1Api over `api`."""
    return client.CoreV1Api(api)


def pod_body(
    name: str,
    cpu: str = "100m",
    memory: str = "64Mi",
    limits: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict:
    """A minimal single-container pod manifest."""
    resources: dict = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        resources["limits"] = limits
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27", "resources": resources}]},
    }
