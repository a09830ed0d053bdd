"""Hypothesis fuzzing of /mutate: every answer is a well-formed review or a clear 4xx."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import jsonpatch
import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.model.annotations import POD_INFO
from tests.webhook.fakes import FakeView, ScriptedAdmit, load_example, result
from webhook.review import decode_patch
from webhook.server import create_app

EXAMPLES = [
    "replicaset-pod.json",
    "multi-container.json",
    "init-and-sidecar.json",
    "no-resources.json",
    "guaranteed.json",
    "mirror-pod.json",
]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


def decide(pod: Mapping[str, Any]) -> Any:
    """Rightsize the first container, whatever the pod looks like."""
    containers = (pod.get("spec") or {}).get("containers") or []
    first = containers[0]["name"] if containers else "none"
    return result(
        resources={first: {"requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}}},
        args={first: ["--fuzzed"]},
        annotations={POD_INFO: "{}", "a/b~c": "x"},
    )


@pytest.fixture(scope="module")
def fuzz_client() -> Iterator[TestClient]:
    with TestClient(create_app(FakeView(), admit=ScriptedAdmit(decide))) as client:
        yield client


def readable_uid(body: bytes) -> str | None:
    """The uid a review body carries where a reader can find it (`request.uid`, a string)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    request = doc.get("request") if isinstance(doc, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else None


def check(client: TestClient, body: bytes) -> dict[str, Any] | None:
    """Post `body`; assert the answer is a review (returned) or a JSON 400/413 (None).

    A review answer echoes every uid that can be read from the body, whatever else in the
    body is wrong (SPEC §9)."""
    response = client.post("/mutate", content=body)
    assert response.status_code in (200, 400, 413), response.text
    answer = response.json()
    if response.status_code != 200:
        assert isinstance(answer["error"], str) and answer["error"]
        return None
    assert answer["kind"] == "AdmissionReview"
    assert answer["apiVersion"].startswith("admission.k8s.io/")
    assert answer["response"]["allowed"] is True
    assert isinstance(answer["response"]["uid"], str)
    uid = readable_uid(body)
    if uid is not None:
        assert answer["response"]["uid"] == uid
    return answer


def set_path(doc: Any, path: list[Any], value: Any) -> None:
    """Replace the value at `path` (a list of keys/indexes that exists in `doc`)."""
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[list[Any]]:
    if isinstance(doc, dict):
        items: Iterator[tuple[Any, Any]] = iter(doc.items())
    elif isinstance(doc, list):
        items = iter(enumerate(doc))
    else:
        return
    for key, value in items:
        yield [*prefix, key]
        yield from paths(value, (*prefix, key))


@FUZZ
@given(value=json_values)
def test_random_json(fuzz_client: TestClient, value: Any) -> None:
    check(fuzz_client, orjson.dumps(value))


@FUZZ
@given(body=st.binary(max_size=200))
def test_random_bytes(fuzz_client: TestClient, body: bytes) -> None:
    check(fuzz_client, body)


@FUZZ
@given(example=st.sampled_from(EXAMPLES), data=st.data())
def test_truncated_reviews(fuzz_client: TestClient, example: str, data: st.DataObject) -> None:
    body = orjson.dumps(load_example(example))
    cut = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
    assert check(fuzz_client, body[:cut]) is None


@FUZZ
@given(
    example=st.sampled_from(EXAMPLES),
    api_version=st.sampled_from(["admission.k8s.io/v1beta1", "v1", "", 7, None, [], {"a": 1}]),
    kind=st.sampled_from(["AdmissionReview", "Pod", "", None, ["AdmissionReview"], {}]),
)
def test_wrong_api_version_or_kind(
    fuzz_client: TestClient, example: str, api_version: Any, kind: Any
) -> None:
    review = load_example(example)
    review["apiVersion"] = api_version
    review["kind"] = kind
    answer = check(fuzz_client, orjson.dumps(review))
    assert answer is not None
    if kind != "AdmissionReview" or api_version != "admission.k8s.io/v1":
        assert "patch" not in answer["response"]
        assert answer["response"]["warnings"]


@FUZZ
@given(example=st.sampled_from(EXAMPLES), data=st.data())
def test_mutated_reviews(fuzz_client: TestClient, example: str, data: st.DataObject) -> None:
    review = load_example(example)
    path = data.draw(st.sampled_from(list(paths(review))))
    set_path(review, path, data.draw(json_values))
    answer = check(fuzz_client, orjson.dumps(review))
    assert answer is not None
    if "patch" in answer["response"]:
        pod = copy.deepcopy(review["request"]["object"])
        jsonpatch.apply_patch(pod, decode_patch(answer), in_place=True)


@FUZZ
@given(example=st.sampled_from(EXAMPLES), junk=st.binary(min_size=1, max_size=8))
def test_non_utf8_inside_strings(fuzz_client: TestClient, example: str, junk: bytes) -> None:
    body = orjson.dumps(load_example(example)).replace(b'"app"', b'"' + junk + b'"', 1)
    check(fuzz_client, body)


def test_huge_body_is_refused(fuzz_client: TestClient) -> None:
    review = load_example("replicaset-pod.json")
    review["request"]["object"]["metadata"]["labels"]["pad"] = "x" * (5 * 1024 * 1024)
    response = fuzz_client.post("/mutate", content=orjson.dumps(review))
    assert response.status_code == 413
    assert "exceeds" in response.json()["error"]


def test_deeply_nested_json_is_a_clear_answer(fuzz_client: TestClient) -> None:
    check(fuzz_client, b"[" * 100_000 + b"]" * 100_000)
