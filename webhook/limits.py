"""Bounded request-body reading, straight from the ASGI `receive` channel.

The API server never sends more than a few hundred KiB for a pod, so anything over 5 MiB
is refused with 413 as soon as that is known: from `Content-Length` before reading a
byte, or while streaming a chunked body, without buffering the rest. A body that has not
arrived within the read timeout is refused with 408: the API server sends it at once, and
a client that trickles it holds a connection and a buffer for nothing.

The admission endpoints read the body here rather than through a Starlette `Request`:
this runs on every admission, and the request object and its stream generator cost more
than the read itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any

MAX_BODY_BYTES = 5 * 1024 * 1024
#: JSON values (counted before parsing, see `too_many_values`) a body may hold: 130-470
#: times a real pod's review, and a few ms of parsing and deciding on the event loop at most
MAX_BODY_VALUES = 32_768
#: for the request line and headers (`webhook.connections`) and, again, for the body
DEFAULT_READ_TIMEOUT_S = 5.0

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class BodyTimeout(ValueError):
    """The body did not arrive within the read timeout (answered with 408)."""

    def __init__(self, timeout_s: float):
        super().__init__(f"the request body did not arrive within {timeout_s:g}s")


class BodyTooLarge(ValueError):
    """The request body exceeds the limit (answered with 413)."""

    def __init__(self, limit: int):
        super().__init__(f"request body exceeds {limit} bytes")
        self.limit = limit


class TooManyValues(ValueError):
    """The request body holds more JSON values than allowed (answered with 413)."""

    def __init__(self, limit: int):
        super().__init__(f"request body holds more than {limit} JSON values")
        self.limit = limit


class ClientGone(Exception):
    """The client closed the connection before the whole body arrived."""


def declared_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    """The `Content-Length` of ASGI `headers` (lower-case names), None when absent or not
    a plain number."""
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


async def read_body(
    receive: Receive,
    declared: int | None,
    limit: int = MAX_BODY_BYTES,
    timeout_s: float = DEFAULT_READ_TIMEOUT_S,
) -> bytes:
    """Read the whole body from `receive`, raising `BodyTooLarge` as soon as it is known to
    exceed `limit` (from `declared`, the Content-Length, or while reading), `BodyTimeout`
    when it has not all arrived after `timeout_s` seconds and `ClientGone` when the client
    disconnected first."""
    if declared is not None and declared > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                message = await receive()
                chunk = _chunk(message, size, limit)
                size += len(chunk)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        raise BodyTimeout(timeout_s) from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _chunk(message: Mapping[str, Any], size: int, limit: int) -> bytes:
    """The body bytes of one ASGI message, after `size` bytes already read."""
    if message["type"] == "http.disconnect":
        raise ClientGone
    chunk: bytes = message.get("body", b"")
    if size + len(chunk) > limit:
        raise BodyTooLarge(limit)
    return chunk


#: every byte except the ones counted by `too_many_values`, which `bytes.translate` drops
_NOT_STRUCTURAL = bytes(b for b in range(256) if b not in b",[{")


def too_many_values(body: bytes, limit: int = MAX_BODY_VALUES) -> bool:
    """True when `body` may hold more than `limit` JSON values; found without parsing it.

    Parsing costs per value, not per byte (5 MiB of one string parses in ~5 ms, 5 MiB of
    small objects in ~65 ms), and the parser holds the GIL throughout, so a worker thread
    would not free the event loop: the count is bounded before parsing instead. Every
    value but the first of an array or object follows a comma, and every array or object
    opens with a bracket, so commas and opening brackets bound the values (those inside
    strings count too: the bound errs towards refusing). A body of at most `limit` bytes
    cannot exceed it and is not scanned, so a real pod's review costs nothing here.
    """
    if len(body) <= limit:
        return False
    return len(body.translate(None, _NOT_STRUCTURAL)) > limit
