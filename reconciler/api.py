"""The reconciler's API calls, one function per verb and object (kopf's split of clients
by verb), over one raw transport that parses with orjson and counts every call.

Writes go through `Writer` (`--dry-run` and `--state-dir` make none: `reconciler.dryrun`).
`ApiWriter` passes each write through one fence just before sending it: a replica that no
longer leads sends nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Literal, Protocol

import aiohttp
import orjson
from kubernetes_asyncio import client

from app.informer import ApiStatusError
from app.models import API_VERSION, plural
from app.workloads import parse_time
from reconciler.metrics import ReconcilerMetrics

logger = logging.getLogger("kerf.reconciler.api")

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30, sock_connect=10)
EvictResult = Literal["evicted", "refused", "gone"]
#: Called with the resource just before a write is sent; raises NotLeading to refuse it.
Fence = Callable[[str], None]
#: Called with the resource once a write sent through the fence has its answer (or failed).
Answered = Callable[[str], None]


class NotLeading(Exception):
    """A write was not sent: this replica does not hold the leader Lease (or has not
    renewed it within the renew deadline). Its pass is dropped, not retried: the leader
    decides again from fresh state."""


def _api_path(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def object_path(api_version: str, kind: str, namespace: str, name: str) -> str:
    """The REST path of a namespaced object."""
    return f"{_api_path(api_version)}/namespaces/{namespace}/{plural(kind)}/{name}"


def resize_body(pod: Mapping[str, Any], containers: Mapping[str, Any]) -> dict[str, Any]:
    """The `pods/resize` patch for the given containers' resources: each under the list
    the pod has it in. Kubernetes (1.33+) resizes a sidecar (an init container with
    `restartPolicy: Always`) under `spec.initContainers`; named under `spec.containers` it
    would be a new app container, which a resize may not add."""
    spec = pod.get("spec") or {}
    init = {c.get("name") for c in spec.get("initContainers") or ()}
    lists: dict[str, list[dict[str, Any]]] = {}
    for name, resources in sorted(containers.items()):
        field = "initContainers" if name in init else "containers"
        lists.setdefault(field, []).append({"name": name, "resources": resources})
    return {"spec": lists}


class Transport:
    """One HTTP call to the API server: raw body, orjson, errors as ApiStatusError."""

    def __init__(self, api_client: client.ApiClient, metrics: ReconcilerMetrics) -> None:
        self._client = api_client
        self._metrics = metrics

    async def request(
        self,
        verb: str,
        resource: str,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = JSON,
    ) -> dict[str, Any]:
        """Send one request; a 2xx answer's body is returned parsed, anything else raises
        ApiStatusError with the API's own message. Counted by verb, resource and code."""
        try:
            response = await self._client.call_api(
                path,
                method,
                header_params={"Content-Type": content_type, "Accept": JSON},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except Exception:
            self._metrics.api_call(verb, resource, "error")
            raise
        try:
            raw = await response.read()
        finally:
            response.release()
        self._metrics.api_call(verb, resource, str(response.status))
        if not 200 <= response.status < 300:
            raise ApiStatusError(response.status, _message(raw))
        return orjson.loads(raw) if raw else {}


def _parsed(raw: bytes) -> Mapping[str, Any]:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _message(raw: bytes) -> str:
    return str(_parsed(raw).get("message") or raw[:300].decode("utf-8", "replace"))


class Writer(Protocol):
    """Every write the reconciler makes."""

    async def patch_annotations(
        self, obj: Mapping[str, Any], patch: Mapping[str, str | None]
    ) -> Mapping[str, Any]: ...

    async def resize(self, pod: Mapping[str, Any], containers: Mapping[str, Any]) -> None: ...

    async def evict(self, pod: Mapping[str, Any]) -> EvictResult: ...

    async def create_recommendation(self, body: Mapping[str, Any]) -> Mapping[str, Any]: ...

    async def patch_status(
        self, namespace: str, name: str, patch: Mapping[str, Any], kind: str = ...
    ) -> Mapping[str, Any]: ...

    async def create_event(self, body: Mapping[str, Any]) -> None: ...


class ApiWriter:
    """The writes, sent to the API server, each through `fence` first (when given), and
    each followed by `answered`."""

    def __init__(
        self, transport: Transport, fence: Fence | None = None, answered: Answered | None = None
    ) -> None:
        self._t = transport
        self._fence = fence
        self._answered = answered

    async def _send(
        self,
        verb: str,
        resource: str,
        method: str,
        path: str,
        body: Any,
        content_type: str = JSON,
    ) -> dict[str, Any]:
        # As late as kerf can check: only a pause between here and the bytes leaving
        # the socket escapes it (docs/reconciler.md, "A paused leader").
        if self._fence is not None:
            self._fence(resource)
        try:
            return await self._t.request(verb, resource, method, path, body, content_type)
        finally:
            if self._answered is not None:
                self._answered(resource)

    async def patch_annotations(
        self, obj: Mapping[str, Any], patch: Mapping[str, str | None]
    ) -> Mapping[str, Any]:
        """Merge-patch `metadata.annotations` of a workload (only the keys given); returns
        the workload as written."""
        meta = obj.get("metadata") or {}
        kind = str(obj.get("kind"))
        path = object_path(str(obj.get("apiVersion")), kind, meta["namespace"], meta["name"])
        body = {"metadata": {"annotations": dict(patch)}}
        return await self._send("patch", plural(kind), "PATCH", path, body, MERGE_PATCH)

    async def resize(self, pod: Mapping[str, Any], containers: Mapping[str, Any]) -> None:
        """Patch `pods/resize` (strategic merge) with the changed containers' resources."""
        meta = pod["metadata"]
        path = object_path("v1", "Pod", meta["namespace"], meta["name"]) + "/resize"
        body = resize_body(pod, containers)
        await self._send("patch", "pods/resize", "PATCH", path, body, STRATEGIC_MERGE_PATCH)

    async def evict(self, pod: Mapping[str, Any]) -> EvictResult:
        """The Eviction API: the server honours PDBs; 429 means "not now" (refused)."""
        meta = pod["metadata"]
        path = object_path("v1", "Pod", meta["namespace"], meta["name"]) + "/eviction"
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            # Only this incarnation of the pod: a replacement of the same name is spared.
            "deleteOptions": {"preconditions": {"uid": meta.get("uid")}},
        }
        try:
            await self._send("create", "pods/eviction", "POST", path, body)
        except ApiStatusError as exc:
            if exc.code == 429:
                return "refused"
            if exc.code in (404, 409):  # gone, or already replaced
                return "gone"
            raise
        return "evicted"

    async def create_recommendation(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """Create a RightsizingRecommendation and return it as created; one that exists
        already is fine (an empty answer)."""
        meta = body["metadata"]
        path = f"{_api_path(API_VERSION)}/namespaces/{meta['namespace']}/rightsizingrecommendations"
        try:
            return await self._send("create", "rightsizingrecommendations", "POST", path, body)
        except ApiStatusError as exc:
            if exc.code != 409:
                raise
        return {}

    async def patch_status(
        self,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        kind: str = "RightsizingRecommendation",
    ) -> Mapping[str, Any]:
        """Merge-patch the status subresource of a kerf object; returns the object as
        written."""
        path = object_path(API_VERSION, kind, namespace, name) + "/status"
        resource = f"{plural(kind)}/status"
        body = {"status": patch}
        return await self._send("patch", resource, "PATCH", path, body, MERGE_PATCH)

    async def create_event(self, body: Mapping[str, Any]) -> None:
        """Create an events.k8s.io/v1 Event; one of that name there already was told
        before (its answer lost, or by another replica) and is fine."""
        path = f"/apis/events.k8s.io/v1/namespaces/{body['metadata']['namespace']}/events"
        try:
            await self._send("create", "events", "POST", path, body)
        except ApiStatusError as exc:
            if exc.code != 409 or not body["metadata"].get("name"):
                raise


class PodReader:
    """Reads one pod from the API server itself, not a cache: only where a stale view would
    decide wrongly (did an eviction, recorded but unreported, go out?)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as the API server has it now; None when it does not exist."""
        try:
            return await self._t.request(
                "get", "pods", "GET", object_path("v1", "Pod", namespace, name)
            )
        except ApiStatusError as exc:
            if exc.code == 404:
                return None
            raise


class LeaseReader:
    """Reads the webhook's Lease (not a decision path: once per eviction, cached)."""

    def __init__(self, transport: Transport, namespace: str, name: str) -> None:
        self._t = transport
        self._path = object_path("coordination.k8s.io/v1", "Lease", namespace, name)

    async def renewed_at(self) -> datetime | None:
        """The Lease's renewTime; None when it does not exist."""
        try:
            lease = await self._t.request("get", "leases", "GET", self._path)
        except ApiStatusError as exc:
            if exc.code == 404:
                return None
            raise
        return parse_time((lease.get("spec") or {}).get("renewTime"))
