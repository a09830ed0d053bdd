"""The node agent: plays the kubelet of every Node in the cluster, over the real API.

It registers `node-1..node-N`, then list+watches Nodes and Pods (relisting after a 410),
renews each node's Lease, gives any Node created later through the API a status, and
brings each pod bound to a node to the status `devcluster.podstatus.desired_status`
computes. It writes only what changed, so a steady cluster sees lease renewals and nothing
else from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp

from devcluster import events, network, nodes, podstatus
from devcluster.apiclient import ApiError, Client
from devcluster.podstatus import PodMemory

Obj = dict[str, Any]
log = logging.getLogger(__name__)

LEASE_RENEW_S = 10
#: The kubelet's nodeStatusReportFrequency: the status is re-sent this often even unchanged.
NODE_STATUS_S = 300
#: Pods are re-synced at least this often: crash-loop back-offs and Deferred resizes that
#: room has appeared for move on without an event.
RESYNC_S = 2
_RETRY_S = 1


def _now() -> datetime:
    return datetime.now(UTC)


def _rv(obj: Obj) -> int:
    """resourceVersion as a number, to drop a watch event older than a write's answer
    (etcd's revisions; opaque in principle, numeric in every real server)."""
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0


class NodeAgent:
    """Every node's kubelet at once."""

    def __init__(self, client: Client, shape: nodes.NodeShape, count: int) -> None:
        self.client = client
        self.shape = shape
        self.count = count
        self.nodes: dict[str, Obj] = {}
        self.pods: dict[str, Obj] = {}
        self._memory: dict[str, PodMemory] = {}
        #: uid -> (the status computed, the status the server stored from it): the server
        #: may normalise what it stores, which must not look like a change next time.
        self._written: dict[str, tuple[Obj, Obj]] = {}
        self._node_written: dict[str, tuple[Obj, Obj]] = {}
        self._leases: dict[str, Obj] = {}
        self._deleting: set[str] = set()
        self._addresses = network.PodAddresses(network.machine_address())
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        #: How many pod status writes the agent made (tests check a steady cluster adds none).
        self.status_writes = 0

    # ----------------------------------------------------------------- run

    async def run(self) -> None:
        """Register the nodes, then keep every node and pod up to date until cancelled."""
        for i in range(self.count):
            await self._register(f"node-{i + 1}")
        async with asyncio.TaskGroup() as group:
            group.create_task(self._informer("/api/v1/nodes", self.nodes, self._node_changed))
            group.create_task(self._informer("/api/v1/pods", self.pods, self._pod_changed))
            group.create_task(self._heartbeats())
            group.create_task(self._pod_loop())

    async def _register(self, name: str) -> None:
        try:
            node = await self.client.request("POST", "/api/v1/nodes", nodes.new_node(name))
        except ApiError as exc:
            if exc.status != 409:
                raise
            node = await self.client.get(f"/api/v1/nodes/{name}")
        await self._write_node_status(node, heartbeat=True)

    # ----------------------------------------------------------------- watches

    async def _informer(
        self, path: str, store: dict[str, Obj], changed: Callable[[Obj | None], None]
    ) -> None:
        """List, then watch from the list's resourceVersion; relist after 410 Expired."""
        version: str | None = None
        while True:
            try:
                if version is None:
                    listed = await self.client.get(path)
                    fresh = {self._key(o): o for o in listed.get("items") or []}
                    for key in set(store) - set(fresh):
                        del store[key]
                    store.update(fresh)
                    version = listed["metadata"]["resourceVersion"]
                    changed(None)
                async for event in self.client.watch(path, version):
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            version = None
                        break
                    version = obj["metadata"]["resourceVersion"]
                    if kind == "BOOKMARK":
                        continue
                    key = self._key(obj)
                    if kind == "DELETED":
                        store.pop(key, None)
                    elif key not in store or _rv(obj) >= _rv(store[key]):
                        store[key] = obj
                    changed(obj)
            except ApiError as exc:
                if exc.status == 410:
                    version = None
                else:
                    log.warning("watch %s: %s", path, exc)
                    await asyncio.sleep(_RETRY_S)
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.warning("watch %s: %s", path, exc)
                await asyncio.sleep(_RETRY_S)

    @staticmethod
    def _key(obj: Obj) -> str:
        meta = obj["metadata"]
        return meta.get("uid") or meta["name"]

    def _node_changed(self, node: Obj | None) -> None:
        """A node changed, or (None) the nodes were listed: every listed one is checked, as
        a registration's status write can lose a race (409: the controller manager changed
        the new Node first) and nothing else would bring that node its status."""
        for candidate in list(self.nodes.values()) if node is None else [node]:
            if self._node_needs_status(candidate):
                # Off the watch loop; held here because the loop keeps only weak references.
                task = asyncio.get_running_loop().create_task(self._write_node_status(candidate))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        self._wake.set()

    def _node_needs_status(self, node: Obj) -> bool:
        """A node without the status its kubelet reports (one created through the API),
        or whose status was changed by someone else."""
        status = nodes.desired_status(node, self.shape, _now(), heartbeat=False)
        current = node.get("status") or {}
        return status != current and self._node_written.get(node["metadata"]["uid"]) != (
            status,
            current,
        )

    def _pod_changed(self, pod: Obj | None) -> None:
        if pod is not None and pod["metadata"]["uid"] not in self.pods:
            uid = pod["metadata"]["uid"]
            self._memory.pop(uid, None)
            self._written.pop(uid, None)
            self._deleting.discard(uid)
        self._wake.set()

    # ----------------------------------------------------------------- nodes

    async def _write_node_status(self, node: Obj, heartbeat: bool = False) -> None:
        name = node["metadata"]["name"]
        status = nodes.desired_status(node, self.shape, _now(), heartbeat)
        body = dict(node, status=status)
        try:
            written = await self.client.request("PUT", f"/api/v1/nodes/{name}/status", body)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("node %s status: %s", name, exc)
            return
        except ApiError as exc:
            # A newer version is on its way through the watch; it gets its own turn.
            if exc.status not in (404, 409):
                log.warning("node %s status: %s", name, exc)
            return
        self._node_written[written["metadata"]["uid"]] = (status, written.get("status") or {})
        current = self.nodes.get(written["metadata"]["uid"])
        if current is not None and _rv(written) >= _rv(current):
            self.nodes[written["metadata"]["uid"]] = written

    async def _heartbeats(self) -> None:
        """Renew every node's Lease every LEASE_RENEW_S; re-send its status every
        NODE_STATUS_S, as the kubelet does."""
        loop = asyncio.get_running_loop()
        last_status = loop.time()
        while True:
            for node in list(self.nodes.values()):
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    await self._renew(node)
            if loop.time() - last_status >= NODE_STATUS_S:
                last_status = loop.time()
                for node in list(self.nodes.values()):
                    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                        await self._write_node_status(node, heartbeat=True)
            await asyncio.sleep(LEASE_RENEW_S)

    async def _renew(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        base = f"/apis/coordination.k8s.io/v1/namespaces/{nodes.LEASE_NAMESPACE}/leases"
        current = self._leases.get(name)
        try:
            if current is None:
                body = nodes.lease(node, _now(), None)
                written = await self.client.request("POST", base, body)
            else:
                body = nodes.lease(node, _now(), current)
                written = await self.client.request("PUT", f"{base}/{name}", body)
        except ApiError as exc:
            if exc.status not in (404, 409):
                log.warning("lease %s: %s", name, exc)
            # Re-read next round: the lease exists (409 on create), changed, or is gone.
            try:
                self._leases[name] = await self.client.get(f"{base}/{name}")
            except ApiError:
                self._leases.pop(name, None)
            return
        self._leases[name] = written

    # ----------------------------------------------------------------- pods

    async def _pod_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), RESYNC_S)
            self._wake.clear()
            try:
                await self._sync_pods()
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.warning("pod sync: %s", exc)

    async def _sync_pods(self) -> None:
        by_node: dict[str, list[Obj]] = {}
        for pod in self.pods.values():
            by_node.setdefault(pod["spec"].get("nodeName") or "", []).append(pod)
        for node in list(self.nodes.values()):
            on_node = []
            for pod in by_node.get(node["metadata"]["name"], []):
                if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    on_node.append(pod)
                elif pod["metadata"].get("deletionTimestamp"):
                    await self._delete(pod)
            for i, pod in enumerate(on_node):
                # What this pass wrote counts for the next pods' resize verdicts.
                on_node[i] = await self._sync_pod(pod, node, on_node)

    async def _sync_pod(self, pod: Obj, node: Obj, on_node: list[Obj], retry: bool = True) -> Obj:
        """Write the pod's status if it changed; the pod as it now stands."""
        uid = pod["metadata"]["uid"]
        memory = self._memory.get(uid, PodMemory())
        ip = (pod.get("status") or {}).get("podIP") or ""
        status, memory = podstatus.desired_status(
            pod,
            node,
            [p for p in on_node if p["metadata"]["uid"] != uid],
            memory,
            _now(),
            ip or self._addresses.next(),
        )
        current = pod.get("status") or {}
        if status == current or self._written.get(uid) == (status, current):
            self._memory[uid] = memory
            if pod["metadata"].get("deletionTimestamp"):
                await self._delete(pod)
            return pod
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        try:
            written = await self.client.request("PUT", path, dict(pod, status=status))
        except ApiError as exc:
            if exc.status == 409 and retry:
                # Someone changed the pod (a resize, a label): once more from a fresh read.
                try:
                    fresh = await self.client.get(path.removesuffix("/status"))
                except ApiError:
                    return pod
                if fresh["metadata"]["uid"] == uid:
                    self.pods[uid] = fresh
                    return await self._sync_pod(fresh, node, on_node, retry=False)
            elif exc.status not in (404, 409):
                log.warning("pod %s/%s status: %s", meta["namespace"], meta["name"], exc)
            return pod
        self.status_writes += 1
        await self._record(pod, status, node["metadata"]["name"])
        self._memory[uid] = memory
        self._written[uid] = (status, written.get("status") or {})
        if uid in self.pods and _rv(written) >= _rv(self.pods[uid]):
            self.pods[uid] = written
        if meta.get("deletionTimestamp"):
            await self._delete(written)
        return written

    async def _record(self, pod: Obj, status: Obj, node: str) -> None:
        """The Events for what this status write did; a failed one is logged, not retried
        (as the kubelet's recorder drops what it cannot write)."""
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/events"
        for event in events.pod_events(pod, status):
            try:
                await self.client.request(
                    "POST", path, events.event_object(pod, event, node, _now())
                )
            except ApiError as exc:
                log.warning(
                    "event %s for %s/%s: %s", event.reason, meta["namespace"], meta["name"], exc
                )

    async def _delete(self, pod: Obj) -> None:
        """Finish a graceful deletion: the containers have stopped, the object goes."""
        meta = pod["metadata"]
        if meta["uid"] in self._deleting:
            return
        self._deleting.add(meta["uid"])
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": meta["uid"]},
        }
        try:
            await self.client.request(
                "DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", body
            )
        except ApiError as exc:
            if exc.status not in (404, 409):
                self._deleting.discard(meta["uid"])
                log.warning("delete pod %s/%s: %s", meta["namespace"], meta["name"], exc)
