"""The bound on JSON values per request body: a body that would take long to parse is
refused (413) before the parser sees it; a large body with few values is still parsed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from tests.webhook.fakes import FakeView, ScriptedAdmit, load_example, result
from webhook import server
from webhook.limits import MAX_BODY_BYTES, MAX_BODY_VALUES, too_many_values
from webhook.server import create_app


def review_with_env(entries: int) -> dict[str, Any]:
    """A pod review whose first container has `entries` env vars (3 values each)."""
    review = load_example("replicaset-pod.json")
    container = review["request"]["object"]["spec"]["containers"][0]
    container["env"] = [{"name": f"VAR_{i}", "value": f"v{i}"} for i in range(entries)]
    return review


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the bodies the app parsed."""
    seen: list[int] = []
    real: Callable[[bytes], Any] = server.load_json

    def counting(body: bytes) -> Any:
        seen.append(len(body))
        return real(body)

    monkeypatch.setattr(server, "load_json", counting)
    return seen


def test_commas_and_opening_brackets_bound_the_values() -> None:
    assert too_many_values(b"[1,2,3]", 2)
    assert not too_many_values(b"[1,2]", 2)
    assert not too_many_values(b'{"a":[]}', 2)
    # Inside strings they count too: the bound errs towards refusing.
    assert too_many_values(b'"a,b,c,d"', 2)
    # A body no longer than the limit cannot hold more values and is not scanned.
    assert not too_many_values(b",,,,", 4)


def test_a_body_over_the_value_bound_is_refused_unparsed(view: FakeView, parses: list[int]) -> None:
    admit = ScriptedAdmit(result())
    with TestClient(create_app(view, admit=admit, max_body_values=1000)) as client:
        body = orjson.dumps(review_with_env(400))  # 1,200 env values and the pod's own
        response = client.post("/mutate", content=body)
        assert response.status_code == 413
        assert "more than 1000 JSON values" in response.json()["error"]
        refused = client.get("/metrics").text
        assert 'kerf_webhook_refused_requests_total{reason="TooManyValues"} 1.0' in refused
        assert parses == []
        assert admit.calls == []
        within = client.post("/mutate", content=orjson.dumps(review_with_env(100)))
        assert within.status_code == 200
        assert len(parses) == 1 and len(admit.calls) == 1


def test_five_mebibytes_of_small_objects_are_not_parsed_by_default(
    view: FakeView, parses: list[int]
) -> None:
    """The body the issue measured at 20-30 ms of parsing on the event loop."""
    body = orjson.dumps(review_with_env(100_000))
    assert len(body) < MAX_BODY_BYTES
    with TestClient(create_app(view, admit=ScriptedAdmit(result()))) as client:
        response = client.post("/mutate", content=body)
    assert response.status_code == 413
    assert f"more than {MAX_BODY_VALUES} JSON values" in response.json()["error"]
    assert parses == []


def test_a_large_body_with_few_values_is_parsed(view: FakeView, parses: list[int]) -> None:
    """Bytes alone are bounded by the 5 MiB cap: a long string parses at memory speed."""
    review = load_example("replicaset-pod.json")
    review["request"]["object"]["metadata"]["labels"]["pad"] = "x" * (4 * 1024 * 1024)
    body = orjson.dumps(review)
    with TestClient(create_app(view, admit=ScriptedAdmit(result()))) as client:
        response = client.post("/mutate", content=body)
    assert response.status_code == 200
    assert response.json()["response"]["uid"] == review["request"]["uid"]
    assert parses == [len(body)]
