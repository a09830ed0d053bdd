"""A cluster view listed once from the API server, with no watch: for one-off readers
such as `kerf report --kubeconfig`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
from kubernetes_asyncio.config import ConfigException

from app.kube.apitimeout import DEFAULT_API_TIMEOUT_S
from app.kube.errors import ApiStatusError
from app.kube.firstsync import quiet_for_one_shot
from app.kube.informer import (
    WEBHOOK_RESOURCES,
    Informer,
    api_client_from_config,
    with_kubex,
)
from app.kube.reachability import describe, format_seconds, server_of
from app.runtime.clock import utc_now
from app.store.view import ClusterView


class SnapshotError(Exception):
    """The cluster could not be listed; the message says which resource and why."""


async def snapshot_view(
    kubeconfig: Path | None,
    api_timeout_s: float = DEFAULT_API_TIMEOUT_S,
    kubex_source: tuple[str, str] | None = None,
) -> ClusterView:
    """Every object the decisions read, listed once (Kubex's ConfigMap where
    `kubex_source` names it); an API error, or no answer within `api_timeout_s`, raises
    SnapshotError naming the API server."""
    view = ClusterView(kubex_source=kubex_source)
    async with await api_client_from_config(kubeconfig) as api_client:
        quiet_for_one_shot(api_client)
        server = server_of(api_client)
        resource = WEBHOOK_RESOURCES[0]
        try:
            async with asyncio.timeout(api_timeout_s):
                for resource in with_kubex(view, WEBHOOK_RESOURCES):
                    await Informer(resource, api_client, view).list_once()
        except TimeoutError:
            raise SnapshotError(
                f"no answer from the API server {server} listing {resource.kind}; gave up "
                f"after {format_seconds(api_timeout_s)} (--api-timeout)"
            ) from None
        except (ApiStatusError, aiohttp.ClientError, OSError) as exc:
            raise SnapshotError(
                f"the API server {server}: listing {resource.kind}: {describe(exc)}"
            ) from None
    view.mark_synced(utc_now())
    return view


def cluster_snapshot(
    kubeconfig: Path | None,
    api_timeout_s: float = DEFAULT_API_TIMEOUT_S,
    kubex_source: tuple[str, str] | None = None,
) -> ClusterView:
    """`snapshot_view` from synchronous code (kubeconfig as `kubectl` finds it)."""
    if kubeconfig is not None and not kubeconfig.is_file():
        raise SnapshotError(f"--kubeconfig {kubeconfig}: no such file")
    try:
        return asyncio.run(snapshot_view(kubeconfig, api_timeout_s, kubex_source))
    except ConfigException as exc:
        raise SnapshotError(str(exc)) from None
