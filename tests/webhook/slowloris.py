"""A bounded slowloris for the tests: `python -m tests.webhook.slowloris PORT CA N SECONDS`.

Opens N TLS connections to 127.0.0.1:PORT (verifying CA), starts a POST on each and then
trickles one header byte per connection per second, never finishing a request. Prints
`holding N` once every connection is open, stops when its standard input closes or
after SECONDS at the latest, and prints `open M` (how many connections the server still
held at the end) before exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
import sys

TRICKLE_INTERVAL_S = 1.0


async def hold(
    port: int, context: ssl.SSLContext, stop: asyncio.Event, opened: asyncio.Queue[None]
) -> bool:
    """One slow request until `stop`; True when the server still held the connection."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="localhost"
    )
    writer.write(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
    opened.put_nowait(None)
    # Each connection keeps its own phase, as independent clients would (all 200 in step
    # would be a burst every second, not a slowloris).
    await asyncio.sleep(random.random() * TRICKLE_INTERVAL_S)
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), TRICKLE_INTERVAL_S)
            if reader.at_eof():
                return False
            writer.write(b"a")
            await writer.drain()
        return not reader.at_eof()
    except (ConnectionError, ssl.SSLError):
        return False
    finally:
        writer.close()


async def main(port: int, ca: str, count: int, seconds: float) -> None:
    context = ssl.create_default_context(cafile=ca)
    stop = asyncio.Event()
    opened: asyncio.Queue[None] = asyncio.Queue()
    tasks = [asyncio.create_task(hold(port, context, stop, opened)) for _ in range(count)]
    # The test measures once every connection is open (bounded: 30 s for the handshakes).
    async with asyncio.timeout(30):
        for _ in range(count):
            await opened.get()
    print(f"holding {count}", flush=True)
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.read)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(stdin_closed), seconds)
    stop.set()
    held = await asyncio.gather(*tasks, return_exceptions=True)
    print(f"open {sum(1 for h in held if h is True)}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
