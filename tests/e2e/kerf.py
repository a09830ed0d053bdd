"""kerf installed on an end-to-end backend as in production: its CRDs, namespace,
ServiceAccounts, RBAC and defaults applied with kubectl from `manifests/`; `kerf webhook`
and `kerf reconciler` as local processes, each with a kubeconfig that holds its own
ServiceAccount's token (so a real API server enforces kerf's RBAC); the webhook registered
by URL with its caBundle, so the API server calls it for every pod it creates."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tests.e2e.backends import ROOT, Backend

T = TypeVar("T")
KERF = str(Path(sys.executable).parent / "kerf")
KUBECTL = os.environ.get("KUBECTL") or str(ROOT / ".tools" / "bin" / "kubectl")
NAMESPACE = "kerf-system"
#: how long a condition may take to come true (a bound, not an expectation)
WAIT_S = 180.0


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: Callable[[], T], what: str, timeout_s: float = WAIT_S) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` past the bound."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


@dataclass
class Kubectl:
    """kubectl with one kubeconfig."""

    kubeconfig: Path

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """Run kubectl; its stdout (raises with stderr when it fails and `check`)."""
        done = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout if check else done.stdout + done.stderr

    def json(self, *args: str) -> Any:
        """`kubectl get ... -o json`, parsed."""
        return json.loads(self("get", *args, "-o", "json"))

    def apply(self, obj: dict[str, Any] | list[dict[str, Any]]) -> None:
        """`kubectl apply -f -` of one object or several."""
        docs = obj if isinstance(obj, list) else [obj]
        self("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))


@dataclass
class Service:
    """A kerf process, its log and its HTTP port."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    port: int

    def stop(self) -> None:
        """SIGTERM (a graceful stop), then SIGKILL past a bound."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

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

    def metrics(self, service: Service) -> str:
        """The service's /metrics text."""
        scheme = "https" if service.name == "webhook" else "http"
        context = ssl.create_default_context(cafile=str(self.workdir / "certs" / "ca.crt"))
        url = f"{scheme}://127.0.0.1:{service.port}/metrics"
        with urllib.request.urlopen(url, context=context if scheme == "https" else None) as r:
            return r.read().decode()


def _token(backend: Backend, kubectl: Kubectl, account: str) -> str:
    if not backend.real:
        return f"kubesim-{account}"  # kubesim accepts any token and enforces no RBAC
    return kubectl("-n", NAMESPACE, "create", "token", account, "--duration", "24h").strip()


def service_kubeconfig(backend: Backend, kubectl: Kubectl, account: str, path: Path) -> Path:
    """A kubeconfig for the ServiceAccount `account`: the admin's cluster, its token."""
    admin = yaml.safe_load(backend.kubeconfig.read_text())
    cluster = admin["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": account, "user": {"token": _token(backend, kubectl, account)}}],
        "contexts": [{"name": account, "context": {"cluster": cluster["name"], "user": account}}],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def install(kubectl: Kubectl) -> None:
    """kerf's CRDs, namespace, ServiceAccounts, RBAC and defaults, from `manifests/`."""
    kubectl("apply", "-k", "manifests/crds/")
    kubectl(
        "wait",
        "--for",
        "condition=Established",
        "crd",
        "-l",
        "app.kubernetes.io/part-of=kerf",
        "--timeout=120s",
    )
    kubectl("apply", "-k", "manifests/namespace/")
    for part in ("webhook", "reconciler"):
        for name in ("serviceaccount.yaml", "rbac.yaml"):
            kubectl("apply", "-f", f"manifests/{part}/{name}")
    kubectl("apply", "-k", "manifests/defaults/")


def webhook_configuration(url: str, ca_bundle: str) -> dict[str, Any]:
    """The manifests' MutatingWebhookConfiguration, pointed at `url` (kerf runs outside
    the cluster here) with the CA that signed its certificate."""
    path = ROOT / "manifests" / "webhook" / "mutatingwebhookconfiguration.yaml"
    config = yaml.safe_load(path.read_text())
    for hook in config["webhooks"]:
        hook["clientConfig"] = {"url": url, "caBundle": ca_bundle}
    return dict(config)


def spawn(name: str, argv: list[str], workdir: Path, port: int) -> Service:
    """Start a kerf process in its own session, logging to `workdir/name.log`."""
    log = workdir / f"{name}.log"
    env = {**os.environ, "POD_NAMESPACE": NAMESPACE, "POD_NAME": f"kerf-{name}"}
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
        raise AssertionError(f"{service.name} exited:\n{service.text()[-3000:]}")
    scheme = "https" if context is not None else "http"
    try:
        url = f"{scheme}://127.0.0.1:{service.port}/readyz"
        with urllib.request.urlopen(url, context=context, timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def start_reconciler(kerf: Kerf, identity: str) -> Service:
    """One more reconciler replica (it leads once it holds the Lease)."""
    port = free_port()
    config = service_kubeconfig(
        kerf.backend, kerf.kubectl, "kerf-reconciler", kerf.workdir / f"{identity}.kubeconfig"
    )
    argv = [KERF, "reconciler", "--kubeconfig", str(config), "--metrics-host", "127.0.0.1"]
    argv += ["--metrics-port", str(port), "--resync-interval", "30", "--lease-duration", "6"]
    service = spawn(identity, argv, kerf.workdir, port)
    kerf.reconcilers.append(service)
    wait_until(lambda: _ready(service, None), f"{identity} to be ready")
    return service


@contextlib.contextmanager
def running_kerf(backend: Backend, workdir: Path) -> Iterator[Kerf]:
    """kerf installed and running on `backend` (one reconciler replica)."""
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
        kubectl.apply(webhook_configuration(f"https://127.0.0.1:{port}/mutate", ca_bundle))
        start_reconciler(kerf, "reconciler-0")
        yield kerf
    finally:
        for service in [*kerf.reconcilers, webhook]:
            service.stop()
