"""Bounded request-body reading.

The API server never sends more than a few hundred KiB for a pod, so anything over 5 MiB
is refused with 413 as soon as that is known: from `Content-Length` before reading a
byte, or while streaming a chunked body, without buffering the rest.
"""

from __future__ import annotations

from starlette.requests import Request

MAX_BODY_BYTES = 5 * 1024 * 1024


class BodyTooLarge(ValueError):
    """The request body exceeds the limit (answered with 413)."""

    def __init__(self, limit: int):
        super().__init__(f"request body exceeds {limit} bytes")
        self.limit = limit


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """Read the whole body, raising `BodyTooLarge` as soon as it is known to exceed `limit`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)
