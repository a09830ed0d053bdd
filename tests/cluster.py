"""Helpers for tests that run kerf against the kubesim API server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes_asyncio import client

from app.kube.informer import ABSENT_RECHECK_S, ClusterFeed
from app.store.view import ClusterView
from kubesim.sim import Simulator

CRD_DIR = Path(__file__).resolve().parents[1] / "manifests" / "crds"
GROUP, VERSION = "rightsizing.kubex.ai", "v1alpha1"
T = TypeVar("T")


async def install_crds(api: client.ApiClient) -> None:
    """Create every kerf CRD from `manifests/crds/`."""
    extensions = client.ApiextensionsV1Api(api)
    for path in sorted(CRD_DIR.glob("rightsizing.kubex.ai_*.yaml")):
        await extensions.create_custom_resource_definition(yaml.safe_load(path.read_text()))


async def eventually(check: Callable[[], T], what: str, timeout_s: float = 60.0) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` after the bound."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not (result := check()):
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
    return result


class Sleeps:
    """An injectable sleep that records the delays asked for and does not wait for them.

    The long wait before asking again for a resource the cluster does not serve (Argo
    Rollouts here) really sleeps, or that informer would poll the simulator in a loop.
    """

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(seconds if seconds >= ABSENT_RECHECK_S else 0.001)


@contextlib.asynccontextmanager
async def running_feed(
    api: client.ApiClient, view: ClusterView, **options: Any
) -> AsyncIterator[ClusterFeed]:
    """A ClusterFeed over `view`, synced on entry (bounded), cancelled on exit."""
    feed = ClusterFeed(api, view, **options)
    task = asyncio.create_task(feed.run())
    try:
        await asyncio.wait_for(feed.wait_synced(), 60)
        yield feed
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    """CustomObjectsApi over `api`."""
    return client.CustomObjectsApi(api)


def static_policy(
    name: str, namespace: str, app: str, cpu: str, memory: str, strategy: str = "default"
) -> dict[str, Any]:
    """A StaticPolicy for the Deployments labelled `app`, container `app`."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "StaticPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "automationStrategyRef": {"name": strategy},
            "scope": {
                "labelSelector": {"matchLabels": {"app": app}},
                "workloadTypes": ["Deployment"],
            },
            "resources": {"containers": {"app": {"requests": {"cpu": cpu, "memory": memory}}}},
        },
    }


def strategy(name: str, namespace: str) -> dict[str, Any]:
    """An AutomationStrategy that allows in-place resize and eviction."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AutomationStrategy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"inPlaceResize": {"enabled": True}, "podEviction": {"enabled": True}},
    }


def deployment(name: str, namespace: str, replicas: int = 1) -> dict[str, Any]:
    """A Deployment of one container `app` with modest requests."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "shop/web:1.4",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        }
                    ]
                },
            },
        },
    }


async def install_shop(sim: Simulator, api: client.ApiClient) -> None:
    """kerf's CRDs, namespace `shop`, node `node-a`, strategy `default` and the StaticPolicy
    `web` (250m / 256Mi for Deployment `web`)."""
    await install_crds(api)
    await sim.add_namespace("shop")
    await sim.add_node("node-a")
    crs = custom(api)
    await crs.create_namespaced_custom_object(
        GROUP, VERSION, "shop", "automationstrategies", strategy("default", "shop")
    )
    await crs.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "shop",
        "staticpolicies",
        static_policy("web", "shop", "web", "250m", "256Mi"),
    )


def table_cells(text: str) -> list[dict[str, str]]:
    """`kubectl get`'s table as one dict per row, header → cell. Cells are cut at the
    header's columns, so an empty cell (a field the object does not have) stays a cell."""
    header, *rows = text.splitlines()
    names = header.split()
    starts: list[int] = []
    for name in names:
        starts.append(header.index(name, starts[-1] + 1 if starts else 0))
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [{n: row[a:b].strip() for n, (a, b) in zip(names, bounds, strict=True)} for row in rows]
