"""Connection limits: header size and count, a read timeout, a cap on open connections.

uvicorn's HTTP/1.1 protocol (httptools) has none of these: a 50 MB header was accepted,
ten half-sent 10 MB headers held ~70 MB, and a connection that never finished its request
was held forever. `GuardedHttpProtocol` adds them to the protocol uvicorn already uses:

- more than `max_connections` open connections: a new one is closed at once (after the
  TLS handshake, which asyncio bounds at 60 s);
- a request line and headers over `max_header_bytes`, or more than `max_headers` header
  fields: 431, connection closed;
- a connection that has not sent a complete request line and headers `read_timeout_s`
  after it opened (or after the first byte of a later request): 408, closed. The body has
  the same budget, enforced by the app while it reads (`webhook.limits.read_body`);
- anything that is not HTTP/1.1 (including protocol upgrades): 400, closed.

Each refusal (also a connection closed for idling before its first byte, with no answer)
is counted and logged through the app's `refuse` hook (`webhook.server`), like the 400
and 413 answers of the app itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from webhook.defaults import ConnectionLimits

#: (HTTP status sent or None, reason, message): counts and logs one refusal
Refuse = Callable[[int | None, str, str], None]


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a request that was refused."""


class CorkedTransport:
    """What a connection's answers are written through: a write is held until the next write
    or the next turn of the event loop, whichever comes first.

    uvicorn writes a response's status line and headers, then its body, as two writes;
    over TLS each is a record of its own, encrypted and sent by a `send` call of its own,
    which made up about a third of the server's time on the bench's `/noop` answer. Held and joined,
    a small answer goes out as one. Holding never outlasts the current turn of the loop,
    so a lone write (`100 Continue`, a streamed response's head) still goes out at once.
    """

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        """Hold `data`, or write it after what is held."""
        held = self._held
        if held is None:
            self._held = data
            self._loop.call_soon(self._flush)
            return
        self._held = None
        self._transport.write(held + data)

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def is_closing(self) -> bool:
        """As the transport's."""
        return self._transport.is_closing()

    def close(self) -> None:
        """Write what is held, then close the transport."""
        self._flush()
        self._transport.close()


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with `ConnectionLimits` (see the module doc)."""

    def __init__(
        self,
        *args: Any,
        limits: ConnectionLimits,
        refuse: Refuse,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._limits = limits
        self._refuse = refuse
        self._deadline: asyncio.TimerHandle | None = None
        #: between the end of one request's headers and the end of its body
        self._in_body = False
        self._started_request = False
        #: bytes received since the last request's headers ended: what httptools may be
        #: buffering of an unfinished request line and headers
        self._unparsed_bytes = 0
        #: bytes of the current request line and headers, as parsed
        self._header_bytes = 0
        self._header_count = 0
        self._stopped = False
        self._pending: tuple[int, str, str] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self._limits.max_connections:
            # Not added to the server's connections; connection_lost needs the transport.
            self.transport = transport
            self._stopped = True
            transport.close()
            limit = self._limits.max_connections
            self._refuse(None, "TooManyConnections", f"more than {limit} open connections")
            return
        super().connection_made(transport)
        # Every write of the connection, uvicorn's and the guard's, in order through one cork.
        self.transport = CorkedTransport(transport, self.loop)  # type: ignore[assignment]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._stopped:
            return
        self._unset_keepalive_if_required()
        if not self._in_body:
            self._unparsed_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._reject(400, "InvalidHTTP", "protocol upgrades are not supported")
        except httptools.HttpParserError:
            if self._pending is not None:
                self._reject(*self._pending)
            else:
                self._reject(400, "InvalidHTTP", "the request is not valid HTTP/1.1")
        else:
            # Headers still unfinished after this chunk: httptools holds them whole.
            if not self._in_body and self._unparsed_bytes > self._limits.max_header_bytes:
                self._reject(*self._headers_too_large())

    def _headers_too_large(self) -> tuple[int, str, str]:
        limit = self._limits.max_header_bytes
        return 431, "HeadersTooLarge", f"request headers exceed {limit} bytes"

    def on_message_begin(self) -> None:
        self._started_request = True
        self._header_bytes = 0
        self._header_count = 0
        if self._deadline is None:
            self._arm()
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._header_bytes += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        self._header_bytes += len(name) + len(value) + 4  # ": " and CRLF
        if self._header_count > self._limits.max_headers:
            limit = self._limits.max_headers
            self._pending = (431, "TooManyHeaders", f"more than {limit} header fields")
            raise _Refused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._header_bytes > self._limits.max_header_bytes:
            # All of it arrived in one read: too large all the same.
            self._pending = self._headers_too_large()
            raise _Refused
        # From here the app reads the body, under its own timeout.
        self._in_body = True
        self._disarm()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_body = False
        self._unparsed_bytes = 0
        super().on_message_complete()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self._limits.read_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        if self._stopped or self.transport.is_closing():
            return
        if not self._started_request:
            self._stopped = True
            self.transport.close()
            self._refuse(None, "IdleTimeout", "no request within the read timeout")
            return
        timeout = self._limits.read_timeout_s
        self._reject(408, "ReadTimeout", f"the request headers did not arrive within {timeout:g}s")

    def _reject(self, status: int, reason: str, message: str) -> None:
        """Answer `status` with a JSON error, close the connection and report it."""
        if self._stopped:
            return
        self._stopped = True
        self._disarm()
        body = orjson.dumps({"error": message})
        head = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
            "content-type: application/json\r\n"
            f"content-length: {len(body)}\r\n"
            "connection: close\r\n\r\n"
        )
        self.transport.write(head.encode("ascii") + body)
        self.transport.close()
        self._refuse(status, reason, message)
