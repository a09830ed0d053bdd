"""kerf's API client reads the proxy environment once, when it is made, and honours it."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import pytest
import yaml
from kubernetes_asyncio import client

from app.kube.informer import api_client_from_config
from app.kube.session import env_proxy

NAMESPACES = orjson.dumps(
    {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {}, "items": []}
)


@asynccontextmanager
async def forward_proxy() -> AsyncIterator[tuple[str, list[bytes]]]:
    """A forward proxy on loopback that answers every request with an empty NamespaceList
    and keeps each request's head."""
    heads: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(NAMESPACES)}\r\n\r\n".encode()
            + NAMESPACES
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", heads
    finally:
        server.close()
        await server.wait_closed()


def kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


def unused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("credentials", ["", "kerf:secret@"])
async def test_the_proxy_the_environment_names_carries_the_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, credentials: str
) -> None:
    server = f"http://127.0.0.1:{unused_port()}"  # nothing listens: only the proxy answers
    async with forward_proxy() as (proxy, heads):
        monkeypatch.setenv("HTTP_PROXY", proxy.replace("://", f"://{credentials}"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with await api_client_from_config(kubeconfig(tmp_path, server)) as api:
            # Read once: a later change of the environment changes nothing.
            monkeypatch.delenv("HTTP_PROXY")
            listed = await client.CoreV1Api(api).list_namespace()
    assert listed.items == []
    assert len(heads) == 1
    assert heads[0].startswith(f"GET {server}/api/v1/namespaces".encode())
    auth = f"Proxy-Authorization: Basic {base64.b64encode(b'kerf:secret').decode()}"
    assert (auth.encode() in heads[0]) == bool(credentials)


async def test_no_proxy_sends_the_requests_to_the_server_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = f"http://127.0.0.1:{unused_port()}"
    async with forward_proxy() as (proxy, heads):
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        async with await api_client_from_config(kubeconfig(tmp_path, server)) as api:
            with pytest.raises(Exception, match="[Cc]onnect"):
                await client.CoreV1Api(api).list_namespace()
    assert heads == []


async def test_the_session_looks_nothing_up_per_request(tmp_path: Path) -> None:
    async with await api_client_from_config(kubeconfig(tmp_path, "http://127.0.0.1:1")) as api:
        assert api.rest_client.pool_manager.trust_env is False


def test_env_proxy_of_a_host_without_one(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("https://10.0.0.1:6443") is None
