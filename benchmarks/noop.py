"""The webhook bench's baseline: POST /noop, added to the webhook's own app.

It reads the body as /mutate does (the same bounded read from the ASGI channel, the same
value count and JSON parser) and allows the request without deciding, so the ratio of
/mutate to /noop on the same server, port and TLS is the cost of the decision and its
patch. It is added only by the bench: the production server has no such endpoint.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
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

PATH = "/noop"


async def noop(scope: Scope, receive: Receive) -> Reply:
    """Parse the review and allow it, echoing its uid; 413 or 400 for a body /mutate
    would refuse too (the bench sends none: those answers only keep it honest)."""
    try:
        body = await read_body(
            receive, declared_length(scope["headers"]), MAX_BODY_BYTES, DEFAULT_READ_TIMEOUT_S
        )
    except BodyTooLarge:
        return Reply(b'{"error":"too large"}', 413, close=True)
    except (BodyTimeout, ClientGone):
        return Reply(b"", 400, close=True)
    if too_many_values(body, MAX_BODY_VALUES):
        return Reply(b'{"error":"too many JSON values"}', 413, close=True)
    try:
        doc: Any = load_json(body)
    except BodyError:
        return Reply(b'{"error":"not JSON"}', 400)
    request = doc.get("request") if isinstance(doc, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return Reply(review_response(uid if isinstance(uid, str) else ""))


def with_noop(app: FastAPI) -> FastAPI:
    """`app` (the webhook's, from `webhook.server.create_app`) with POST /noop in front of
    its routes, served the way /mutate is (a plain ASGI route)."""
    app.router.routes.insert(0, Route(PATH, PostEndpoint(noop), methods=["POST"]))
    return app
