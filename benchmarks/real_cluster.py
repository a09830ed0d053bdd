"""`--cluster real` of the cluster benches: the generated cluster on the real control plane.

`python -m devcluster` (etcd, kube-apiserver, kube-controller-manager and kube-scheduler
1.35, with the node agent playing every node's kubelet) is started as the end-to-end
tests start it (`harness.backend.running_backend`), with as many nodes as the generated
cluster has, each with the generated Nodes' allocatable. The objects of
`benchmarks.api_objects` are then created through the API, `IN_FLIGHT` requests at a time:
the kerf CRDs (waited for until Established), the namespaces (waited for until their
`default` ServiceAccount exists, which pods need), then strategies, policies,
recommendation ConfigMaps and Deployments. The controller manager makes the ReplicaSets
and pods, the scheduler binds them, the node agent brings them Running; a watch on pods
counts them until every one runs. What each control-plane process spent in CPU while
doing so is reported, which says what limits the set-up.
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from benchmarks.api_objects import ApiObjects, api_objects
from benchmarks.figures import cpu_delta
from benchmarks.startup import CRD_DIR, process_cpu_seconds
from harness.backend import BackendFailed, running_backend

#: Creations in flight at once (the API server's default allows 200 mutating requests).
IN_FLIGHT = 32
#: The generated Nodes' allocatable (`benchmarks.explain.documents`).
NODE_CPU = "64"
NODE_MEMORY = "256Gi"
#: Bounds on the set-up's stages: what to wait before calling a stage failed.
START_S = 120.0
#: ... and per node: the node agent registers them one at a time.
START_PER_NODE_S = 1.5
ESTABLISHED_S = 60.0
PROGRESS_S = 15.0
_POLL_S = 0.2
#: /proc/PID/comm of each control-plane process (truncated to 15 characters by the kernel).
COMPONENTS = {
    "etcd": "etcd",
    "kube-apiserver": "kube-apiserver",
    "kube-controller": "kube-controller-manager",
    "kube-scheduler": "kube-scheduler",
}
AGENT = "node agent"
_PLURALS = {
    "Namespace": "namespaces",
    "ConfigMap": "configmaps",
    "Deployment": "deployments",
    "AutomationStrategy": "automationstrategies",
    "StaticPolicy": "staticpolicies",
    "ProactivePolicy": "proactivepolicies",
}


class SetupError(RuntimeError):
    """The real cluster could not be set up; the message says which step and why."""


@dataclass
class RealCluster:
    """A running devcluster holding the generated cluster."""

    kubeconfig: str
    #: name -> pid of the node agent (devcluster's own process) and each component.
    pids: dict[str, int]
    objects: int
    pods: int
    setup: dict[str, Any] = field(default_factory=dict)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds each control-plane process has used so far."""
        spent = {name: process_cpu_seconds(pid) for name, pid in self.pids.items()}
        return {name: value for name, value in spent.items() if value is not None}


# ---------------------------------------------------------------------------- the API


def _ssl_context(config: Mapping[str, Any], directory: Path) -> ssl.SSLContext:
    """TLS with the kubeconfig's CA and client certificate (devcluster embeds both)."""
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    context = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
    )
    cert, key = directory / "bench-client.crt", directory / "bench-client.key"
    cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
    key.touch(mode=0o600)
    key.write_bytes(base64.b64decode(user["client-key-data"]))
    context.load_cert_chain(str(cert), str(key))
    return context


class Api:
    """The few calls the set-up makes: create, get, list and watch, JSON only."""

    def __init__(self, session: aiohttp.ClientSession, server: str) -> None:
        self.session = session
        self.server = server.rstrip("/")

    async def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        """One request; SetupError with the server's message for any non-2xx answer."""
        data = None if body is None else orjson.dumps(body)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        async with self.session.request(
            method, self.server + path, data=data, headers=headers
        ) as answer:
            text = await answer.read()
            if answer.status >= 300:
                try:
                    message = orjson.loads(text).get("message", text.decode())
                except orjson.JSONDecodeError:
                    message = text.decode(errors="replace")
                raise SetupError(f"{method} {path}: {answer.status} {message}")
            return orjson.loads(text) if text else {}

    async def watch(self, path: str, version: str) -> AsyncIterator[dict[str, Any]]:
        """The events of a watch on `path` from `version`, until the server ends it."""
        url = f"{self.server}{path}?watch=1&resourceVersion={version}&allowWatchBookmarks=true"
        timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
        async with self.session.get(url, timeout=timeout) as answer:
            if answer.status >= 300:
                raise SetupError(f"watch {path}: {answer.status} {await answer.text()}")
            buffer = b""
            async for chunk in answer.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield orjson.loads(line)


@asynccontextmanager
async def api(kubeconfig: Path) -> AsyncIterator[Api]:
    """An `Api` over the kubeconfig devcluster wrote."""
    config = yaml.safe_load(kubeconfig.read_text())
    context = _ssl_context(config, kubeconfig.parent)
    connector = aiohttp.TCPConnector(ssl=context, limit=IN_FLIGHT * 2)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        yield Api(session, config["clusters"][0]["cluster"]["server"])


def collection(obj: Mapping[str, Any]) -> str:
    """The path objects like `obj` are created at."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    namespace = obj["metadata"].get("namespace")
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{scope}/{_PLURALS[kind]}"


# ---------------------------------------------------------------------------- the set-up


async def _create_all(client: Api, objects: list[dict[str, Any]]) -> None:
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(obj: dict[str, Any]) -> None:
        async with gate:
            await client.call("POST", collection(obj), obj)

    # The first failure ends the set-up (the bench stops the cluster): one error, not a group.
    await asyncio.gather(*(one(obj) for obj in objects))


async def _until(what: str, bound_s: float, check: Any) -> None:
    """Poll `check()` until true; SetupError naming `what` once `bound_s` has passed."""
    deadline = time.monotonic() + bound_s
    while not await check():
        if time.monotonic() > deadline:
            raise SetupError(f"{what} within {bound_s:.0f} s")
        await asyncio.sleep(_POLL_S)


async def _install_crds(client: Api) -> None:
    names = []
    for path in sorted(CRD_DIR.glob("rightsizing.kubex.ai_*.yaml")):
        crd = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
        await client.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        names.append(crd["metadata"]["name"])

    async def established() -> bool:
        for name in names:
            crd = await client.call(
                "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
            )
            conditions = (crd.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    await _until("the kerf CRDs were not Established", ESTABLISHED_S, established)


async def _namespaces_ready(client: Api, count: int) -> None:
    async def ready() -> bool:
        listed = await client.call(
            "GET", "/api/v1/serviceaccounts?fieldSelector=metadata.name%3Ddefault"
        )
        return len(listed.get("items") or []) >= count

    await _until("the namespaces' default ServiceAccounts did not appear", ESTABLISHED_S, ready)


def _running(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    return status.get("phase") == "Running" and bool(statuses) and all(s["ready"] for s in statuses)


async def _pods_running(
    client: Api, version: str, expected: int, bound_s: float
) -> dict[str, float]:
    """Watch pods from `version` (before the first was made) until `expected` of them
    run; the seconds until the first and the last. Progress goes to stderr every
    PROGRESS_S (a long set-up should show it is moving)."""
    started = time.monotonic()
    running: dict[str, bool] = {}
    first: float | None = None
    reported = started
    while True:
        async for event in client.watch("/api/v1/pods", version):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                raise SetupError(f"watch of pods: {obj.get('message')}")
            version = obj["metadata"]["resourceVersion"]
            if kind == "BOOKMARK":
                continue
            uid = obj["metadata"]["uid"]
            running[uid] = kind != "DELETED" and _running(obj)
            now = time.monotonic()
            count = sum(running.values())
            if count and first is None:
                first = now - started
            if count >= expected:
                return {"first_running_s": round(first or 0.0, 1), "all_running_s": now - started}
            if now - reported >= PROGRESS_S:
                reported = now
                print(
                    f"  {count:,} of {expected:,} pods running ({len(running):,} created) "
                    f"after {now - started:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
            if now - started > bound_s:
                raise SetupError(
                    f"{count:,} of {expected:,} pods were running after {bound_s:.0f} s"
                )


async def populate(kubeconfig: Path, objects: ApiObjects, bound_s: float) -> dict[str, float]:
    """Create `objects` and wait until their pods run; seconds of each stage."""
    async with api(kubeconfig) as client:
        t0 = time.monotonic()
        await _install_crds(client)
        t1 = time.monotonic()
        await _create_all(client, objects.namespaces)
        await _namespaces_ready(client, len(objects.namespaces))
        t2 = time.monotonic()
        version = (await client.call("GET", "/api/v1/pods?limit=1"))["metadata"]["resourceVersion"]
        watching = asyncio.create_task(_pods_running(client, version, objects.pods, bound_s))
        await _create_all(client, objects.objects)
        t3 = time.monotonic()
        pods = await watching
        return {
            "crds_s": round(t1 - t0, 1),
            "namespaces_s": round(t2 - t1, 1),
            "objects_created_s": round(t3 - t2, 1),
            "first_pod_running_s": pods["first_running_s"],
            "all_pods_running_s": round(pods["all_running_s"], 1),
            "pods_running_per_s": round(objects.pods / pods["all_running_s"], 1),
        }


# ---------------------------------------------------------------------------- processes


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == pid:
            found.append(int(entry.name))
    return found


def component_pids(devcluster_pid: int) -> dict[str, int]:
    """The node agent (devcluster's own process) and each component devcluster started."""
    pids = {AGENT: devcluster_pid}
    for child in _children(devcluster_pid):
        try:
            comm = Path(f"/proc/{child}/comm").read_text().strip()
        except OSError:
            continue
        if comm in COMPONENTS:
            pids[COMPONENTS[comm]] = child
    return pids


def pin(pids: Mapping[str, int], cpus: set[int] | None) -> None:
    """Pin every thread of these processes to `cpus` (a Go binary's threads each have
    their own affinity; threads started later inherit their creator's)."""
    if not cpus:
        return
    for pid in pids.values():
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                os.sched_setaffinity(int(task.name), cpus)
            except OSError:
                continue  # the thread has exited


@contextmanager
def real_cluster(
    spec: Mapping[str, int], directory: Path, cpus: set[int] | None, *, bound_s: float
) -> Iterator[RealCluster]:
    """devcluster with the generated cluster of `spec` (`CLUSTER_ARGS`) created and its
    pods running, the control plane pinned to `cpus` once set up; stopped on exit."""
    objects = api_objects(**spec)
    started = time.monotonic()
    try:
        with running_backend(
            "real",
            directory,
            nodes=spec["nodes"],
            cpu=NODE_CPU,
            memory=NODE_MEMORY,
            start_timeout_s=START_S + START_PER_NODE_S * spec["nodes"],
        ) as backend:
            cluster = RealCluster(
                str(backend.kubeconfig),
                component_pids(backend.process.pid),
                len(objects.namespaces) + len(objects.objects),
                objects.pods,
            )
            cluster.setup["devcluster_start_s"] = round(time.monotonic() - started, 1)
            before = cluster.cpu_seconds()
            cluster.setup.update(asyncio.run(populate(backend.kubeconfig, objects, bound_s)))
            cluster.setup["cpu_seconds"] = cpu_delta(cluster.cpu_seconds(), before)
            pin(cluster.pids, cpus)
            yield cluster
    except BackendFailed as exc:
        # Only the start raises it: the benches report one kind of set-up failure.
        raise SetupError(str(exc)) from None
