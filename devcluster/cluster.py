"""Start and stop the whole dev cluster: PKI, etcd, kube-apiserver, controller manager,
scheduler and the node agent, all on 127.0.0.1, all data in one temp dir."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from devcluster import certs, kubeconfig
from devcluster.agent import NodeAgent
from devcluster.apiclient import ApiError, Client
from devcluster.metrics import MetricsServer
from devcluster.network import SERVICE_CIDR, machine_address
from devcluster.nodes import NodeShape
from devcluster.processes import (
    Component,
    ComponentError,
    find_binaries,
    find_images,
    free_port,
    start,
    tools_dir,
)
from devcluster.realnode import NODE_NAME, NodeSize, RealNode

AGENT_NODE_CPU = "4"
AGENT_NODE_MEMORY = "8Gi"
ISSUER = "https://kubernetes.default.svc.cluster.local"
#: Bounds on each start-up stage (generous: a cold apiserver on a loaded 2-core machine).
ETCD_READY_S = 30
APISERVER_READY_S = 90
CLUSTER_READY_S = 90
#: ... and, for many nodes, this much more per node (the agent registers them one by one).
CLUSTER_READY_PER_NODE_S = 1.0
_POLL_S = 0.2
#: Requests per second the controller manager and the scheduler may each send.
CLIENT_QPS = 500
#: Every write at level Metadata (who, what, when, the answer's code), nothing else: the
#: reads and watches would be most of the log and tell nothing about who changed what.
#: Lease writes in kerf's namespace at level Request: the holder each one names is what
#: tells a renewal from a release, so the log alone gives each Lease's terms.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    verbs: [get, list, watch]
  - level: Request
    namespaces: [kerf-system]
    resources: [{group: coordination.k8s.io, resources: [leases]}]
  - level: Metadata
"""


@dataclass(frozen=True)
class Options:
    """What `python -m devcluster` was asked for."""

    kubeconfig: Path
    nodes: int = 1
    #: the node's allocatable (None: the agent's 4 cores and 8Gi; a real node's machine,
    #: less a reserve)
    node_cpu: str | None = None
    node_memory: str | None = None
    #: where kube-apiserver writes its audit log of writes (None: no audit log)
    audit_log: Path | None = None
    #: "agent": devcluster/agent.py plays the kubelet of every node; "real": containerd and
    #: one real kubelet (devcluster/realnode.py)
    kubelet: str = "agent"
    #: more docker-archive tarballs a real node imports at start, after pause and kerf-load
    #: (the agent runs no image and ignores them)
    images: tuple[Path, ...] = ()


class DevCluster:
    """One running dev cluster; `start()` then `stop()` (always, even after a failure)."""

    def __init__(self, options: Options) -> None:
        self.options = options
        real = options.kubelet == "real"
        self.binaries = find_binaries(tools_dir(), with_kubelet=real)
        self.images = [*find_images(), *options.images] if real else []
        self.data_dir = Path(tempfile.mkdtemp(prefix="devcluster-"))
        self.components: list[Component] = []
        self.server = ""
        self.client: Client | None = None
        self.agent: NodeAgent | None = None
        self._agent_task: asyncio.Task[None] | None = None
        self.metrics: MetricsServer | None = None
        self.node: RealNode | None = None
        #: what the real node could not put back when it stopped, one line each
        self.problems: list[str] = []

    async def start(self) -> str:
        """Bring the cluster up; returns the API server's URL once the kubeconfig is
        written. ComponentError names the stage that failed."""
        pki = certs.generate(self.data_dir / "pki")
        etcd_url = await self._start_etcd()
        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        apiserver = await self._launch("kube-apiserver", self._apiserver_args(pki, etcd_url, port))
        self.client = Client(self.server, pki.ca.cert, pki.admin)
        await self._wait(apiserver, APISERVER_READY_S, "to answer /readyz", self._readyz)
        for name, pair in (
            ("kube-controller-manager", pki.controller_manager),
            ("kube-scheduler", pki.scheduler),
        ):
            path = self.data_dir / f"{name}.kubeconfig"
            kubeconfig.write(path, kubeconfig.render(self.server, pki.ca.cert, pair, name))
            await self._launch(name, self._component_args(name, path, pki))
        if self.options.kubelet == "real":
            await self._start_real_node(pki)
        else:
            await self._start_agent()
        ready_s = CLUSTER_READY_S + CLUSTER_READY_PER_NODE_S * self.options.nodes
        await self._wait(None, ready_s, "to have Ready nodes", self._cluster_ready)
        text = kubeconfig.render(self.server, pki.ca.cert, pki.admin, "devcluster-admin")
        kubeconfig.write(self.options.kubeconfig, text)
        return self.server

    async def _start_agent(self) -> None:
        assert self.client is not None
        shape = NodeShape(
            cpu=self.options.node_cpu or AGENT_NODE_CPU,
            memory=self.options.node_memory or AGENT_NODE_MEMORY,
        )
        self.agent = NodeAgent(self.client, shape, self.options.nodes)
        self._agent_task = asyncio.create_task(self.agent.run())
        self.metrics = MetricsServer(self.agent.pods.values)
        await self.metrics.start()

    async def _start_real_node(self, pki: certs.Pki) -> None:
        size = NodeSize.of(self.options.node_cpu, self.options.node_memory)
        self.node = RealNode(
            self.data_dir, self.binaries["kubelet"], self.server, pki, size, self.images
        )
        try:
            await self.node.start()
        finally:
            self.components.extend(self.node.components)

    @property
    def metrics_url(self) -> str:
        """Where the node's cAdvisor series are served: the agent's own server, or the
        real kubelet's through the API server's node proxy (authenticated)."""
        if self.metrics is not None:
            return self.metrics.url
        return f"{self.server}/api/v1/nodes/{NODE_NAME}/proxy/metrics/cadvisor"

    async def _start_etcd(self) -> str:
        client_port, peer_port = free_port(), free_port()
        url, peer = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
        etcd = await self._launch(
            "etcd",
            [
                self.binaries["etcd"],
                "--name=devcluster",
                f"--data-dir={self.data_dir / 'etcd'}",
                f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=devcluster={peer}",
                # A throwaway store: durability costs start-up time and buys nothing.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

        async def healthy() -> bool:
            async with aiohttp.ClientSession() as session, session.get(f"{url}/health") as answer:
                return answer.status == 200 and '"true"' in await answer.text()

        await self._wait(etcd, ETCD_READY_S, "to become healthy", healthy)
        return url

    def _apiserver_args(self, pki: certs.Pki, etcd_url: str, port: int) -> list[str | Path]:
        return [
            self.binaries["kube-apiserver"],
            f"--etcd-servers={etcd_url}",
            *self._address_args(),
            f"--secure-port={port}",
            f"--cert-dir={self.data_dir / 'apiserver'}",
            f"--tls-cert-file={pki.serving.cert}",
            f"--tls-private-key-file={pki.serving.key}",
            f"--client-ca-file={pki.ca.cert}",
            # To kubelets (logs, exec, the node proxy): a client certificate, and theirs verified.
            f"--kubelet-client-certificate={pki.kubelet_client.cert}",
            f"--kubelet-client-key={pki.kubelet_client.key}",
            f"--kubelet-certificate-authority={pki.ca.cert}",
            "--kubelet-preferred-address-types=InternalIP",
            "--authorization-mode=Node,RBAC",
            # 1.35's defaults already include ServiceAccount, MutatingAdmissionWebhook and
            # ValidatingAdmissionWebhook; NodeRestriction is what kubeadm adds.
            "--enable-admission-plugins=NodeRestriction",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            "--profiling=false",
            # Webhook calls through `clientConfig.service` go to an endpoint (a pod's IP,
            # this machine's address: devcluster/network.py), not to the cluster IP that
            # nothing routes.
            "--enable-aggregator-routing=true",
            *self._audit_args(),
        ]

    def _address_args(self) -> list[str]:
        """Loopback for the node agent. A real node's pods reach the `kubernetes` Service,
        which the node routes to this machine's address (realnode.py), so the server
        listens there too and publishes it as the Service's endpoint."""
        address = machine_address() if self.options.kubelet == "real" else None
        if address is None:
            # The `kubernetes` Service would get 127.0.0.1 as its endpoint, which Endpoints
            # validation refuses (loopback) every 10 s; no pod calls it.
            return [
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
            ]
        return ["--bind-address=0.0.0.0", f"--advertise-address={address}"]

    def _audit_args(self) -> list[str | Path]:
        if self.options.audit_log is None:
            return []
        policy = self.data_dir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.options.audit_log}",
            "--audit-log-format=json",
        ]

    def _component_args(self, name: str, config: Path, pki: certs.Pki) -> list[str | Path]:
        common: list[str | Path] = [
            self.binaries[name],
            f"--kubeconfig={config}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            # No health or metrics endpoint: nothing here reads them, and no port to pick.
            "--secure-port=0",
            # The default client rate limits (20/s for the controller manager, 50/s for the
            # scheduler) share a big cluster's API server; here they only made a few
            # thousand pods wait minutes to be created and bound.
            f"--kube-api-qps={CLIENT_QPS}",
            f"--kube-api-burst={2 * CLIENT_QPS}",
        ]
        if name == "kube-scheduler":
            return common
        return [
            *common,
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca.cert}",
            "--use-service-account-credentials=true",
            "--controllers=*",
            f"--cluster-signing-cert-file={pki.ca.cert}",
            f"--cluster-signing-key-file={pki.ca.key}",
        ]

    async def _launch(self, name: str, argv: list[str | Path]) -> Component:
        component = await start(name, argv, self.data_dir / f"{name}.log")
        self.components.append(component)
        return component

    async def _readyz(self) -> bool:
        assert self.client is not None
        try:
            await self.client.request("GET", "/readyz", timeout_s=5)
        except ApiError:
            return False
        return True

    async def _cluster_ready(self) -> bool:
        """Every node Ready and untainted (the controller manager lifts the not-ready
        taint a new Node gets), and the `default` ServiceAccount made, so pods can be
        created and scheduled as soon as the kubeconfig appears."""
        assert self.client is not None
        listed = await self.client.get("/api/v1/nodes")
        ready = [
            n
            for n in listed.get("items") or []
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (n.get("status") or {}).get("conditions") or []
            )
            and not any(
                t.get("key") == "node.kubernetes.io/not-ready"
                for t in (n.get("spec") or {}).get("taints") or []
            )
        ]
        if len(ready) < self.options.nodes:
            return False
        try:
            await self.client.get("/api/v1/namespaces/default/serviceaccounts/default")
        except ApiError:
            return False
        return True

    async def _wait(
        self,
        component: Component | None,
        bound_s: float,
        what: str,
        check: Callable[[], Awaitable[bool]],
    ) -> None:
        """Poll `check` until true; ComponentError if `bound_s` passes or any component (or
        the node agent) exits first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + bound_s
        name = component.name if component else "the cluster"
        while True:
            for started in self.components:
                if not started.running:
                    raise ComponentError(
                        f"{started.name} exited with code {started.process.returncode}",
                        started.log_tail(),
                    )
            if self._agent_task is not None and self._agent_task.done():
                error = self._agent_task.exception()
                raise ComponentError(f"the node agent stopped: {error}")
            with contextlib.suppress(aiohttp.ClientError, ApiError, OSError, TimeoutError):
                if await check():
                    return
            if loop.time() > deadline:
                tail = component.log_tail() if component else ""
                raise ComponentError(f"{name} did not manage {what} within {bound_s:.0f} s", tail)
            await asyncio.sleep(_POLL_S)

    async def wait_exit(self) -> ComponentError:
        """Block until a component exits, or the node agent stops, on its own; what
        happened, as the error to report."""
        waits: dict[asyncio.Future[Any], Component | None] = {
            asyncio.ensure_future(c.process.wait()): c for c in self.components
        }
        if self._agent_task is not None:
            waits[self._agent_task] = None
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for future in pending:
            if future is not self._agent_task:
                future.cancel()
        finished = next(iter(done))
        component = waits[finished]
        if component is None:
            error = None if finished.cancelled() else finished.exception()
            return ComponentError(f"the node agent stopped: {error!r}")
        return ComponentError(
            f"{component.name} exited with code {component.process.returncode}",
            component.log_tail(),
        )

    async def stop(self) -> None:
        """Stop the agent or the real node (which puts the machine back), then every
        component (the scheduler and controller manager first, etcd last), then delete
        the data dir."""
        if self._agent_task is not None:
            self._agent_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._agent_task
        if self.metrics is not None:
            await self.metrics.stop()
        if self.client is not None:
            await self.client.close()
        if self.node is not None:
            self.problems = await self.node.stop()
        for component in reversed(self.components):
            await component.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)
