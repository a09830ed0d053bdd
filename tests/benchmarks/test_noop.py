"""The webhook bench's /noop baseline (`benchmarks.noop`): what it answers, and that it
costs no more framework work than the production route it is compared with."""

from __future__ import annotations

import orjson
from fastapi.testclient import TestClient

from benchmarks.noop import with_noop
from tests.webhook.fakes import FakeView, ScriptedAdmit, load_example, result
from tests.webhook.test_request_cost import calls_per_request
from webhook.limits import MAX_BODY_BYTES
from webhook.server import create_app

#: Python calls of one /noop request through the app: 58 today, 164 when the admission
#: endpoints were FastAPI routes (dependency solving, the request object, the telemetry
#: check); the bound leaves room for library upgrades.
MAX_NOOP_CALLS = 120


def bench_app(admit: ScriptedAdmit) -> TestClient:
    return TestClient(with_noop(create_app(FakeView(), admit=admit)))


def test_noop_allows_and_echoes_the_uid_without_deciding() -> None:
    admit = ScriptedAdmit(result())
    review = load_example("replicaset-pod.json")
    with bench_app(admit) as client:
        response = client.post("/noop", content=orjson.dumps(review))
        assert client.post("/mutate", content=orjson.dumps(review)).status_code == 200
    assert response.json()["response"] == {"uid": review["request"]["uid"], "allowed": True}
    assert len(admit.calls) == 1  # the /mutate request only


def test_noop_refuses_what_mutate_refuses() -> None:
    with bench_app(ScriptedAdmit(result())) as client:
        assert client.post("/noop", content=b"{not json").status_code == 400
        too_large = {"content-length": str(MAX_BODY_BYTES + 1)}
        assert client.post("/noop", content=b" " * 16, headers=too_large).status_code == 413
        many = orjson.dumps(list(range(40_000)))
        assert client.post("/noop", content=many).status_code == 413


async def test_a_noop_request_costs_few_python_calls() -> None:
    app = with_noop(create_app(FakeView(), admit=ScriptedAdmit(result())))
    assert await calls_per_request(app, "/noop") <= MAX_NOOP_CALLS
