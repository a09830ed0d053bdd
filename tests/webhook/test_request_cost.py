"""The work of one admission request outside the decision, counted in Python function
calls (not time, which depends on the machine): FastAPI's per-request machinery once
made up most of a /noop answer (docs/benchmarks.md, "The webhook's request path")."""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any

import orjson

from tests.webhook.fakes import FakeView, ScriptedAdmit, load_example, result
from webhook.server import create_app

#: Python calls of one /noop request through the app: 61 today, 164 when the admission
#: endpoints were FastAPI routes (dependency solving, the request object, the telemetry
#: check); the bound leaves room for library upgrades.
MAX_NOOP_CALLS = 120


async def calls_per_request(path: str, requests: int = 20) -> float:
    """Python function calls per `path` request through the ASGI app, in process."""
    app = create_app(FakeView(), admit=ScriptedAdmit(result()))
    body = orjson.dumps(load_example("replicaset-pod.json"))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "https",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8443),
    }
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    def request() -> Coroutine[Any, Any, None]:
        return app(dict(scope), receive, send)

    await request()  # first request: routes and middleware are built
    calls = 0

    def count(_frame: FrameType, event: str, _arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    profile: Callable[..., Any] | None = sys.getprofile()
    sys.setprofile(count)
    try:
        for _ in range(requests):
            await request()
    finally:
        sys.setprofile(profile)
    assert statuses == [200] * (requests + 1)
    return calls / requests


async def test_a_noop_request_costs_few_python_calls() -> None:
    assert await calls_per_request("/noop") <= MAX_NOOP_CALLS
