"""Bounded request-body reading.

The API server never sends more than a few hundred KiB for a pod, so anything over 5 MiB
is refused with 413 as soon as that is known: from `Content-Length` before reading a
byte, or while streaming a chunked body, without buffering the rest. A body that has not
arrived within the read timeout is refused with 408: the API server sends it at once, and
a client that trickles it holds a connection and a buffer for nothing.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request

MAX_BODY_BYTES = 5 * 1024 * 1024
#: for the request line and headers (`webhook.connections`) and, again, for the body
DEFAULT_READ_TIMEOUT_S = 5.0


class BodyTimeout(ValueError):
    """The body did not arrive within the read timeout (answered with 408)."""

    def __init__(self, timeout_s: float):
        super().__init__(f"the request body did not arrive within {timeout_s:g}s")


class BodyTooLarge(ValueError):
    """The request body exceeds the limit (answered with 413)."""

    def __init__(self, limit: int):
        super().__init__(f"request body exceeds {limit} bytes")
        self.limit = limit


async def read_body(
    request: Request, limit: int = MAX_BODY_BYTES, timeout_s: float = DEFAULT_READ_TIMEOUT_S
) -> bytes:
    """Read the whole body, raising `BodyTooLarge` as soon as it is known to exceed `limit`
    and `BodyTimeout` when it has not all arrived after `timeout_s` seconds."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge(limit)
                chunks.append(chunk)
    except TimeoutError:
        raise BodyTimeout(timeout_s) from None
    return b"".join(chunks)
