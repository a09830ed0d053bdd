"""The webhook bench's baselines (`benchmarks.noop`): what they answer, that /noop costs no
more framework work than the production route it is compared with, and that
/fastapi-noop is a FastAPI endpoint doing the same work."""

from __future__ import annotations

import orjson
import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from benchmarks.noop import FASTAPI_PATH, PATH, with_noop
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


@pytest.mark.parametrize("path", [PATH, FASTAPI_PATH])
def test_a_noop_allows_and_echoes_the_uid_without_deciding(path: str) -> None:
    admit = ScriptedAdmit(result())
    review = load_example("replicaset-pod.json")
    with bench_app(admit) as client:
        response = client.post(path, content=orjson.dumps(review))
        assert client.post("/mutate", content=orjson.dumps(review)).status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json()["response"] == {"uid": review["request"]["uid"], "allowed": True}
    assert len(admit.calls) == 1  # the /mutate request only


@pytest.mark.parametrize("path", [PATH, FASTAPI_PATH])
def test_a_noop_refuses_what_mutate_refuses(path: str) -> None:
    with bench_app(ScriptedAdmit(result())) as client:
        assert client.post(path, content=b"{not json").status_code == 400
        many = orjson.dumps(list(range(40_000)))
        assert client.post(path, content=many).status_code == 413
        assert client.post(path, content=b" " * (MAX_BODY_BYTES + 1)).status_code == 413


def test_noop_refuses_a_declared_length_over_the_bound_before_reading() -> None:
    with bench_app(ScriptedAdmit(result())) as client:
        too_large = {"content-length": str(MAX_BODY_BYTES + 1)}
        assert client.post(PATH, content=b" " * 16, headers=too_large).status_code == 413


def test_the_baselines_are_matched_before_mutate_and_only_one_is_a_fastapi_route() -> None:
    routes = with_noop(create_app(FakeView(), admit=ScriptedAdmit(result()))).router.routes
    paths = [getattr(route, "path", None) for route in routes]
    assert paths[:3] == [FASTAPI_PATH, PATH, "/mutate"]
    assert isinstance(routes[0], APIRoute) and not isinstance(routes[1], APIRoute)


async def test_a_noop_request_costs_few_python_calls() -> None:
    app = with_noop(create_app(FakeView(), admit=ScriptedAdmit(result())))
    assert await calls_per_request(app, PATH) <= MAX_NOOP_CALLS


async def test_the_fastapi_noop_runs_fastapis_per_request_machinery() -> None:
    app = with_noop(create_app(FakeView(), admit=ScriptedAdmit(result())))
    # 127 calls against /noop's 62 today: the request object, dependency solving and the
    # response of a FastAPI endpoint, which /noop and /mutate skip.
    assert await calls_per_request(app, FASTAPI_PATH) > 1.5 * await calls_per_request(app, PATH)
