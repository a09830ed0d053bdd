"""The RightsizingRecommendations of a cluster, for `kerf approve` and `kerf status`: read,
annotated and watched through the API server (and the shard sets' Leases, for `kerf status
--shards`), each call bounded by `--api-timeout`, any failure one line naming the server
(SnapshotError, which `kerf` prints)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from kubernetes_asyncio import client, config, watch

from app.kube.firstsync import quiet_for_one_shot
from app.kube.informer import api_client_from_config
from app.kube.reachability import describe, format_seconds, server_of
from app.kube.snapshot import SnapshotError
from app.model.crd import API_GROUP
from app.model.patch_types import PatchType
from app.model.shards import SHARD_SET_LABEL, leader_lease_name
from kerf.shard_status import SHARD_SETS

VERSION = "v1alpha1"
PLURAL = "rightsizingrecommendations"
#: kubectl's short names of the workload kinds kerf manages
KIND_ALIASES = {
    "deploy": "deployment",
    "sts": "statefulset",
    "ds": "daemonset",
    "cj": "cronjob",
    "rs": "replicaset",
    "ro": "rollout",
}
#: the Leases' API group (read as plain objects, as the records are)
LEASE_GROUP = "coordination.k8s.io"
_T = TypeVar("_T")


def record_name_of(workload: str) -> str:
    """The record's name for `KIND/NAME` (`deployment/web` → `deployment-web`); a name
    without a kind, or `rsrec/NAME`, is taken as the record's own name."""
    kind, slash, name = workload.partition("/")
    if not slash:
        return workload
    if not name or not kind:
        raise SnapshotError(f"{workload!r}: expected KIND/NAME, such as deployment/web")
    kind = kind.lower()
    if kind in ("rsrec", "rightsizingrecommendation", PLURAL):
        return name
    kind = KIND_ALIASES.get(kind, kind.split(".")[0])
    return f"{kind}-{name}"


def default_namespace(kubeconfig: Path | None) -> str:
    """The namespace of the kubeconfig's current context, as kubectl takes it; `default`."""
    with contextlib.suppress(Exception):
        _, active = config.list_kube_config_contexts(
            config_file=str(kubeconfig) if kubeconfig else None
        )
        namespace = ((active or {}).get("context") or {}).get("namespace")
        if namespace:
            return str(namespace)
    return "default"


class Records:
    """The records API of one cluster (use `async with Records.connect(...)`)."""

    def __init__(self, api: client.ApiClient, timeout_s: float) -> None:
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.timeout_s = timeout_s
        self.server = server_of(api)

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, kubeconfig: Path | None, timeout_s: float) -> AsyncIterator[Records]:
        if kubeconfig is not None and not kubeconfig.is_file():
            raise SnapshotError(f"--kubeconfig {kubeconfig}: no such file")
        try:
            api = await api_client_from_config(kubeconfig)
        except config.ConfigException as exc:
            raise SnapshotError(str(exc)) from None
        async with api:
            quiet_for_one_shot(api)
            yield cls(api, timeout_s)

    async def _call(self, what: str, call: Awaitable[_T]) -> _T:
        try:
            async with asyncio.timeout(self.timeout_s):
                return await call
        except TimeoutError:
            raise SnapshotError(
                f"no answer from the API server {self.server} {what}; gave up after "
                f"{format_seconds(self.timeout_s)} (--api-timeout)"
            ) from None
        except client.ApiException as exc:
            if exc.status == 404 and what.startswith("reading "):
                raise
            raise SnapshotError(f"the API server {self.server}: {what}: {_reason(exc)}") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise SnapshotError(f"the API server {self.server}: {what}: {describe(exc)}") from None

    async def list(self, namespace: str | None) -> tuple[list[dict[str, Any]], str]:
        """The records of a namespace (None: of every namespace), and the list's
        resourceVersion."""
        if namespace is None:
            call = self.custom.list_cluster_custom_object(API_GROUP, VERSION, PLURAL)
        else:
            call = self.custom.list_namespaced_custom_object(API_GROUP, VERSION, namespace, PLURAL)
        listing: dict[str, Any] = await self._call(f"listing {PLURAL}", call)
        items = sorted(
            listing.get("items") or [],
            key=lambda r: (r["metadata"].get("namespace", ""), r["metadata"]["name"]),
        )
        return items, str((listing.get("metadata") or {}).get("resourceVersion") or "")

    async def shard_leases(self, namespace: str) -> tuple[dict[str, Any], ...]:
        """The Leases of the shard sets in kerf's `namespace` (`kerf status --shards`), as
        the API returns them: those with a shard set's label, and each set's single
        leader's Lease, which has none, when it exists."""
        listing: dict[str, Any] = await self._call(
            f"listing leases in {namespace}",
            self.custom.list_namespaced_custom_object(
                LEASE_GROUP, "v1", namespace, "leases", label_selector=SHARD_SET_LABEL
            ),
        )
        found = list(listing.get("items") or ())
        listed = {str((lease.get("metadata") or {}).get("name")) for lease in found}
        for name in sorted({leader_lease_name(s) for s in SHARD_SETS} - listed):
            read = self.custom.get_namespaced_custom_object(
                LEASE_GROUP, "v1", namespace, "leases", name
            )
            # A 404 (what `_call` lets through of a read): that set has no single leader.
            with contextlib.suppress(client.ApiException):
                found.append(await self._call(f"reading leases {namespace}/{name}", read))
        return tuple(found)

    async def namespace_names(self) -> tuple[str, ...] | None:
        """Every Namespace's name (`kerf status --shards` weighs the buckets by them);
        None when listing them is forbidden."""
        try:
            listing = await self._call(
                "listing namespaces", client.CoreV1Api(self.api).list_namespace()
            )
        except SnapshotError:
            return None
        return tuple(str(ns.metadata.name) for ns in listing.items)

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """One record, None when there is none."""
        try:
            found: dict[str, Any] = await self._call(
                f"reading {PLURAL} {namespace}/{name}",
                self.custom.get_namespaced_custom_object(
                    API_GROUP, VERSION, namespace, PLURAL, name
                ),
            )
        except client.ApiException:
            return None
        return found

    async def annotate(self, namespace: str, name: str, annotations: dict[str, Any]) -> None:
        """Set (or, with None, remove) annotations of a record (a merge patch)."""
        # A merge patch: the client's default (JSON patch) would need the annotations map.
        patch = self.custom.patch_namespaced_custom_object(
            API_GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            {"metadata": {"annotations": annotations}},
            _content_type=PatchType.MERGE.value,  # type: ignore[call-arg]  # missing from the stub
        )
        await self._call(f"annotating {PLURAL} {namespace}/{name}", patch)

    async def watch(
        self, namespace: str | None, resource_version: str
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Changes of the records from `resource_version` on, as (type, record); lists
        again when the server has forgotten that version (410), without repeating a
        record that did not change. Runs until cancelled."""
        seen: dict[tuple[str, str], str] = {}
        version = resource_version
        while True:
            if namespace is None:
                method: Any = self.custom.list_cluster_custom_object
                args: tuple[str, ...] = (API_GROUP, VERSION, PLURAL)
            else:
                method = self.custom.list_namespaced_custom_object
                args = (API_GROUP, VERSION, namespace, PLURAL)
            stream = watch.Watch().stream(
                method, *args, resource_version=version, timeout_seconds=300
            )
            gone = False
            try:
                async with stream:
                    async for event in stream:
                        kind = str(event.get("type"))
                        obj = event.get("object") or {}
                        if kind == "ERROR":
                            gone = True
                            break
                        meta = obj.get("metadata") or {}
                        version = str(meta.get("resourceVersion") or version)
                        key = (str(meta.get("namespace")), str(meta.get("name")))
                        if kind == "BOOKMARK" or seen.get(key) == version:
                            continue
                        seen[key] = version
                        yield kind, obj
            except client.ApiException as exc:
                if exc.status != 410:
                    raise SnapshotError(
                        f"the API server {self.server}: watching {PLURAL}: {_reason(exc)}"
                    ) from None
                gone = True
            except (aiohttp.ClientError, OSError) as exc:
                raise SnapshotError(
                    f"the API server {self.server}: watching {PLURAL}: {describe(exc)}"
                ) from None
            if gone:
                items, version = await self.list(namespace)
                for item in items:
                    meta = item["metadata"]
                    key = (str(meta.get("namespace")), str(meta.get("name")))
                    if seen.get(key) != meta.get("resourceVersion"):
                        seen[key] = str(meta.get("resourceVersion"))
                        yield "MODIFIED", item


def _reason(exc: client.ApiException) -> str:
    """The API's message of a refused call, in one line."""
    import orjson

    with contextlib.suppress(Exception):
        body = orjson.loads(exc.body or b"")
        if isinstance(body, dict) and body.get("message"):
            return f"HTTP {exc.status}: {body['message']}"
    return f"HTTP {exc.status} {exc.reason}"
