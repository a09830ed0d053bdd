"""The work of one admission request outside the decision, counted in Python function
calls (not time, which depends on the machine): FastAPI's per-request machinery once
made up most of the bench's /noop answer (docs/benchmarks.md, the webhook bench)."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any

import orjson

from tests.webhook.fakes import FakeView, ScriptedAdmit, load_example, result
from webhook.logs import DecisionLog
from webhook.server import create_app

#: Python calls of one /mutate request through the app with a stand-in decision (the
#: review parsed and checked, the patch built, the decision line written): 124 today; the
#: bound leaves room for library upgrades. The bench's /noop has its bound in
#: tests/benchmarks/test_noop.py.
MAX_MUTATE_CALLS = 200


async def calls_per_request(app: Any, path: str, requests: int = 20) -> float:
    """Python function calls per `path` request through the ASGI `app`, in process."""
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


async def test_a_mutate_request_costs_few_python_calls() -> None:
    log = DecisionLog(io.StringIO())
    app = create_app(FakeView(), admit=ScriptedAdmit(result()), decision_log=log)
    assert await calls_per_request(app, "/mutate") <= MAX_MUTATE_CALLS
