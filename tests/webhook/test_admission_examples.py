"""Every AdmissionReview of examples/admission against examples/admission-state, through
the webhook app with the real decision: each file shows the case it is named after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from fastapi.testclient import TestClient

from app.store.statedir import load_view
from tests.webhook.fakes import load_example
from webhook.review import decode_patch
from webhook.server import create_app

STATE = Path(__file__).resolve().parents[2] / "examples" / "admission-state"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(load_view([STATE])))


def patched(client: TestClient, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    review = load_example(name)
    answer = client.post("/mutate", json=review).json()
    assert answer["response"]["allowed"] is True
    return jsonpatch.apply_patch(review["request"]["object"], decode_patch(answer)), answer


def resources(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]
    return {
        c["name"]: c.get("resources") for c in spec["containers"] + spec.get("initContainers", [])
    }


def test_namespaced_policy_beats_the_cluster_baseline(client: TestClient) -> None:
    pod, _ = patched(client, "replicaset-pod.json")
    # cpu limit not set: cpu.limits.setFromUnspecified defaults to false.
    assert resources(pod)["app"] == {
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"memory": "512Mi"},
    }


def test_multi_container_pod_gets_resources_and_args(client: TestClient) -> None:
    pod, _ = patched(client, "multi-container.json")
    res = resources(pod)
    # 1 CPU → 250m is beyond the 50 % step: it stops at 500m.
    assert res["app"]["requests"] == {"cpu": "500m", "memory": "512Mi"}
    assert res["metrics"] == {"requests": {"cpu": "150m", "memory": "192Mi"}}
    app = next(c for c in pod["spec"]["containers"] if c["name"] == "app")
    assert app["args"] == ["--port=8080", "--log-level=warn"]


def test_sidecar_request_above_its_limit_blocks_the_plan(client: TestClient) -> None:
    pod, answer = patched(client, "init-and-sidecar.json")
    assert "patch" not in answer["response"]
    assert resources(pod)["migrate"] == {"requests": {"cpu": "200m", "memory": "256Mi"}}


def test_pod_without_resources_gets_requests(client: TestClient) -> None:
    pod, _ = patched(client, "no-resources.json")
    assert resources(pod)["worker"] == {"requests": {"cpu": "150m", "memory": "192Mi"}}


@pytest.mark.parametrize(
    "name",
    ["paused-namespace.json", "protected-namespace.json", "mirror-pod.json", "update-pod.json"],
)
def test_left_alone(client: TestClient, name: str) -> None:
    review = load_example(name)
    pod, answer = patched(client, name)
    assert "patch" not in answer["response"]
    assert pod == review["request"]["object"]


def test_guaranteed_pod_stays_guaranteed(client: TestClient) -> None:
    pod, _ = patched(client, "guaranteed.json")
    # The cluster baseline asks for requests only (150m, 192Mi); retainGuaranteedQoS sets
    # the limits with them, and the 50 % step stops both at half of 2 CPU / 4Gi.
    assert resources(pod)["db"] == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"cpu": "1", "memory": "2Gi"},
    }


def test_a_third_pod_of_a_template_is_answered_from_the_memo() -> None:
    """The same answer every time; the first two decided afresh (a template is memoised
    from its second pod on), the third counted as a memo hit in /metrics (the memo is the
    library's)."""
    view = load_view([STATE])
    answers = []
    with TestClient(create_app(view)) as fresh:
        for n in range(3):
            review = load_example("replicaset-pod.json")
            review["request"]["uid"] = f"request-{n}"
            review["request"]["object"]["metadata"]["name"] = f"web-7d4b9-{n}"
            answers.append(fresh.post("/mutate", json=review).json())
        text = fresh.get("/metrics").text
    patches = [decode_patch(a) for a in answers]
    assert patches[0] != [] and patches.count(patches[0]) == 3
    assert [a["response"]["uid"] for a in answers] == ["request-0", "request-1", "request-2"]
    assert 'kerf_webhook_decision_memo_total{result="hit"} 1.0' in text
    assert 'kerf_webhook_decision_memo_total{result="miss"} 2.0' in text
