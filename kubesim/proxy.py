"""The service proxy: `GET /api/v1/namespaces/N/services/[scheme:]NAME[:PORT]/proxy/PATH`.

kubectl reaches a Service's HTTP endpoints this way (`kubectl get --raw …/proxy/metrics`).
kubesim runs no pods, so the request goes to the address registered for the Service with
`sim.service_addresses` (the same map admission webhooks use). As the real API server
does for service proxies, an `https` upstream's certificate is not verified.
"""

from __future__ import annotations

import ssl

import aiohttp
from aiohttp import web

from kubesim.errors import ApiError

TIMEOUT_S = 10.0


def parse_proxy_path(rest: list[str]) -> tuple[str, str, str, str] | None:
    """(namespace, scheme, service, path) of a core-group service proxy path, else None."""
    if len(rest) < 5 or rest[0] != "namespaces" or rest[2] != "services" or rest[4] != "proxy":
        return None
    parts = rest[3].split(":")
    scheme = parts[0] if len(parts) > 1 and parts[0] in ("http", "https") else "http"
    name = parts[1] if len(parts) > 1 and parts[0] in ("http", "https") else parts[0]
    return rest[1], scheme, name, "/" + "/".join(rest[5:])


async def proxy(
    request: web.Request, addresses: dict[tuple[str, str], str], target: tuple[str, str, str, str]
) -> web.Response:
    """Forward a GET to the Service's registered address and answer with its response."""
    namespace, scheme, name, path = target
    if request.method != "GET":
        raise ApiError(405, "MethodNotAllowed", "kubesim proxies GET requests only")
    address = addresses.get((namespace, name))
    if address is None:
        raise ApiError(
            503,
            "ServiceUnavailable",
            f'no endpoints available for service "{name}"',
        )
    context: ssl.SSLContext | None = None
    if scheme == "https":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    url = f"{scheme}://{address}{path}"
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as session,
            session.get(url, params=request.query, ssl=context) as upstream,
        ):
            body = await upstream.read()
            return web.Response(
                body=body,
                status=upstream.status,
                headers={"Content-Type": upstream.headers.get("Content-Type", "text/plain")},
            )
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ApiError(503, "ServiceUnavailable", f"error trying to reach service: {exc}") from None
