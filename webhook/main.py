"""Running the webhook: uvicorn over TLS with the reloading certificate."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn
from fastapi import FastAPI

from webhook.logs import configure_logging
from webhook.server import create_app
from webhook.tls import ReloadingCertificate

if TYPE_CHECKING:
    from app.view import ClusterView

DEFAULT_HOST = "0.0.0.0"
DEFAULT_PORT = 8443
DEFAULT_RELOAD_INTERVAL_S = 10.0


def uvicorn_server(
    app: FastAPI,
    certificate: ReloadingCertificate,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    log_level: str = "info",
) -> uvicorn.Server:
    """A uvicorn server for `app` that serves TLS from `certificate`'s context.

    Logging is configured by kerf (JSON lines), so uvicorn's own config is disabled; the
    access log is off because every admission decision is logged already.
    """
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        ssl_context_factory=lambda _config, _default: certificate.context,
        log_config=None,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        server_header=False,
    )
    return uvicorn.Server(config)


async def serve(
    server: uvicorn.Server,
    certificate: ReloadingCertificate,
    *,
    reload_interval_s: float = DEFAULT_RELOAD_INTERVAL_S,
    sockets: list[socket.socket] | None = None,
) -> None:
    """Serve until uvicorn stops (signal or `server.should_exit`), reloading certificates."""
    watcher = asyncio.create_task(certificate.watch(reload_interval_s))
    try:
        await server.serve(sockets=sockets)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


def run_webhook(
    state_dir: Path | str,
    tls_cert: Path | str,
    tls_key: Path | str,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    deadline_s: float = 1.0,
    reload_interval_s: float = DEFAULT_RELOAD_INTERVAL_S,
    log_level: str = "info",
) -> None:
    """Serve the webhook over the file-backed cluster view in `state_dir` until stopped."""
    from app.view import ClusterView

    configure_logging(log_level)
    view: ClusterView = ClusterView.from_state_dir(Path(state_dir))
    certificate = ReloadingCertificate(tls_cert, tls_key)
    app = create_app(view, deadline_s=deadline_s)
    server = uvicorn_server(app, certificate, host=host, port=port, log_level=log_level)
    asyncio.run(serve(server, certificate, reload_interval_s=reload_interval_s))
