"""A small JSON client for the real API server over HTTPS with a client certificate:
requests and watch streams, nothing more (the agent needs no typed models)."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from devcluster.certs import KeyPair

Obj = dict[str, Any]
#: A watch the server ends after this long is simply restarted from its resourceVersion.
WATCH_TIMEOUT_S = 300


class ApiError(Exception):
    """A non-2xx answer: its HTTP status and the Status message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class Client:
    """One HTTPS session to the API server."""

    def __init__(self, server: str, ca_cert: Path, client: KeyPair) -> None:
        context = ssl.create_default_context(cafile=str(ca_cert))
        context.load_cert_chain(str(client.cert), str(client.key))
        self.server = server.rstrip("/")
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
        )

    async def close(self) -> None:
        """Close the session."""
        await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        body: Obj | None = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        timeout_s: float = 30,
    ) -> Obj:
        """One call; the decoded JSON answer (`{"text": ...}` for a plain-text one such as
        /readyz's), or ApiError."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        async with self._session.request(
            method,
            self.server + path,
            data=data,
            params=params,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout_s),
        ) as response:
            text = await response.text()
            if response.status >= 300:
                try:
                    message = json.loads(text).get("message", text)
                except ValueError:
                    message = text
                raise ApiError(response.status, message)
            if response.content_type != "application/json":
                return {"text": text}
            return json.loads(text) if text else {}

    async def get(self, path: str, params: dict[str, str] | None = None) -> Obj:
        """GET `path`."""
        return await self.request("GET", path, params=params)

    async def watch(self, path: str, resource_version: str) -> AsyncIterator[Obj]:
        """The events of a watch on the collection at `path` from `resource_version`
        (bookmarks included), until the server ends the stream."""
        params = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_TIMEOUT_S),
        }
        async with self._session.get(
            self.server + path,
            params=params,
            timeout=aiohttp.ClientTimeout(total=None, sock_read=WATCH_TIMEOUT_S + 30),
        ) as response:
            if response.status >= 300:
                raise ApiError(response.status, await response.text())
            # Own line splitting: aiohttp's readline refuses lines past 128 KiB, and a big
            # object is one line of a watch stream.
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
