"""`kerf webhook` and `kerf reconciler` as local processes on a backend, each with a
kubeconfig holding its own ServiceAccount's token (so a real API server enforces kerf's
RBAC); the webhook registered by URL with its caBundle, so the API server calls it for
every pod it creates."""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.backend import Backend, stop_group
from harness.errors import HarnessError
from harness.install import NAMESPACE, install, service_kubeconfig, webhook_configuration
from harness.kubectl import Kubectl
from harness.wait import wait_until

KERF = str(Path(sys.executable).parent / "kerf")
#: a resync every 10 s (the scenarios that check a steady cluster wait for resync passes),
#: and a follower that takes over 6 s after the leader stops renewing
RECONCILER_ARGS = ("--resync-interval", "10", "--lease-duration", "6", "--shards", "1")
#: how long a service may take to stop after SIGTERM before it is killed
STOP_S = 30.0


class ServiceExited(HarnessError):
    """A kerf service exited while it was awaited; the message ends with its log."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Service:
    """A kerf process (in a session of its own), its log and its HTTP port."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    port: int

    def stop(self) -> None:
        """SIGTERM (a graceful stop), then SIGKILL past a bound."""
        stop_group(self.process, STOP_S)

    def text(self) -> str:
        """What it has logged so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Kerf:
    """kerf running on a backend."""

    backend: Backend
    kubectl: Kubectl
    workdir: Path
    webhook: Service
    reconcilers: list[Service] = field(default_factory=list)
    ca_bundle: str = ""

    @property
    def webhook_url(self) -> str:
        """Where the API server calls the webhook."""
        return f"https://127.0.0.1:{self.webhook.port}/mutate"

    def metrics(self, service: Service) -> str:
        """The service's /metrics text."""
        scheme = "https" if service.name == "webhook" else "http"
        context = ssl.create_default_context(cafile=str(self.workdir / "certs" / "ca.crt"))
        url = f"{scheme}://127.0.0.1:{service.port}/metrics"
        with urllib.request.urlopen(url, context=context if scheme == "https" else None) as r:
            return str(r.read().decode())


def spawn(name: str, argv: list[str], workdir: Path, port: int) -> Service:
    """Start a kerf process in its own session, logging to `workdir/name.log`."""
    log = workdir / f"{name}.log"
    # The client library writes the kubeconfig's CA to a temporary file and removes it at
    # exit, which a SIGKILL skips: it stays in the run's directory, not in /tmp.
    tmp = workdir / f"{name}.tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "POD_NAMESPACE": NAMESPACE, "POD_NAME": f"kerf-{name}", "TMPDIR": str(tmp)}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=workdir,
            start_new_session=True,
        )
    return Service(name, process, log, port)


def _ready(service: Service, context: ssl.SSLContext | None) -> bool:
    if service.process.poll() is not None:
        raise ServiceExited(f"{service.name} exited:\n{service.text()[-3000:]}")
    scheme = "https" if context is not None else "http"
    try:
        url = f"{scheme}://127.0.0.1:{service.port}/readyz"
        with urllib.request.urlopen(url, context=context, timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def start_reconciler(
    kerf: Kerf,
    identity: str,
    account: str = "kerf-reconciler",
    args: Sequence[str] = RECONCILER_ARGS,
) -> Service:
    """One more reconciler replica (it leads once it holds the Lease), with a token of the
    ServiceAccount `account`, run with `args`."""
    port = free_port()
    config = service_kubeconfig(
        kerf.backend, kerf.kubectl, account, kerf.workdir / f"{identity}.kubeconfig"
    )
    argv = [KERF, "reconciler", "--kubeconfig", str(config), "--metrics-host", "127.0.0.1"]
    argv += ["--metrics-port", str(port), *args]
    service = spawn(identity, argv, kerf.workdir, port)
    kerf.reconcilers.append(service)
    wait_until(lambda: _ready(service, None), f"{identity} to be ready")
    return service


@contextlib.contextmanager
def running_kerf(backend: Backend, workdir: Path, *, reconciler: bool = True) -> Iterator[Kerf]:
    """kerf installed and running on `backend` (one reconciler replica, none without
    `reconciler`: the test starts its own); every service stopped on exit."""
    kubectl = Kubectl(backend.kubeconfig)
    install(kubectl)
    certs = workdir / "certs"
    subprocess.run([KERF, "certs", "--out", str(certs)], check=True, capture_output=True)
    ca_bundle = base64.b64encode((certs / "ca.crt").read_bytes()).decode()
    port = free_port()
    config = service_kubeconfig(backend, kubectl, "kerf-webhook", workdir / "webhook.kubeconfig")
    argv = [KERF, "webhook", "--kubeconfig", str(config), "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--tls-cert", str(certs / "tls.crt")]
    argv += ["--tls-key", str(certs / "tls.key")]
    webhook = spawn("webhook", argv, workdir, port)
    kerf = Kerf(backend, kubectl, workdir, webhook, ca_bundle=ca_bundle)
    try:
        context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        wait_until(lambda: _ready(webhook, context), "the webhook to be ready")
        kubectl.apply(webhook_configuration(kerf.webhook_url, ca_bundle))
        if reconciler:
            start_reconciler(kerf, "reconciler-0")
        yield kerf
    finally:
        for service in [*kerf.reconcilers, webhook]:
            service.stop()
