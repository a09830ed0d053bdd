"""A real webhook server on a random localhost port, over TLS, for the tests."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from fastapi import FastAPI

from webhook.certs import issue_certificates, write_certificates
from webhook.defaults import ConnectionLimits
from webhook.main import serve, uvicorn_server
from webhook.tls import ReloadingCertificate


@dataclass
class RunningServer:
    url: str
    port: int
    certificate: ReloadingCertificate
    cert_dir: Path


def client_context(*ca_files: Path) -> ssl.SSLContext:
    """A client context that trusts only the given CAs and verifies the host name."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    for ca in ca_files:
        context.load_verify_locations(cafile=ca)
    return context


def issue_into(cert_dir: Path) -> None:
    write_certificates(issue_certificates(), cert_dir)


def encrypt_key(key_file: Path) -> None:
    """Rewrite an unencrypted PEM key as a pass-phrase protected one."""
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pass phrase"),
        )
    )


@contextlib.asynccontextmanager
async def running_server(
    app: FastAPI,
    cert_dir: Path,
    *,
    reload_interval_s: float = 3600.0,
    limits: ConnectionLimits | None = None,
) -> AsyncIterator[RunningServer]:
    """Serve `app` on 127.0.0.1:<random> in this event loop until the block exits."""
    certificate = ReloadingCertificate(cert_dir / "tls.crt", cert_dir / "tls.key")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn_server(
        app, certificate, host="127.0.0.1", port=port, log_level="warning", limits=limits
    )
    task = asyncio.create_task(
        serve(server, certificate, reload_interval_s=reload_interval_s, sockets=[sock])
    )
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield RunningServer(f"https://127.0.0.1:{port}", port, certificate, cert_dir)
    finally:
        server.should_exit = True
        await task
        sock.close()


async def peer_serial(port: int, context: ssl.SSLContext, server_name: str | None) -> int:
    """The serial number of the certificate a fresh handshake presents (verified)."""
    host = server_name or "127.0.0.1"
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=host)
    try:
        return int(writer.get_extra_info("peercert")["serialNumber"], 16)
    finally:
        writer.close()
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            await writer.wait_closed()
