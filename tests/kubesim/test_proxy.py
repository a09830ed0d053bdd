"""The service proxy: kubectl get --raw …/services/[https:]NAME:PORT/proxy/PATH."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from kubesim.sim import Simulator
from tests.kubesim.test_kubectl import Kubectl
from webhook.certs import issue_certificates, write_certificates


async def upstream(tmp_path: Path, tls: bool) -> AsyncIterator[int]:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=f"up 1\nquery {request.query_string}\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    context = None
    if tls:
        write_certificates(issue_certificates(), tmp_path / "certs")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tmp_path / "certs" / "tls.crt", tmp_path / "certs" / "tls.key")
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("tls", [False, True])
async def test_kubectl_reaches_a_service_through_the_proxy(
    sim: Simulator, tmp_path: Path, tls: bool
) -> None:
    async for port in upstream(tmp_path, tls):
        sim.service_addresses[("kerf-system", "hook")] = f"127.0.0.1:{port}"
        spec = "https:hook:443" if tls else "hook:8080"
        path = f"/api/v1/namespaces/kerf-system/services/{spec}/proxy/metrics"
        _, out, _ = await Kubectl(sim, tmp_path).run("get", "--raw", path)
        assert out.startswith("up 1\n")


async def test_a_service_without_an_address_is_unavailable(sim: Simulator, tmp_path: Path) -> None:
    path = "/api/v1/namespaces/kerf-system/services/https:nope:443/proxy/metrics"
    code, _, err = await Kubectl(sim, tmp_path).run("get", "--raw", path, ok=False)
    assert code != 0
    assert 'no endpoints available for service "nope"' in err
