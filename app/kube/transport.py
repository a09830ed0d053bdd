"""One raw HTTP call to the API server over a kubernetes-asyncio ApiClient: the body
parsed with orjson, an error answer raised as `ApiStatusError` with the API's own message,
and each call reported (verb, resource, HTTP status or "error") to whoever counts them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlencode

import aiohttp
import orjson
from kubernetes_asyncio import client

from app.kube.errors import ApiStatusError
from app.kube.reachability import reachability_of

JSON = "application/json"
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30, sock_connect=10)
#: Hears every call: verb, resource, and the HTTP status (or "error": no answer).
CallCounter = Callable[[str, str, str], None]


class Requester(Protocol):
    """What sends one API request (an `ApiTransport`, or a test's own server)."""

    async def request(
        self,
        verb: str,
        resource: str,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = JSON,
        answer: bool = True,
    ) -> dict[str, Any]: ...


def _uncounted(verb: str, resource: str, code: str) -> None:
    """The default counter: nobody counts."""


class ApiTransport:
    """One HTTP call to the API server: raw body, orjson, errors as ApiStatusError."""

    def __init__(self, api_client: client.ApiClient, count: CallCounter = _uncounted) -> None:
        self._client = api_client
        self._count = count

    async def request(
        self,
        verb: str,
        resource: str,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = JSON,
        answer: bool = True,
    ) -> dict[str, Any]:
        """Send one request; a 2xx answer's body is returned parsed (unless `answer` is
        False: a caller that reads nothing of it, e.g. of a resize, a whole pod, gets {}),
        anything else raises ApiStatusError with the API's own message. Counted by verb,
        resource and code, and told to the client's Reachability
        (app/kube/reachability.py), which says outages."""
        reachability = reachability_of(self._client)
        sent = reachability.now()
        try:
            response = await self._send(method, path, body, content_type)
        except Exception as exc:
            self._count(verb, resource, "error")
            reachability.failed(exc, sent)
            raise
        try:
            raw = await response.read()
        except Exception as exc:
            reachability.failed(exc, sent)
            raise
        finally:
            response.release()
        self._count(verb, resource, str(response.status))
        if not 200 <= response.status < 300:
            error = ApiStatusError(response.status, _message(raw))
            if not reachability.failed(error, sent):
                reachability.answered(sent)
            raise error
        reachability.answered(sent)
        return orjson.loads(raw) if raw and answer else {}

    async def _send(
        self, method: str, path: str, body: Any, content_type: str
    ) -> aiohttp.ClientResponse:
        """The request on the client's own session, its auth and proxy. Not through the
        client's `call_api`: it walks every body in Python to sanitize it and encodes it
        with the standard library, a tenth of the reconciler's CPU for its writes; these
        bodies are plain JSON already."""
        api = self._client
        headers = {**api.default_headers, "Content-Type": content_type, "Accept": JSON}
        queries: list[tuple[str, str]] = []
        await api.update_params_for_auth(headers, queries, ["BearerToken"])
        url = f"{api.configuration.host}{path}"
        if queries:
            url += ("&" if "?" in url else "?") + urlencode(queries)
        rest = api.rest_client
        response: aiohttp.ClientResponse = await rest.pool_manager.request(
            method,
            url,
            data=None if body is None else orjson.dumps(body),
            headers=headers,
            timeout=REQUEST_TIMEOUT,
            proxy=rest.proxy or None,
            proxy_headers=rest.proxy_headers or None,
            server_hostname=rest.server_hostname or None,
        )
        return response


def _parsed(raw: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _message(raw: bytes) -> str:
    return str(_parsed(raw).get("message") or raw[:300].decode("utf-8", "replace"))
