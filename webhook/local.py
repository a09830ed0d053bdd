"""The webhook served in-process on 127.0.0.1, fed by watches of a cluster: how the demo
and the end-to-end tests run the production wiring (`serve_cluster`) next to kubesim."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from app.runtime.clock import Clock, utc_now
from app.store.view import ClusterView
from webhook.certs import issue_certificates, write_certificates
from webhook.logs import DecisionLog
from webhook.main import serve_cluster, uvicorn_server
from webhook.server import create_app
from webhook.tls import ReloadingCertificate

READY_TIMEOUT_S = 20.0


@dataclass
class LocalWebhook:
    """A running webhook: its view, its URL, the caBundle that verifies it."""

    view: ClusterView
    url: str
    ca_bundle: str
    server: Any
    task: asyncio.Task[None]

    async def stop(self) -> None:
        """Stop serving (and renewing the Lease)."""
        self.server.should_exit = True
        await asyncio.wait_for(self.task, 10)


def free_socket() -> socket.socket:
    """A socket bound to a free port of 127.0.0.1."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.asynccontextmanager
async def running_local_webhook(
    api: client.ApiClient,
    cert_dir: Path,
    *,
    holder: str = "kerf-webhook-local",
    lease_interval_s: float = 0.2,
    clock: Clock = utc_now,
    log_level: str = "info",
    freeze_heap: bool = False,
) -> AsyncIterator[LocalWebhook]:
    """The webhook on 127.0.0.1:<free port> with a fresh CA, ready (synced) on entry;
    decision lines below `log_level` are not written. Its process is shared (kubesim,
    the demo, tests), so unlike `kerf webhook` it leaves the garbage collector alone
    unless `freeze_heap` (see `serve_cluster`)."""
    issued = issue_certificates()  # its SANs include 127.0.0.1
    write_certificates(issued, cert_dir)
    certificate = ReloadingCertificate(cert_dir / "tls.crt", cert_dir / "tls.key")
    view = ClusterView()
    sock = free_socket()
    port = sock.getsockname()[1]
    app = create_app(view, decision_log=DecisionLog(level=log_level))
    server = uvicorn_server(app, certificate, host="127.0.0.1", port=port, log_level="warning")
    task = asyncio.create_task(
        serve_cluster(
            server,
            certificate,
            view,
            api,
            namespace="kerf-system",
            holder=holder,
            lease_interval_s=lease_interval_s,
            sockets=[sock],
            clock=clock,
            freeze_heap=freeze_heap,
        )
    )
    webhook = LocalWebhook(view, f"https://127.0.0.1:{port}/mutate", issued.ca_bundle, server, task)
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_TIMEOUT_S
        while not (server.started and view.synced):
            if task.done() or loop.time() > deadline:
                raise RuntimeError("the local webhook did not become ready")
            await asyncio.sleep(0.01)
        yield webhook
    finally:
        if not task.done():
            await webhook.stop()
        sock.close()


def webhook_configuration(url: str, ca_bundle: str) -> dict[str, Any]:
    """Like manifests/webhook/mutatingwebhookconfiguration.yaml, with a URL client config."""

    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "kerf-webhook"},
        "webhooks": [
            {
                "name": "pods.kerf.rightsizing.kubex.ai",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "timeoutSeconds": 3,
                "reinvocationPolicy": "IfNeeded",
                "clientConfig": {"url": url, "caBundle": ca_bundle},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                    }
                ],
            }
        ],
    }
