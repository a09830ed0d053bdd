"""The node agent's cAdvisor endpoint: `GET /metrics/cadvisor` on a plain HTTP port of
127.0.0.1, in the Prometheus text format.

The series, their labels and the usage model behind them are kubesim's
(`kubesim/cadvisor.py` over the pods' `kubesim.kerf.dev/usage` annotation), rendered from
the pods the agent watches with the statuses it wrote, so a Prometheus scraping either
backend sees the same thing. One endpoint serves every node the agent plays, reached
directly: the API server's node proxy dials a node's `Hostname` address (`node-1`), which
resolves nowhere.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from kubesim import cadvisor

PATH = "/metrics/cadvisor"


class MetricsServer:
    """Serves `pods()` (read at each scrape) as cAdvisor metrics until `stop()`."""

    def __init__(self, pods: Callable[[], Iterable[dict[str, Any]]]) -> None:
        self._pods = pods
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        """Listen on a free port of 127.0.0.1; the endpoint's URL."""
        app = web.Application()
        app.router.add_get(PATH, self._scrape)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        # Bound here, not picked first and bound later: no other program can take it between.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{port}{PATH}"
        return self.url

    async def _scrape(self, _request: web.Request) -> web.Response:
        text = cadvisor.render(list(self._pods()), datetime.now(UTC))
        return web.Response(text=text, headers={"Content-Type": cadvisor.CONTENT_TYPE})

    async def stop(self) -> None:
        """Close the listener."""
        if self._runner is not None:
            await self._runner.cleanup()
