"""The HTTP session under kerf's API client: the environment read once, not per request.

kubernetes_asyncio opens its aiohttp session with `trust_env=True`, and aiohttp then
looks up the proxy variables and parses `~/.netrc` for every request, each on a thread
of the default executor: about a tenth of the reconciler's CPU on its first pass over a
large cluster. The API server does not move, so kerf asks the environment once, when
the client is made, as client-go does (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`; client-go
reads no `.netrc`, and neither does kerf), and gives the client a session that does not
ask again.
"""

from __future__ import annotations

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client
from yarl import URL

#: as kubernetes_asyncio's own session: watch events of large objects exceed aiohttp's
#: default read buffer (etcd's default request limit is 1.5 MiB)
READ_BUFFER = 2**21


def env_proxy(host: str) -> str | None:
    """The proxy the environment names for the API server `host` (a URL), credentials
    included; None when there is none or `NO_PROXY` exempts the host."""
    try:
        proxy, auth = get_env_proxy_for_url(URL(host))
    except LookupError:
        return None
    if auth is not None:
        proxy = proxy.with_user(auth.login).with_password(auth.password)
    return str(proxy)


def settle_environment(api_client: client.ApiClient) -> client.ApiClient:
    """`api_client` with its environment read now, once: its proxy (unless the
    configuration names one) fixed, and a session that looks nothing up per request."""
    rest = api_client.rest_client
    if not rest.proxy and (proxy := env_proxy(str(api_client.configuration.host))):
        rest.proxy = proxy
    old = rest.pool_manager
    rest.pool_manager = aiohttp.ClientSession(
        connector=old.connector, trust_env=False, read_bufsize=READ_BUFFER
    )
    old.detach()  # the connector (its TLS context, its pool) goes on in the new session
    return api_client
