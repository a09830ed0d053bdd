"""Running the webhook: uvicorn over TLS with the reloading certificate.

With a state directory the cluster view is its YAML files; without one it follows the
cluster through `app.kube.informer` watches, and the replica renews the webhook Lease.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import signal
import socket
import sys
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI
from kubernetes_asyncio import client

from app.kube.informer import ClusterFeed, api_client_from_config
from app.kube.kubexflags import DEFAULT_FLAG, KubexFlag, kubex_source
from app.kube.lease import holder_identity, own_namespace
from app.kube.reachability import reachability_of
from app.runtime.clock import Clock, utc_now
from app.runtime.heap import freeze_for_service, freeze_page
from app.store.statedir import load_view
from app.store.view import ClusterView
from webhook.connections import GuardedHttpProtocol
from webhook.defaults import (
    DEFAULT_HOST,
    DEFAULT_NAMESPACE,
    DEFAULT_PORT,
    DEFAULT_RELOAD_INTERVAL_S,
    ConnectionLimits,
)
from webhook.lease import RENEW_INTERVAL_S, LeaseRenewer
from webhook.logs import LOGGER_NAME, DecisionLog, configure_logging
from webhook.server import create_app
from webhook.tls import ReloadingCertificate

logger = logging.getLogger(LOGGER_NAME)


def uvicorn_server(
    app: FastAPI,
    certificate: ReloadingCertificate,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    log_level: str = "info",
    limits: ConnectionLimits | None = None,
) -> uvicorn.Server:
    """A uvicorn server for `app` that serves TLS from `certificate`'s context, with
    `limits` on every connection (`webhook.connections`; defaults when None).

    Logging is configured by kerf (JSON lines), so uvicorn's own config is disabled; the
    access log is off because every admission decision is logged already. Refusals of
    the connection guard go to the app's `refuse` hook (`webhook.server.create_app`).
    """
    protocol = partial(
        GuardedHttpProtocol,
        limits=limits or ConnectionLimits(),
        refuse=app.state.refuse,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,  # type: ignore[arg-type]
        ws="none",
        ssl_context_factory=lambda _config, _default: certificate.context,
        log_config=None,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        server_header=False,
        # The API server connects directly; no proxy's X-Forwarded-* headers to trust,
        # and the middleware that reads them would run on every request.
        proxy_headers=False,
    )
    return _Server(config)


class _Server(uvicorn.Server):
    """uvicorn's server, except that SIGTERM (how Kubernetes stops a pod) ends in exit 0.

    uvicorn shuts down gracefully, then re-raises the signal it caught, which kills the
    process at once: what runs after serving (closing the API client, which deletes the
    CA file it wrote under $TMPDIR) never ran, and every stop left a file behind.
    """

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM:
            self.should_exit = True
            return
        super().handle_exit(sig, frame)


async def serve(
    server: uvicorn.Server,
    certificate: ReloadingCertificate,
    *,
    reload_interval_s: float = DEFAULT_RELOAD_INTERVAL_S,
    sockets: list[socket.socket] | None = None,
    background: Sequence[Coroutine[Any, Any, None]] = (),
) -> None:
    """Serve until uvicorn stops (signal or `server.should_exit`), reloading certificates.

    `background` coroutines (the cluster feed, the Lease) run alongside and are cancelled
    when serving ends. They are meant to run forever; one that fails stops the server, so
    the pod restarts instead of admitting pods from a view nobody updates.
    """
    tasks = [asyncio.create_task(certificate.watch(reload_interval_s))]
    for coroutine in background:
        task = asyncio.create_task(coroutine)
        task.add_done_callback(partial(_stop_on_failure, server))
        tasks.append(task)
    try:
        await server.serve(sockets=sockets)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _stop_on_failure(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("a background task failed; stopping", exc_info=task.exception())
        server.should_exit = True


async def serve_cluster(
    server: uvicorn.Server,
    certificate: ReloadingCertificate,
    view: ClusterView,
    api_client: client.ApiClient,
    *,
    namespace: str,
    holder: str,
    reload_interval_s: float = DEFAULT_RELOAD_INTERVAL_S,
    lease_interval_s: float = RENEW_INTERVAL_S,
    sockets: list[socket.socket] | None = None,
    clock: Clock = utc_now,
    freeze_heap: bool = True,
) -> None:
    """Serve while watches keep `view` current and the Lease tells the reconciler that
    admission works (renewed only while this replica is ready: serving a synced view,
    the API server reachable; `clock` stamps the renewals).

    With `freeze_heap` (the default; the benchmark turns it off to measure the
    difference) the loaded objects are frozen as the initial lists arrive and once the
    view is synced (`app.runtime.heap`), so the collector's full collections stop walking the
    view, during the load and while requests wait.
    """
    feed = ClusterFeed(
        api_client,
        view,
        on_synced=freeze_for_service if freeze_heap else None,
        on_initial_page=freeze_page if freeze_heap else None,
    )
    lease = LeaseRenewer(
        api_client,
        namespace,
        holder,
        interval_s=lease_interval_s,
        ready=lambda: view.synced and server.started and feed.reachability.reachable,
        clock=clock,
    )
    await serve(
        server,
        certificate,
        reload_interval_s=reload_interval_s,
        sockets=sockets,
        background=(feed.run(), lease.run()),
    )


def run_server(
    server: uvicorn.Server,
    certificate: ReloadingCertificate,
    *,
    reload_interval_s: float = DEFAULT_RELOAD_INTERVAL_S,
    sockets: list[socket.socket] | None = None,
    background: Sequence[Coroutine[Any, Any, None]] = (),
) -> None:
    """`serve` on the event loop uvicorn would pick itself (uvloop when installed).

    A bare `asyncio.run` would always get the stdlib loop, which costs about a third of
    the throughput of TLS request handling.
    """
    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(
            serve(
                server,
                certificate,
                reload_interval_s=reload_interval_s,
                sockets=sockets,
                background=background,
            )
        )


#: the review `make run` and the docs use; any AdmissionReview file will do
EXAMPLE_REVIEW = Path("examples/admission/replicaset-pod.json")


def curl_line(host: str, port: int, tls_cert: Path | str) -> str:
    """A curl command that sends an example review to a server on `host`:`port`, trusting
    the `ca.crt` that `kerf certs` writes beside the certificate."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"  # the certificate of `kerf certs` names 127.0.0.1 and localhost
    elif host == "::":
        host = "::1"
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    ca = Path(tls_cert).with_name("ca.crt")
    review = EXAMPLE_REVIEW if EXAMPLE_REVIEW.is_file() else Path("review.json")
    return shlex.join(
        [
            "curl",
            "--cacert",
            str(ca),
            "-H",
            "Content-Type: application/json",
            "-d",
            f"@{review}",
            f"https://{authority}/mutate",
        ]
    )


async def announce_when_listening(server: uvicorn.Server, line: str) -> None:
    """Print `line` on stderr once `server` listens (not before: a pasted command would
    find nothing to talk to)."""
    while not server.started:
        await asyncio.sleep(0.05)
    print(f"kerf webhook: serving; try:\n{line}", file=sys.stderr, flush=True)


def run_webhook(
    state_dir: Path | str | None,
    tls_cert: Path | str,
    tls_key: Path | str,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    kubeconfig: Path | str | None = None,
    kubex_recommendations: KubexFlag = DEFAULT_FLAG,
    deadline_s: float = 1.0,
    reload_interval_s: float = DEFAULT_RELOAD_INTERVAL_S,
    log_level: str = "info",
    limits: ConnectionLimits | None = None,
) -> None:
    """Serve the webhook until stopped: over the YAML files in `state_dir`, or, without
    it, over the cluster (in-cluster config, else `kubeconfig`, else `KUBECONFIG`).
    `kubex_recommendations` names Kubex's recommendation ConfigMap (app/kube/kubexflags.py)."""
    configure_logging(log_level)
    decisions = DecisionLog(level=log_level)
    certificate = ReloadingCertificate(tls_cert, tls_key)
    guard = limits or ConnectionLimits()

    def serving(view: ClusterView, reachable: Callable[[], bool] = lambda: True) -> uvicorn.Server:
        app = create_app(
            view,
            deadline_s=deadline_s,
            decision_log=decisions,
            read_timeout_s=guard.read_timeout_s,
            max_body_values=guard.max_body_values,
            reachable=reachable,
        )
        return uvicorn_server(
            app, certificate, host=host, port=port, log_level=log_level, limits=guard
        )

    if state_dir is not None:
        view = load_view(
            [Path(state_dir)], kubex_source=kubex_source(kubex_recommendations, DEFAULT_NAMESPACE)
        )
        freeze_for_service()
        server = serving(view)
        announce = announce_when_listening(server, curl_line(host, port, tls_cert))
        run_server(server, certificate, reload_interval_s=reload_interval_s, background=[announce])
        return

    async def watch_cluster() -> None:
        namespace = own_namespace()
        view = ClusterView(
            own_namespace=namespace, kubex_source=kubex_source(kubex_recommendations, namespace)
        )
        async with await api_client_from_config(kubeconfig) as api_client:
            # Not ready while the API server cannot be reached (app/kube/reachability.py).
            server = serving(view, lambda: reachability_of(api_client).reachable)
            await serve_cluster(
                server,
                certificate,
                view,
                api_client,
                namespace=namespace,
                holder=holder_identity(),
                reload_interval_s=reload_interval_s,
            )

    # The same event loop uvicorn would choose (uvloop when installed), as run_server does.
    loop_factory = uvicorn.Config(app="kerf:webhook", loop="auto").get_loop_factory()
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(watch_cluster())
