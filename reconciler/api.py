"""The reconciler's API calls, one function per verb and object (kopf's split of clients
by verb), over one raw transport that parses with orjson and counts every call.

Writes go through `Writer` (`--dry-run` and `--state-dir` make none: `reconciler.dryrun`).
`ApiWriter` passes each write through one fence just before sending it, with the namespace
it is written in: a replica that no longer leads (sharded: no longer holds that
namespace's bucket) sends nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from kubernetes_asyncio import client

from app.kube.errors import ApiStatusError
from app.kube.leader import Answered, Fence
from app.kube.transport import JSON, ApiTransport
from app.model.crd import API_VERSION, plural
from app.model.patch_types import PatchType
from app.model.shards import namespace_of
from reconciler.metrics import ReconcilerMetrics

EvictResult = Literal["evicted", "refused", "gone"]


def _api_path(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def object_path(api_version: str, kind: str, namespace: str, name: str) -> str:
    """The REST path of an object; namespace "" for a cluster-scoped one."""
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{_api_path(api_version)}{scope}/{plural(kind)}/{name}"


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


class Transport(ApiTransport):
    """The reconciler's API calls, each counted in its metrics."""

    def __init__(self, api_client: client.ApiClient, metrics: ReconcilerMetrics) -> None:
        super().__init__(api_client, metrics.api_call)


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
        answer: bool = True,
    ) -> dict[str, Any]:
        namespace = namespace_of(path)
        # As late as kerf can check: only a pause between here and the bytes leaving
        # the socket escapes it (docs/reconciler.md, "A paused leader").
        if self._fence is not None:
            self._fence(resource, namespace)
        try:
            return await self._t.request(
                verb, resource, method, path, body, content_type, answer=answer
            )
        finally:
            if self._answered is not None:
                self._answered(resource, namespace)

    async def patch_annotations(
        self, obj: Mapping[str, Any], patch: Mapping[str, str | None]
    ) -> Mapping[str, Any]:
        """Merge-patch `metadata.annotations` of a workload (only the keys given); returns
        the workload as written."""
        meta = obj.get("metadata") or {}
        kind = str(obj.get("kind"))
        path = object_path(str(obj.get("apiVersion")), kind, meta["namespace"], meta["name"])
        body = {"metadata": {"annotations": dict(patch)}}
        return await self._send("patch", plural(kind), "PATCH", path, body, PatchType.MERGE)

    async def resize(self, pod: Mapping[str, Any], containers: Mapping[str, Any]) -> None:
        """Patch `pods/resize` (strategic merge) with the changed containers' resources."""
        meta = pod["metadata"]
        path = object_path("v1", "Pod", meta["namespace"], meta["name"]) + "/resize"
        body = resize_body(pod, containers)
        await self._send(
            "patch", "pods/resize", "PATCH", path, body, PatchType.STRATEGIC_MERGE, answer=False
        )

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
        return await self._send("patch", resource, "PATCH", path, body, PatchType.MERGE)

    async def create_event(self, body: Mapping[str, Any]) -> None:
        """Create a core v1 Event; one of that name there already was told before (its
        answer lost, or by another replica) and is fine."""
        path = f"/api/v1/namespaces/{body['metadata']['namespace']}/events"
        try:
            await self._send("create", "events", "POST", path, body, answer=False)
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
