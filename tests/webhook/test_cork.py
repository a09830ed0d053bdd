"""CorkedTransport: an answer's head and body go out as one write (one TLS record, one
send), and nothing is held past the current turn of the event loop."""

from __future__ import annotations

import asyncio

from webhook.connections import CorkedTransport


class RecordingTransport:
    """The writes and the close a transport received, in order."""

    def __init__(self) -> None:
        self.events: list[bytes | str] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.events.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True
        self.events.append("close")


async def test_a_head_and_its_body_are_one_write() -> None:
    transport = RecordingTransport()
    cork = CorkedTransport(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    cork.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    cork.write(b"{}")
    assert transport.events == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    await asyncio.sleep(0)
    assert len(transport.events) == 1


async def test_a_lone_write_goes_out_on_the_next_turn() -> None:
    """`100 Continue` is written alone and the client waits for it: it cannot stay held."""
    transport = RecordingTransport()
    cork = CorkedTransport(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    cork.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert transport.events == []
    await asyncio.sleep(0)
    assert transport.events == [b"HTTP/1.1 100 Continue\r\n\r\n"]


async def test_close_writes_what_is_held_first() -> None:
    transport = RecordingTransport()
    cork = CorkedTransport(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    cork.write(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
    cork.close()
    assert transport.events == [b"HTTP/1.1 408 Request Timeout\r\n\r\n", "close"]
    await asyncio.sleep(0)
    assert cork.is_closing()
    assert len(transport.events) == 2
