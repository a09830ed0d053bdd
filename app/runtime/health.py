"""`/healthz`, `/readyz` and `/metrics` of a kerf service (the reconciler, the
recommender): one small aiohttp app, served beside the service's own work."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


def health_app(
    registry: CollectorRegistry,
    ready: Callable[[], bool],
    alive: Callable[[], bool] = lambda: True,
    reachable: Callable[[], bool] = lambda: True,
) -> web.Application:
    """Liveness (`alive`: not stopping), readiness (`ready`: the view is synced, and
    `reachable`: no API server outage is under way, app/kube/reachability.py) and the metrics
    of `registry`."""

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok" if alive() else "stopping", status=200 if alive() else 503)

    async def readyz(_: web.Request) -> web.Response:
        if not ready():
            return web.Response(text="view not synced", status=503)
        if not reachable():
            return web.Response(text="API server unreachable", status=503)
        return web.Response(text="ok", status=200)

    async def metrics_view(_: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_view)
    return app


@contextlib.asynccontextmanager
async def serving(app: web.Application, host: str, port: int) -> AsyncIterator[int]:
    """Serve `app` on host:port for the length of the block; yields the bound port."""
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
