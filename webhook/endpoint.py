"""A POST endpoint as a plain ASGI app: the handler gets the scope and the `receive`
channel and returns a `Reply`, which is sent as one response.

Starlette's `Route` serves an ASGI app as it is, so the admission endpoints skip FastAPI's
per-request machinery (request object, dependency solving, endpoint wrapping) and keep
its routing, error middleware and 405 for other methods.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.types import Receive, Scope, Send

_JSON_HEADER = (b"content-type", b"application/json")
_CLOSE_HEADER = (b"connection", b"close")


@dataclass(frozen=True, slots=True)
class Reply:
    """One JSON response: its body, status, and whether to close the connection after it."""

    body: bytes
    status: int = 200
    close: bool = False


Handler = Callable[[Scope, Receive], Awaitable[Reply]]


class PostEndpoint:
    """The ASGI app of one handler (see the module doc)."""

    def __init__(self, handler: Handler):
        self._handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reply = await self._handler(scope, receive)
        headers = [_JSON_HEADER, (b"content-length", b"%d" % len(reply.body))]
        if reply.close:
            headers.append(_CLOSE_HEADER)
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})
