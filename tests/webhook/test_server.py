"""/mutate and the operational endpoints, with the ASGI app in-process."""

from __future__ import annotations

import copy
import io
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import jsonpatch
import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client import generate_latest

from app.model.annotations import POD_INFO
from tests.webhook.fakes import (
    FakeView,
    ScriptedAdmit,
    SlowAdmit,
    WorkloadRef,
    failing_admit,
    load_example,
    result,
)
from webhook.logs import DecisionLog
from webhook.review import decode_patch
from webhook.server import create_app

WEB = WorkloadRef("Deployment", "shop", "web")
DESIRED = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
APPLY = result(
    resources={"app": DESIRED},
    annotations={POD_INFO: '{"fingerprint":"f1","keys":[],"containers":{}}'},
    owner=WEB,
)


def post(client: TestClient, review: Any, path: str = "/mutate") -> dict[str, Any]:
    response = client.post(path, content=orjson.dumps(review))
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["allowed"] is True
    return answer


def metric(client: TestClient, line_start: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture
def admit() -> ScriptedAdmit:
    return ScriptedAdmit(APPLY)


def test_pod_create_is_patched(client: TestClient, admit: ScriptedAdmit) -> None:
    review = load_example("replicaset-pod.json")
    answer = post(client, review)
    response = answer["response"]
    assert response["uid"] == review["request"]["uid"]
    assert response["patchType"] == "JSONPatch"
    pod = jsonpatch.apply_patch(review["request"]["object"], decode_patch(answer))
    assert pod["spec"]["containers"][0]["resources"] == DESIRED
    assert POD_INFO in pod["metadata"]["annotations"]
    assert [namespace for namespace, _ in admit.calls] == ["shop"]
    assert metric(client, 'kerf_webhook_requests_total{outcome="apply",reason=""}') == 1
    assert metric(client, 'kerf_webhook_patched_values_total{resource="cpu"}') == 1
    assert metric(client, 'kerf_webhook_patched_values_total{resource="memory"}') == 1


def test_reinvocation_on_own_output_yields_no_patch(client: TestClient) -> None:
    review = load_example("replicaset-pod.json")
    first = post(client, review)
    again = copy.deepcopy(review)
    again["request"]["object"] = jsonpatch.apply_patch(
        review["request"]["object"], decode_patch(first)
    )
    response = post(client, again)["response"]
    assert "patch" not in response
    assert "patchType" not in response


def test_dry_run_is_answered_the_same(client: TestClient) -> None:
    normal = post(client, load_example("replicaset-pod.json"))
    dry = post(client, load_example("dry-run.json"))
    assert decode_patch(dry) == decode_patch(normal)
    assert metric(client, 'kerf_webhook_patched_values_total{resource="cpu"}') == 1


def test_namespace_comes_from_the_request(client: TestClient, admit: ScriptedAdmit) -> None:
    review = load_example("replicaset-pod.json")
    del review["request"]["object"]["metadata"]["namespace"]
    post(client, review)
    assert admit.calls[0][0] == "shop"


@pytest.mark.parametrize(
    ("example", "outcome", "reason"),
    [("update-pod.json", "ignored", "")],
)
def test_requests_not_decided_are_allowed_untouched(
    client: TestClient, admit: ScriptedAdmit, example: str, outcome: str, reason: str
) -> None:
    review = load_example(example)
    response = post(client, review)["response"]
    assert response == {"uid": review["request"]["uid"], "allowed": True}
    assert admit.calls == []
    assert (
        metric(client, f'kerf_webhook_requests_total{{outcome="{outcome}",reason="{reason}"}}') == 1
    )


@pytest.mark.parametrize(
    "change",
    [
        {"kind": {"group": "apps", "version": "v1", "kind": "Deployment"}},
        {"resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "binding"},
        {"operation": "DELETE"},
    ],
)
def test_other_objects_are_allowed_untouched(
    client: TestClient, admit: ScriptedAdmit, change: dict[str, Any]
) -> None:
    review = load_example("replicaset-pod.json")
    review["request"].update(change)
    assert "patch" not in post(client, review)["response"]
    assert admit.calls == []


def test_blocked_decision_is_allowed_without_patch(view: FakeView) -> None:
    admit = ScriptedAdmit(result("blocked", reason="LowConfidence", owner=WEB))
    with TestClient(create_app(view, admit=admit)) as client:
        response = post(client, load_example("replicaset-pod.json"))["response"]
        assert "patch" not in response
        # SPEC §9: one warning naming the reason, shown by kubectl to the pod's creator.
        assert response["warnings"] == [
            "kerf did not rightsize the pod (LowConfidence): blocked LowConfidence"
        ]
        assert (
            metric(client, 'kerf_webhook_requests_total{outcome="blocked",reason="LowConfidence"}')
            == 1
        )


def fail_open_response(client: TestClient, review: Any, cause: str) -> dict[str, Any]:
    response = post(client, review)["response"]
    assert "patch" not in response
    assert response["warnings"] and response["warnings"][0].startswith("kerf admitted")
    assert metric(client, f'kerf_webhook_fail_open_total{{cause="{cause}"}}') == 1
    return response


def test_internal_error_fails_open_with_uid(view: FakeView) -> None:
    with TestClient(create_app(view, admit=failing_admit)) as client:
        review = load_example("replicaset-pod.json")
        response = fail_open_response(client, review, "InternalError")
        assert response["uid"] == review["request"]["uid"]


def test_decision_past_the_deadline_is_not_applied(view: FakeView) -> None:
    # SlowAdmit would patch the pod; past the deadline its answer is dropped.
    with TestClient(create_app(view, admit=SlowAdmit(0.2), deadline_s=0.05)) as client:
        response = fail_open_response(client, load_example("replicaset-pod.json"), "Deadline")
        assert "deadline" in response["warnings"][0]
        assert "patch" not in response


def test_decision_within_the_deadline_is_applied(view: FakeView) -> None:
    with TestClient(create_app(view, admit=SlowAdmit(0.01), deadline_s=5)) as client:
        response = post(client, load_example("replicaset-pod.json"))["response"]
        assert response["patchType"] == "JSONPatch"
        assert metric(client, 'kerf_webhook_fail_open_total{cause="Deadline"}') == 0


@pytest.mark.parametrize(
    ("mutilate", "cause"),
    [
        (lambda r: r.update(apiVersion="admission.k8s.io/v2"), "MalformedReview"),
        (lambda r: r.update(kind="Pod"), "MalformedReview"),
        (lambda r: r["request"].pop("uid"), "MalformedReview"),
        (lambda r: r["request"].update(object={"spec": []}), "UnknownShape"),
        (
            lambda r: r["request"]["object"]["spec"].update(containers=[{"image": "x"}]),
            "UnknownShape",
        ),
        (lambda r: r["request"].update(object=None), "UnknownShape"),
    ],
)
def test_malformed_reviews_fail_open(client: TestClient, mutilate: Any, cause: str) -> None:
    review = load_example("replicaset-pod.json")
    mutilate(review)
    fail_open_response(client, review, cause)


def test_malformed_review_echoes_uid_and_version(client: TestClient) -> None:
    review = {
        "apiVersion": "admission.k8s.io/v1beta1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-1"},
    }
    answer = client.post("/mutate", content=orjson.dumps(review)).json()
    assert answer["apiVersion"] == "admission.k8s.io/v1beta1"
    assert answer["response"]["uid"] == "u-1"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [(b"", "empty"), (b"{not json", "not valid UTF-8 JSON"), (b'{"a": "\xff\xfe"}', "UTF-8")],
)
def test_non_json_gets_400_with_reason(client: TestClient, body: bytes, fragment: str) -> None:
    response = client.post("/mutate", content=body)
    assert response.status_code == 400
    assert fragment in response.json()["error"]


def test_oversized_body_gets_413(view: FakeView, admit: ScriptedAdmit) -> None:
    with TestClient(create_app(view, admit=admit, max_body_bytes=1024)) as client:
        big = load_example("replicaset-pod.json")
        big["request"]["object"]["metadata"]["labels"]["pad"] = "x" * 2048
        assert client.post("/mutate", content=orjson.dumps(big)).status_code == 413


def test_oversized_chunked_body_gets_413(view: FakeView, admit: ScriptedAdmit) -> None:
    chunks = [b"[" + b"1," * 400] * 10
    with TestClient(create_app(view, admit=admit, max_body_bytes=1024)) as client:
        response = client.post("/mutate", content=iter(chunks))
        assert response.status_code == 413
        assert "1024" in response.json()["error"]


def test_default_limit_is_five_mebibytes(client: TestClient) -> None:
    response = client.post(
        "/mutate", content=b" " * 16, headers={"content-length": str(5 * 1024 * 1024 + 1)}
    )
    assert response.status_code == 413


def test_health_and_readiness(admit: ScriptedAdmit) -> None:
    view = FakeView(synced=False)
    with TestClient(create_app(view, admit=admit)) as client:
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 503
        view.synced = True
        assert client.get("/readyz").status_code == 200


def test_not_ready_while_the_api_server_is_unreachable(admit: ScriptedAdmit) -> None:
    # The webhook's view cannot follow the cluster: other replicas, which can, take the
    # traffic (failurePolicy Ignore admits pods if none can).
    reachable = [False]
    view = FakeView(synced=True)
    with TestClient(create_app(view, admit=admit, reachable=lambda: reachable[0])) as client:
        answer = client.get("/readyz")
        assert answer.status_code == 503 and answer.json() == {"status": "API server unreachable"}
        reachable[0] = True
        assert client.get("/readyz").status_code == 200


def test_sync_age_metric(admit: ScriptedAdmit) -> None:
    now = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)
    view = FakeView(synced=True, synced_at=now - timedelta(seconds=42))
    with TestClient(create_app(view, admit=admit, clock=lambda: now)) as client:
        assert metric(client, "kerf_webhook_view_sync_age_seconds") == 42


def test_clock_is_the_decision_time(view: FakeView, admit: ScriptedAdmit) -> None:
    now = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)
    with TestClient(create_app(view, admit=admit, clock=lambda: now)) as client:
        post(client, load_example("replicaset-pod.json"))
    assert admit.calls == [("shop", now)]


def test_decision_is_logged_as_structured_record(view: FakeView, admit: ScriptedAdmit) -> None:
    stream = io.StringIO()
    review = load_example("replicaset-pod.json")
    with TestClient(create_app(view, admit=admit, decision_log=DecisionLog(stream))) as client:
        post(client, review)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    decision = orjson.loads(lines[0])
    assert (decision["level"], decision["logger"]) == ("info", "kerf.webhook")
    assert decision["uid"] == review["request"]["uid"]
    assert decision["pod"] == "web-7d4b9-"
    assert decision["owner"] == {"kind": "Deployment", "namespace": "shop", "name": "web"}
    assert decision["outcome"] == "apply"
    assert decision["selected"][0]["policy"] == "shop/web-static"


def test_metrics_registries_are_per_app(view: FakeView, admit: ScriptedAdmit) -> None:
    with (
        TestClient(create_app(view, admit=admit)) as one,
        TestClient(create_app(view, admit=admit)) as two,
    ):
        post(one, load_example("replicaset-pod.json"))
        assert metric(one, 'kerf_webhook_requests_total{outcome="apply",reason=""}') == 1
        assert metric(two, 'kerf_webhook_requests_total{outcome="apply",reason=""}') == 0


@pytest.mark.parametrize("outcome", ["apply", "skipped"])
def test_only_blocked_decisions_carry_a_warning(view: FakeView, outcome: str) -> None:
    admit = ScriptedAdmit(result(outcome, reason="NoSignificantChange", owner=WEB))
    with TestClient(create_app(view, admit=admit)) as client:
        assert "warnings" not in post(client, load_example("replicaset-pod.json"))["response"]


@pytest.mark.parametrize("path", ["/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"])
def test_no_schema_or_docs_pages_are_served(client: TestClient, path: str) -> None:
    assert client.get(path).status_code == 404


def refusal_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    lines = [orjson.loads(line) for line in stream.getvalue().splitlines()]
    return [line for line in lines if line["msg"] == "request refused"]


def test_400_and_413_are_counted_and_logged(view: FakeView, admit: ScriptedAdmit) -> None:
    stream = io.StringIO()
    app = create_app(view, admit=admit, max_body_bytes=1024, decision_log=DecisionLog(stream))
    with TestClient(app) as client:
        assert client.post("/mutate", content=b"{not json").status_code == 400
        assert client.post("/mutate", content=b"[" + b" " * 2048 + b"]").status_code == 413
        assert client.post("/mutate", content=b"").status_code == 400
        assert metric(client, 'kerf_webhook_refused_requests_total{reason="NotJSON"}') == 2
        assert metric(client, 'kerf_webhook_refused_requests_total{reason="TooLarge"}') == 1
    lines = refusal_lines(stream)
    assert [(line["status"], line["reason"], line["level"]) for line in lines] == [
        (400, "NotJSON", "warning"),
        (413, "TooLarge", "warning"),
        (400, "NotJSON", "warning"),
    ]


async def test_a_client_gone_mid_body_is_counted_quietly(
    view: FakeView, admit: ScriptedAdmit, caplog: pytest.LogCaptureFixture
) -> None:
    """The body stops half-way and the connection closes: the disconnect used to escape
    to uvicorn as starlette's ClientDisconnect (a traceback and a 500)."""
    stream = io.StringIO()
    app = create_app(view, admit=admit, decision_log=DecisionLog(stream))
    messages = iter(
        [
            {"type": "http.request", "body": b'{"apiVersion": ', "more_body": True},
            {"type": "http.disconnect"},
        ]
    )
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "https",
        "path": "/mutate",
        "raw_path": b"/mutate",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-length", b"1000")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8443),
    }
    with caplog.at_level(logging.DEBUG):
        await app(scope, receive, send)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert [(line["status"], line["reason"]) for line in refusal_lines(stream)] == [
        (None, "ClientGone")
    ]
    assert 'kerf_webhook_refused_requests_total{reason="ClientGone"} 1.0' in (
        generate_latest(app.state.metrics.registry).decode()
    )


def test_the_production_app_has_no_bench_endpoint(client: TestClient) -> None:
    """/noop is the bench's baseline (benchmarks/noop.py), added only by the bench."""
    review = load_example("replicaset-pod.json")
    assert client.post("/noop", content=orjson.dumps(review)).status_code == 404
