"""Request bounds: a pod over them is admitted unchanged before any decision is made."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from app.decide.admission import admit_pod
from app.runtime.clock import utc_now
from app.store.statedir import load_view
from tests.webhook.fakes import EXAMPLES, load_example
from webhook.bounds import DEFAULT_BOUNDS, over_bounds
from webhook.server import create_app

STOREFRONT = Path(__file__).resolve().parents[2] / "examples" / "storefront"


def pod_of(review: dict[str, Any]) -> dict[str, Any]:
    return review["request"]["object"]


def with_containers(count: int, resources: dict[str, Any] | None = None) -> dict[str, Any]:
    review = load_example("replicaset-pod.json")
    template = pod_of(review)["spec"]["containers"][0]
    pod_of(review)["spec"]["containers"] = [
        {**copy.deepcopy(template), "name": f"c{i}" if i else "app", "resources": resources or {}}
        for i in range(count)
    ]
    return review


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.json")))
def test_every_example_is_within_the_bounds(name: str) -> None:
    pod = pod_of(load_example(name)) or {}
    assert over_bounds(pod) is None


@pytest.mark.parametrize(
    ("review", "fragment"),
    [
        (with_containers(DEFAULT_BOUNDS.containers + 1), "containers"),
        (with_containers(1, {"requests": {"cpu": "1" * 65}}), "longer than 64"),
        (
            with_containers(
                DEFAULT_BOUNDS.quantities // 16 + 1,
                {"requests": {f"example.com/r{i}": "1" for i in range(16)}},
            ),
            "resource quantities",
        ),
        (with_containers(2, {"limits": {f"r{i}": "1" for i in range(300)}}), "quantities"),
    ],
)
def test_over_the_bounds_is_named(review: dict[str, Any], fragment: str) -> None:
    problem = over_bounds(pod_of(review))
    assert problem is not None and fragment in problem


def test_args_owner_references_names_and_annotations_are_bounded() -> None:
    review = with_containers(2)
    pod = pod_of(review)
    pod["spec"]["containers"][0]["args"] = ["--x"] * (DEFAULT_BOUNDS.args + 1)
    assert "args" in (over_bounds(pod) or "")
    pod = pod_of(with_containers(1))
    pod["metadata"]["ownerReferences"] = pod["metadata"]["ownerReferences"] * 33
    assert "ownerReferences" in (over_bounds(pod) or "")
    pod = pod_of(with_containers(1))
    pod["spec"]["containers"][0]["name"] = "c" * 64
    assert "container name" in (over_bounds(pod) or "")
    pod = pod_of(with_containers(1))
    pod["metadata"]["annotations"] = {"a": "x" * DEFAULT_BOUNDS.annotation_bytes}
    assert "annotations" in (over_bounds(pod) or "")
    pod["metadata"]["annotations"] = {"a": {"not": "a string"}}
    assert "not a string" in (over_bounds(pod) or "")


def test_a_pod_over_the_bounds_fails_open_with_the_reason() -> None:
    """The pod of the issue: a thousand quantities of 4,000 digits. It is answered
    without a decision (the decision took 0.8 s of the event loop)."""
    review = with_containers(
        250, {"requests": {"cpu": "9" * 4000, "memory": "9" * 4000}, "limits": {}}
    )
    view = load_view([STOREFRONT])
    with TestClient(create_app(view)) as client:
        answer = client.post("/mutate", content=orjson.dumps(review)).json()["response"]
        metrics = client.get("/metrics").text
    assert answer["uid"] == review["request"]["uid"]
    assert "patch" not in answer
    assert answer["warnings"] == [
        "kerf admitted the pod unchanged: the pod has more than 64 containers"
    ]
    assert 'kerf_webhook_fail_open_total{cause="OverLimit"} 1.0' in metrics


def worst_bounded_pod() -> dict[str, Any]:
    """A pod at every bound at once, with quantities that parse (the longest form)."""
    per_container = DEFAULT_BOUNDS.quantities // DEFAULT_BOUNDS.containers // 2
    quantity = "0." + "9" * (DEFAULT_BOUNDS.quantity_chars - 4) + "Mi"
    resources = {
        field: {("cpu" if i == 0 else f"example.com/r{i}"): quantity for i in range(per_container)}
        for field in ("requests", "limits")
    }
    review = with_containers(DEFAULT_BOUNDS.containers, resources)
    pod = pod_of(review)
    per_args = DEFAULT_BOUNDS.args // DEFAULT_BOUNDS.containers
    for container in pod["spec"]["containers"]:
        container["args"] = [f"--flag-{i}=value" for i in range(per_args)]
    assert over_bounds(pod) is None
    return review


def test_the_worst_bounded_pod_is_decided() -> None:
    """At the bounds the real decision still runs and answers (its cost is a figure for
    docs/webhook.md, measured outside the tests)."""
    view = load_view([STOREFRONT])
    result = admit_pod(view, pod_of(worst_bounded_pod()), "shop", utc_now())
    assert result.outcome in {"apply", "blocked", "skipped"}
