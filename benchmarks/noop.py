"""The webhook bench's baselines, added to the webhook's own app: two no-ops.

Both read the body, count its JSON values, parse it with the JSON parser /mutate uses and
allow the request without deciding, so that on the same server, port and TLS what /mutate
costs above them is the decision and its patch. They differ only in how they are served:

- POST /fastapi-noop is a FastAPI endpoint, written the way a FastAPI handler is (a
  `Request`, `await request.body()`, a `Response`): the FastAPI no-op that the webhook
  bench's throughput and latency targets are stated against;
- POST /noop is a plain ASGI route, served the way /mutate is (`webhook.endpoint`), outside
  FastAPI's per-request machinery: the floor under /mutate, what answering costs on this
  server with no framework work at all.

Only the benches add them: the production server has neither.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.routing import APIRoute
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope

from webhook.endpoint import PostEndpoint, Reply
from webhook.limits import (
    DEFAULT_READ_TIMEOUT_S,
    MAX_BODY_BYTES,
    MAX_BODY_VALUES,
    BodyTimeout,
    BodyTooLarge,
    ClientGone,
    declared_length,
    read_body,
    too_many_values,
)
from webhook.review import BodyError, load_json, review_response

JSON = "application/json"
PATH = "/noop"
FASTAPI_PATH = "/fastapi-noop"


def _answer(body: bytes) -> tuple[bytes, int]:
    """The no-ops' answer to a body read whole: (response body, status). 413 or 400 for a
    body /mutate would refuse too (the bench sends none: those answers only keep it
    honest), else allowed, echoing the review's uid."""
    if too_many_values(body, MAX_BODY_VALUES):
        return b'{"error":"too many JSON values"}', 413
    try:
        doc: Any = load_json(body)
    except BodyError:
        return b'{"error":"not JSON"}', 400
    request = doc.get("request") if isinstance(doc, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return review_response(uid if isinstance(uid, str) else ""), 200


async def noop(scope: Scope, receive: Receive) -> Reply:
    """Read the body as /mutate does (bounded, from the ASGI channel) and answer it."""
    try:
        body = await read_body(
            receive, declared_length(scope["headers"]), MAX_BODY_BYTES, DEFAULT_READ_TIMEOUT_S
        )
    except BodyTooLarge:
        return Reply(b'{"error":"too large"}', 413, close=True)
    except (BodyTimeout, ClientGone):
        return Reply(b"", 400, close=True)
    answer, status = _answer(body)
    return Reply(answer, status, close=status == 413)


async def fastapi_noop(request: Request) -> Response:
    """`noop` as a FastAPI endpoint: the same checks and answer, through FastAPI's request
    object, dependency solving and response."""
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        return Response(b'{"error":"too large"}', 413, media_type=JSON)
    answer, status = _answer(body)
    return Response(answer, status, media_type=JSON)


def with_noop(app: FastAPI) -> FastAPI:
    """`app` (the webhook's, from `webhook.server.create_app`) with POST /fastapi-noop and
    POST /noop in front of its routes. Routes are matched in order: the baselines come
    first, so neither pays for matching /mutate."""
    app.router.routes[:0] = [
        APIRoute(FASTAPI_PATH, fastapi_noop, methods=["POST"]),
        Route(PATH, PostEndpoint(noop), methods=["POST"]),
    ]
    return app
