"""Connection limits on the real server over verified TLS: header size and count, the
read timeout (headers and body), the cap on open connections, malformed HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.webhook.fakes import FakeView, ScriptedAdmit, load_example, result
from tests.webhook.tls_helpers import RunningServer, client_context, issue_into, running_server
from webhook.defaults import ConnectionLimits
from webhook.logs import DecisionLog
from webhook.server import create_app

LIMITS = ConnectionLimits(
    max_connections=4, read_timeout_s=0.3, max_header_bytes=2048, max_headers=20
)


@pytest.fixture
def cert_dir(tmp_path: Path) -> Path:
    issue_into(tmp_path / "certs")
    return tmp_path / "certs"


@contextlib.asynccontextmanager
async def guarded(cert_dir: Path) -> AsyncIterator[tuple[RunningServer, io.StringIO]]:
    log = io.StringIO()
    app = create_app(
        FakeView(),
        admit=ScriptedAdmit(result("skipped", reason="NoSignificantChange")),
        decision_log=DecisionLog(log),
        read_timeout_s=LIMITS.read_timeout_s,
    )
    async with running_server(app, cert_dir, limits=LIMITS) as server:
        yield server, log


async def connect(
    server: RunningServer,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    context = client_context(server.cert_dir / "ca.crt")
    return await asyncio.open_connection(
        "127.0.0.1", server.port, ssl=context, server_hostname="localhost"
    )


async def answer_of(reader: asyncio.StreamReader, wait_s: float = 5.0) -> bytes:
    """Everything the server sends until it closes the connection (bounded wait)."""
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        return await asyncio.wait_for(reader.read(), wait_s)
    return b""


def refusals(log: io.StringIO) -> list[tuple[int | None, str]]:
    lines = [orjson.loads(line) for line in log.getvalue().splitlines()]
    return [(line["status"], line["reason"]) for line in lines if line["msg"] == "request refused"]


async def metric(server: RunningServer, reason: str) -> float:
    context = client_context(server.cert_dir / "ca.crt")
    async with httpx.AsyncClient(verify=context, base_url=server.url) as client:
        text = (await client.get("/metrics")).text
    line = f'kerf_webhook_refused_requests_total{{reason="{reason}"}} '
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0].rsplit(" ", 1)[1]) if found else 0.0


async def post_once_room_is_made(server: RunningServer) -> int:
    """POST a review until the server has noticed closed connections and takes this one
    (bounded): a connection it refuses is closed before any answer."""
    context = client_context(server.cert_dir / "ca.crt")
    body = orjson.dumps(load_example("replicaset-pod.json"))
    for _ in range(600):
        try:
            async with httpx.AsyncClient(verify=context, base_url=server.url) as client:
                return (await client.post("/mutate", content=body)).status_code
        except httpx.TransportError:
            await asyncio.sleep(0.1)
    raise AssertionError("the server never took a new connection")


async def test_oversized_headers_get_431_even_half_sent(cert_dir: Path) -> None:
    async with guarded(cert_dir) as (server, log):
        for ending in (b"\r\n\r\n", b""):  # complete, and never finished
            reader, writer = await connect(server)
            writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 4096 + ending)
            answer = await answer_of(reader)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 431 "), answer
            assert b"request headers exceed 2048 bytes" in answer
        assert await metric(server, "HeadersTooLarge") == 2
    assert refusals(log) == [(431, "HeadersTooLarge")] * 2


async def test_too_many_header_fields_get_431(cert_dir: Path) -> None:
    async with guarded(cert_dir) as (server, log):
        reader, writer = await connect(server)
        fields = b"".join(b"X-F%d: 1\r\n" % i for i in range(21))
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n")
        answer = await answer_of(reader)
        writer.close()
    assert answer.startswith(b"HTTP/1.1 431 "), answer
    assert refusals(log) == [(431, "TooManyHeaders")]


async def test_slow_headers_get_408_and_idle_connections_are_closed(cert_dir: Path) -> None:
    async with guarded(cert_dir) as (server, log):
        reader, writer = await connect(server)
        writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        slow = await answer_of(reader)
        writer.close()
        reader, writer = await connect(server)  # sends nothing at all
        idle = await answer_of(reader)
        writer.close()
    assert slow.startswith(b"HTTP/1.1 408 "), slow
    assert idle == b""
    assert refusals(log) == [(408, "ReadTimeout"), (None, "IdleTimeout")]


async def test_a_slow_body_gets_408(cert_dir: Path) -> None:
    async with guarded(cert_dir) as (server, log):
        reader, writer = await connect(server)
        writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
        answer = await answer_of(reader)
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"did not arrive within 0.3s" in answer
    assert refusals(log) == [(408, "ReadTimeout")]


async def test_connections_over_the_cap_are_closed(cert_dir: Path) -> None:
    async with guarded(cert_dir) as (server, log):
        held = [await connect(server) for _ in range(LIMITS.max_connections)]
        reader, writer = await connect(server)
        assert await answer_of(reader, wait_s=LIMITS.read_timeout_s / 2) == b""
        writer.close()
        for _, held_writer in held:
            held_writer.close()
        assert await post_once_room_is_made(server) == 200
    assert (None, "TooManyConnections") in refusals(log)


async def test_invalid_http_gets_400_and_is_counted(cert_dir: Path) -> None:
    async with guarded(cert_dir) as (server, log):
        reader, writer = await connect(server)
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        answer = await answer_of(reader)
        writer.close()
        assert await metric(server, "InvalidHTTP") == 1
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert refusals(log) == [(400, "InvalidHTTP")]


async def test_a_client_gone_mid_body_is_no_error(
    cert_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Half a body, then the client closes: one quiet refusal line, no traceback, no 500."""
    async with guarded(cert_dir) as (server, log):
        with caplog.at_level(logging.INFO):
            reader, writer = await connect(server)
            writer.write(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            await writer.drain()
            writer.close()
            for _ in range(100):  # until the server has noticed (bounded)
                if refusals(log):
                    break
                await asyncio.sleep(0.01)
    assert refusals(log) == [(None, "ClientGone")]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
