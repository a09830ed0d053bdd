"""The simulator: API server, HTTP endpoint and the simulated cluster around it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web
from kubernetes_asyncio import client

from kubesim import disruption
from kubesim.admission import Admission
from kubesim.api import HttpApi
from kubesim.apiserver import ApiServer
from kubesim.clock import Clock, FakeClock
from kubesim.controllers import Controllers
from kubesim.faults import Faults
from kubesim.kubelet import Kubelet
from kubesim.scheduler import Scheduler
from kubesim.store import Obj, Store

log = logging.getLogger(__name__)


class NotSettled(RuntimeError):
    """The simulated cluster kept changing for `max_rounds` steps (a feedback loop)."""


class Simulator:
    """An in-process Kubernetes API server plus controllers, scheduler and kubelet.

    Components run deterministically: after each client write (when `auto_settle`) and
    on `await settle()`, they step until nothing changes.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        seed: int = 0,
        history: int = 5000,
        auto_settle: bool = True,
        bookmark_interval: float = 60.0,
    ) -> None:
        self.clock: Clock = clock if clock is not None else FakeClock()
        self.store = Store(history)
        self.api = ApiServer(self.clock, self.store, seed=seed)
        self.admission = Admission(self.store)
        self.api.admit = self.admission.admit
        self.admission.in_tree = self.api.reinvoke_in_tree
        self.faults = Faults(self.store, seed)
        self.controllers = Controllers(self.api)
        self.scheduler = Scheduler(self.api)
        self.kubelet = Kubelet(self.api)
        self.http = HttpApi(
            self.api,
            self.faults,
            self._kick,
            bookmark_interval,
            service_addresses=self.admission.service_addresses,
        )
        #: every carried-out client write, once enabled (`sim.writes.enabled = True`)
        self.writes = self.http.writes
        self.auto_settle = auto_settle
        self.url = ""
        self.kubeconfig_path: Path | None = None
        self._runner: web.AppRunner | None = None
        self._lock = asyncio.Lock()
        self._dirty = asyncio.Event()
        self._background: asyncio.Task[None] | None = None

    @property
    def service_addresses(self) -> dict[tuple[str, str], str]:
        """`clientConfig.service` (namespace, name) -> "host:port" used by admission."""
        return self.admission.service_addresses

    # ----------------------------------------------------------------- lifecycle

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on host:port (0 picks a free port); returns the base URL."""
        self._runner = web.AppRunner(self.http.app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound_host, bound_port = self._runner.addresses[0][:2]
        self.url = f"http://{bound_host}:{bound_port}"
        self.http.server_address = f"{bound_host}:{bound_port}"
        self._background = asyncio.create_task(self._settle_on_writes())
        return self.url

    async def stop(self) -> None:
        """Stop serving and close watches and the webhook client."""
        if self._background is not None:
            self._background.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._background
            self._background = None
        self.store.close_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.admission.close()

    # ----------------------------------------------------------------- settling

    def _kick(self) -> None:
        if self.auto_settle:
            self._dirty.set()

    async def _settle_on_writes(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self.settle()
            except Exception:
                # A background settle must never kill the server; tests see the state.
                log.exception("kubesim: background settle failed")

    async def settle(self, max_rounds: int = 50) -> int:
        """Step controllers, scheduler, kubelet and PDB status until nothing changes.

        Returns the number of rounds that changed something.
        """
        async with self._lock:
            for rounds in range(max_rounds):
                before = self.store.resource_version
                await self.step()
                if self.store.resource_version == before:
                    return rounds
        raise NotSettled(f"the simulated cluster did not settle in {max_rounds} rounds")

    async def step(self) -> None:
        """One round of every simulated component."""
        await self.controllers.step()
        await self.scheduler.step()
        await self.kubelet.step()
        disruption.sync_budgets(self.api)

    async def advance(self, seconds: float) -> None:
        """Move the fake clock forward and settle (CronJobs, PDB timeouts)."""
        if not isinstance(self.clock, FakeClock):
            raise TypeError("advance() needs the simulator to run on a FakeClock")
        self.clock.advance(seconds)
        await self.settle()

    # ----------------------------------------------------------------- clients

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        """Write a kubeconfig for kubectl and kubernetes-asyncio pointing at this server."""
        path = Path(path)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kubesim", "cluster": {"server": self.url}}],
            "users": [{"name": "kubesim", "user": {"token": "kubesim"}}],
            "contexts": [
                {
                    "name": "kubesim",
                    "context": {"cluster": "kubesim", "user": "kubesim", "namespace": namespace},
                }
            ],
            "current-context": "kubesim",
            "preferences": {},
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig_path = path
        return path

    def api_client(self) -> client.ApiClient:
        """A kubernetes_asyncio ApiClient for this server (close it, or use `async with`)."""
        configuration = client.Configuration()
        configuration.host = self.url
        configuration.api_key = {"authorization": "kubesim"}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return client.ApiClient(configuration)

    # ----------------------------------------------------------------- fixtures

    async def add_namespace(self, name: str, labels: dict[str, str] | None = None) -> Obj:
        """Create a namespace (with optional labels)."""
        rt = self.api.resource("", "v1", "namespaces")
        return await self.api.create(rt, "", {"metadata": {"name": name, "labels": labels or {}}})

    async def add_node(
        self,
        name: str,
        cpu: str = "4",
        memory: str = "8Gi",
        pods: int = 110,
        labels: dict[str, str] | None = None,
        taints: list[Obj] | None = None,
        extra: dict[str, str] | None = None,
        ready: bool = True,
    ) -> Obj:
        """Create a Ready node with the given allocatable resources (capacity is the same)."""
        rt = self.api.resource("", "v1", "nodes")
        resources = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extra or {})}
        index = sum(1 for _ in self.store.iter(rt.key)) + 10
        stamp = self.clock.stamp()
        node: dict[str, Any] = {
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    **(labels or {}),
                },
            },
            "spec": {"taints": taints} if taints else {},
            "status": {
                "capacity": dict(resources),
                "allocatable": dict(resources),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "reason": "KubeletReady" if ready else "KubeletNotReady",
                        "message": "kubelet is posting ready status"
                        if ready
                        else "kubelet stopped posting node status",
                        "lastHeartbeatTime": stamp,
                        "lastTransitionTime": stamp,
                    }
                ],
                "addresses": [
                    {"type": "InternalIP", "address": f"10.0.0.{index}"},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {
                    "kubeletVersion": "v1.35.0",
                    "containerRuntimeVersion": "containerd://2.1.0",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "osImage": "kubesim",
                    "kernelVersion": "6.8.0",
                    "kubeProxyVersion": "",
                    "machineID": name,
                    "systemUUID": name,
                    "bootID": name,
                },
            },
        }
        created = await self.api.create(rt, "", node)
        await self.settle()
        return created
