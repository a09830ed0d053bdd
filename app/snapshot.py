"""A cluster view listed once from the API server, with no watch: for one-off readers
such as `kerf report --kubeconfig`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
from kubernetes_asyncio.config import ConfigException

from app.clock import utc_now
from app.informer import (
    WEBHOOK_RESOURCES,
    ApiStatusError,
    Informer,
    api_client_from_config,
    with_kubex,
)
from app.view import ClusterView


class SnapshotError(Exception):
    """The cluster could not be listed; the message says which resource and why."""


async def snapshot_view(kubeconfig: Path | None) -> ClusterView:
    """Every object the decisions read, listed once; an API error raises SnapshotError."""
    view = ClusterView()
    async with await api_client_from_config(kubeconfig) as api_client:
        for resource in with_kubex(view, WEBHOOK_RESOURCES):
            informer = Informer(resource, api_client, view)
            try:
                await informer.list_once()
            except ApiStatusError as exc:
                raise SnapshotError(f"listing {resource.kind}: {exc}") from None
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                raise SnapshotError(
                    f"listing {resource.kind}: {exc or type(exc).__name__}"
                ) from None
    view.mark_synced(utc_now())
    return view


def cluster_snapshot(kubeconfig: Path | None) -> ClusterView:
    """`snapshot_view` from synchronous code (kubeconfig as `kubectl` finds it)."""
    if kubeconfig is not None and not kubeconfig.is_file():
        raise SnapshotError(f"--kubeconfig {kubeconfig}: no such file")
    try:
        return asyncio.run(snapshot_view(kubeconfig))
    except ConfigException as exc:
        raise SnapshotError(str(exc)) from None
