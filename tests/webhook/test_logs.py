"""Log lines under hostile input: one bounded line per request, no request values, no
traceback for bad input. The real decision over the storefront example decides."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from app.store.statedir import load_view
from tests.webhook.fakes import load_example
from webhook.logs import MAX_IDENTIFIER, DecisionLog, identifier, render_decided
from webhook.server import create_app

STOREFRONT = Path(__file__).resolve().parents[2] / "examples" / "storefront"
SECRET = "s3cr3t-value"
#: The longest line a request may produce: identifiers, a message and the selected list.
MAX_LINE = 16 * 1024


def set_name(value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(pod: dict[str, Any]) -> None:
        pod["metadata"]["name"] = value

    return mutate


def set_cpu(value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(pod: dict[str, Any]) -> None:
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = value

    return mutate


def set_requests(value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(pod: dict[str, Any]) -> None:
        pod["spec"]["containers"][0]["resources"]["requests"] = value

    return mutate


#: Stands for a name nested deeper than orjson writes (255): spliced into the body text.
DEEP = "deep-name-placeholder"

MUTATIONS = {
    "name is an object": set_name({"secret": SECRET}),
    "name nested 600 deep": set_name(DEEP),
    "name of a megabyte": set_name("n" * 1_000_000),
    "invalid quantity": set_cpu(f"1{SECRET}"),
    "quantity is an object": set_cpu({"v": SECRET}),
    "requests is a list": set_requests([SECRET]),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_one_bounded_line_without_request_values(
    mutation: str, caplog: pytest.LogCaptureFixture
) -> None:
    review = load_example("replicaset-pod.json")
    MUTATIONS[mutation](review["request"]["object"])
    stream = io.StringIO()
    app = create_app(load_view([STOREFRONT]), decision_log=DecisionLog(stream))
    body = orjson.dumps(review).replace(f'"{DEEP}"'.encode(), b"[" * 600 + b"]" * 600)
    with caplog.at_level(logging.INFO), TestClient(app) as client:
        response = client.post("/mutate", content=body)
    assert response.status_code == 200
    assert response.json()["response"]["uid"] == review["request"]["uid"]
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert len(lines[0]) <= MAX_LINE
    assert SECRET not in lines[0]
    decision = orjson.loads(lines[0])
    assert decision["msg"] == "admission decision"
    assert decision["uid"] == review["request"]["uid"]
    # No traceback and no request value in any other log record either.
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert SECRET not in caplog.text


def test_an_invalid_quantity_fails_open_by_name() -> None:
    review = load_example("replicaset-pod.json")
    set_cpu(f"1{SECRET}")(review["request"]["object"])
    with TestClient(create_app(load_view([STOREFRONT]))) as client:
        answer = client.post("/mutate", content=orjson.dumps(review)).json()["response"]
    assert answer["warnings"] == [
        "kerf admitted the pod unchanged: a resource quantity of the pod is not a valid "
        "Kubernetes quantity"
    ]


def test_identifiers_are_strings_cut_to_the_kubernetes_limit() -> None:
    assert identifier("web-1") == "web-1"
    assert identifier({"name": "x"}) is None
    assert identifier(["x"]) is None
    cut = identifier("a" * 10_000)
    assert cut is not None and len(cut) == MAX_IDENTIFIER + 1 and cut.endswith("…")


def test_a_decision_line_is_bounded() -> None:
    selected = [{"container": "c" * 1000, "value": "1", "policyName": "p"}] * 500
    stream = io.StringIO()
    DecisionLog(stream).decision(
        uid="u" * 5000,
        namespace="n" * 5000,
        pod="p" * 5000,
        decided=render_decided(
            owner={"kind": "Deployment", "namespace": "shop", "name": "w" * 5000},
            outcome="apply",
            reason=None,
            message="m" * 100_000,
            selected=selected,
        ),
        patch_ops=3,
    )
    line = stream.getvalue()
    assert line.endswith("\n") and line.count("\n") == 1
    assert len(line) <= MAX_LINE
    record = orjson.loads(line)
    assert record["selectedOmitted"] == 500 - len(record["selected"])
    assert (record["msg"], record["level"], record["patchOps"], record["dryRun"]) == (
        "admission decision",
        "info",
        3,
        False,
    )
    assert len(record["uid"]) == len(record["pod"]) == MAX_IDENTIFIER + 1
