"""The soak's cluster: kubesim in this process (so the chaos sets its faults and reads its
write log directly), kerf installed from `manifests/` with kubectl as a user would, one
`kerf webhook` and two `kerf reconciler` replicas (three, sharded, with `shards` > 1) as
local processes, each with a kubeconfig of its own token so every write can be told
apart."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import socket
import ssl
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from app.model.shards import CLUSTER_BUCKET, bucket_lease_name, bucket_of
from kubesim.clock import Clock
from kubesim.sim import Simulator
from soak.processes import KerfProcess
from soak.workloads import NAMESPACE, WORKLOADS, strategies

ROOT = Path(__file__).resolve().parents[1]
KERF = str(Path(sys.executable).parent / "kerf")
KERF_NAMESPACE = "kerf-system"
LEASE = f"{KERF_NAMESPACE}/kerf-reconciler"
LEASE_DURATION_S = 6.0
#: one leader and a follower; sharded, a third to share the buckets with
REPLICAS = 2
SHARDED_REPLICAS = 3
#: how long start-up steps may take on a loaded machine (a bound, not an expectation)
START_TIMEOUT_S = 120.0


class SoakError(RuntimeError):
    """The soak could not set its cluster up (said in one line)."""


def kubectl_path() -> str:
    """`$KUBECTL`, else the project's `.tools/bin/kubectl`."""
    return os.environ.get("KUBECTL") or str(ROOT / ".tools" / "bin" / "kubectl")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def run_tool(argv: list[str], stdin: str | None = None) -> str:
    """Run a command without blocking the simulator's loop; its stdout, or SoakError."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=ROOT,
        )
    except FileNotFoundError:
        raise SoakError(f"{argv[0]} not found (make tools installs kubectl)") from None
    out, err = await process.communicate(stdin.encode() if stdin is not None else None)
    if process.returncode != 0:
        command = " ".join(Path(argv[0]).name if i == 0 else a for i, a in enumerate(argv))
        raise SoakError(f"{command} failed: {err.decode(errors='replace').strip()}")
    return out.decode()


async def wait_for(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float) -> None:
    """Poll `check` until it holds; SoakError naming `what` past the bound."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await check():
        if loop.time() > deadline:
            raise SoakError(f"timed out waiting for {what}")
        await asyncio.sleep(0.5)


class LogFile(logging.Handler):
    """This process's warnings and errors (kubesim's among them), with tracebacks, in a
    file the traceback check reads like the services' logs."""

    def __init__(self, path: Path) -> None:
        super().__init__(logging.WARNING)
        self.path = path
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        with open(self.path, "a") as out:
            out.write(self.format(record) + "\n")


@dataclass
class Cluster:
    """The running soak cluster."""

    sim: Simulator
    workdir: Path
    kubeconfig: Path
    webhook: KerfProcess
    reconcilers: list[KerfProcess]
    #: bearer token -> reconciler identity
    tokens: dict[str, str]
    log: Path
    session: aiohttp.ClientSession
    processes: list[KerfProcess] = field(default_factory=list)
    #: the reconcilers' buckets (`--shards`; 1: one leader on the Lease `LEASE`)
    shards: int = 1

    async def kubectl(self, *args: str, stdin: str | None = None) -> str:
        """kubectl as the soak's administrator."""
        return await run_tool([kubectl_path(), "--kubeconfig", str(self.kubeconfig), *args], stdin)

    async def apply(self, objects: list[dict[str, Any]]) -> None:
        """`kubectl apply -f -` of these objects."""
        await self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects))

    def lease_of(self, namespace: str) -> str:
        """The Lease ("namespace/name") whose holder writes for `namespace`: the leader's,
        or sharded the bucket's of the namespace (the cluster bucket's for no namespace)."""
        if self.shards == 1:
            return LEASE
        bucket = bucket_of(namespace, self.shards) if namespace else CLUSTER_BUCKET
        return f"{KERF_NAMESPACE}/{bucket_lease_name('reconciler', bucket, self.shards)}"

    def bucket_leases(self) -> list[str]:
        """Every bucket's Lease, "namespace/name" (the leader's alone, unsharded)."""
        if self.shards == 1:
            return [LEASE]
        names = (bucket_lease_name("reconciler", b, self.shards) for b in range(self.shards))
        return [f"{KERF_NAMESPACE}/{name}" for name in names]

    def holder(self, lease: str) -> str:
        """A Lease's holderIdentity ("" when there is none)."""
        namespace, name = lease.split("/")
        stored = self.sim.store.get(("coordination.k8s.io", "leases"), namespace, name) or {}
        return str((stored.get("spec") or {}).get("holderIdentity") or "")

    def lease_holder(self) -> str:
        """Who writes for the soak's workloads: the holder of their namespace's Lease."""
        return self.holder(self.lease_of(NAMESPACE))

    def replica(self, identity: str) -> KerfProcess | None:
        """The reconciler process of that identity."""
        return next((r for r in self.reconcilers if r.name == identity), None)


def _kubeconfig(server: str, user: str, token: str, path: Path) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubesim", "cluster": {"server": server}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "kubesim", "user": user}}],
        "current-context": user,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _service(name: str, argv: list[str], workdir: Path, port: int, **extra: Any) -> KerfProcess:
    env = {**os.environ, "POD_NAMESPACE": KERF_NAMESPACE, "POD_NAME": name}
    return KerfProcess(name, argv, env, workdir, port, **extra)


async def _install(cluster: Cluster) -> None:
    await cluster.kubectl("apply", "-k", str(ROOT / "manifests" / "crds"))
    await cluster.kubectl(
        "wait", "--for", "condition=Established", "crd", "-l",
        "app.kubernetes.io/part-of=kerf", "--timeout=120s",
    )  # fmt: skip
    await cluster.kubectl("apply", "-k", str(ROOT / "manifests" / "namespace"))
    for part in ("webhook", "reconciler"):
        for name in ("serviceaccount.yaml", "rbac.yaml"):
            await cluster.kubectl("apply", "-f", str(ROOT / "manifests" / part / name))
    await cluster.kubectl("apply", "-k", str(ROOT / "manifests" / "defaults"))


def _webhook_configuration(url: str, ca_bundle: str) -> dict[str, Any]:
    path = ROOT / "manifests" / "webhook" / "mutatingwebhookconfiguration.yaml"
    config: dict[str, Any] = yaml.safe_load(path.read_text())
    for hook in config["webhooks"]:
        hook["clientConfig"] = {"url": url, "caBundle": ca_bundle}
    return config


async def _start_webhook(cluster: Cluster) -> None:
    certs = cluster.workdir / "certs"
    await run_tool([KERF, "certs", "--out", str(certs)])
    ca_bundle = base64.b64encode((certs / "ca.crt").read_bytes()).decode()
    webhook = cluster.webhook
    webhook.tls = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    await webhook.start()
    await wait_for(
        lambda: webhook.ready(cluster.session), "the webhook to be ready", START_TIMEOUT_S
    )
    await cluster.apply([_webhook_configuration(webhook.url("/mutate"), ca_bundle)])


async def _workloads(cluster: Cluster) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    objects: list[dict[str, Any]] = [namespace, *strategies()]
    for workload in WORKLOADS:
        objects.append(workload.deployment())
        if (pdb := workload.pdb()) is not None:
            objects.append(pdb)
    await cluster.apply(objects)


async def start_cluster(
    workdir: Path, seed: int, session: aiohttp.ClientSession, shards: int = 1
) -> Cluster:
    """kubesim with three nodes, kerf installed, the soak's workloads, the webhook and the
    reconciler replicas ready (three sharing `shards` buckets when more than one)."""
    log = workdir / "kubesim.log"
    logging.getLogger().addHandler(LogFile(log))
    sim = Simulator(clock=Clock(), seed=seed)
    await sim.start()
    kubeconfig = sim.write_kubeconfig(workdir / "admin.kubeconfig")
    for index in range(3):
        await sim.add_node(f"node-{index + 1}", cpu="8", memory="16Gi")
    certs = workdir / "certs"
    port = free_port()
    webhook_argv = [KERF, "webhook", "--host", "127.0.0.1", "--port", str(port)]
    webhook_argv += ["--tls-cert", str(certs / "tls.crt"), "--tls-key", str(certs / "tls.key")]
    webhook_argv += [
        "--kubeconfig", str(_kubeconfig(sim.url, "webhook", "soak-webhook", workdir / "webhook.kubeconfig")),
    ]  # fmt: skip
    webhook = _service("kerf-webhook", webhook_argv, workdir, port)
    tokens: dict[str, str] = {}
    reconcilers = []
    count = REPLICAS if shards == 1 else SHARDED_REPLICAS
    for identity in (f"kerf-reconciler-{i}" for i in range(count)):
        token = f"soak-{identity}"
        tokens[token] = identity
        config = _kubeconfig(sim.url, identity, token, workdir / f"{identity}.kubeconfig")
        metrics = free_port()
        argv = [KERF, "reconciler", "--kubeconfig", str(config), "--metrics-host", "127.0.0.1"]
        argv += ["--metrics-port", str(metrics), "--resync-interval", "30"]
        argv += ["--lease-duration", str(LEASE_DURATION_S), "--shards", str(shards)]
        reconcilers.append(_service(identity, argv, workdir, metrics))
    cluster = Cluster(
        sim,
        workdir,
        kubeconfig,
        webhook,
        reconcilers,
        tokens,
        log,
        session,
        [webhook, *reconcilers],
        shards,
    )
    await _install(cluster)
    await _workloads(cluster)
    await _start_webhook(cluster)
    for replica in reconcilers:
        await replica.start()
    for replica in reconcilers:
        await wait_for(
            lambda r=replica: r.ready(cluster.session),
            f"{replica.name} to be ready",
            START_TIMEOUT_S,
        )
    return cluster


async def stop_cluster(cluster: Cluster) -> None:
    """Stop kerf's processes gracefully, then the simulator."""
    await asyncio.gather(*(p.stop() for p in cluster.processes))
    await cluster.sim.stop()
