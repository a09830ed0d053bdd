"""AdmissionReview validation: the field that is wrong is named, the uid is salvaged."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.webhook.fakes import load_example
from webhook.review import API_VERSION_V1, ReviewError, parse_review


def review() -> dict[str, Any]:
    return copy.deepcopy(load_example("replicaset-pod.json"))


def test_a_pod_create_review_is_read() -> None:
    doc = review()
    request = parse_review(doc)
    assert request.uid == doc["request"]["uid"]
    assert request.is_pod_create
    assert request.object == doc["request"]["object"]
    assert request.dry_run is False


def test_optional_fields_default() -> None:
    doc = review()
    for key in ("namespace", "name", "subResource", "dryRun"):
        doc["request"].pop(key, None)
    doc["request"]["kind"].pop("group", None)
    request = parse_review(doc)
    assert (request.namespace, request.name, request.sub_resource) == (None, None, None)
    assert (request.group, request.dry_run) == ("", False)


@pytest.mark.parametrize(
    ("mutilate", "expected"),
    [
        (lambda d: d["request"].pop("uid"), "request.uid: field required"),
        (lambda d: d["request"].update(uid=""), "request.uid: must not be empty"),
        (lambda d: d["request"].update(uid=7), "request.uid: expected a string, got a number"),
        (lambda d: d["request"].update(operation=None), "request.operation: expected a string"),
        (lambda d: d["request"].update(kind=[]), "request.kind: expected an object, got an array"),
        (lambda d: d["request"]["kind"].pop("version"), "request.kind.version: field required"),
        (lambda d: d["request"]["resource"].pop("resource"), "request.resource.resource"),
        (lambda d: d["request"].update(object="pod"), "request.object: expected an object"),
        (lambda d: d["request"].update(dryRun="yes"), "request.dryRun: expected a boolean"),
        (lambda d: d["request"].update(namespace=1), "request.namespace: expected a string"),
        (lambda d: d.update(kind="Pod"), "kind: expected 'AdmissionReview'"),
        (lambda d: d.update(apiVersion="v1"), "apiVersion: expected 'admission.k8s.io/v1'"),
        (lambda d: d.pop("request"), "request: field required"),
    ],
)
def test_the_wrong_field_is_named(mutilate: Any, expected: str) -> None:
    doc = review()
    mutilate(doc)
    with pytest.raises(ReviewError) as caught:
        parse_review(doc)
    message = str(caught.value)
    assert message.startswith(f"not an {API_VERSION_V1} AdmissionReview: ")
    assert expected in message
    # The answer must still echo the uid when the request carries a usable one.
    request = doc.get("request")
    usable = isinstance(request, dict) and isinstance(request.get("uid"), str)
    assert caught.value.uid == (request["uid"] if usable else "")


@pytest.mark.parametrize("doc", [None, [], "review", 3])
def test_a_non_object_is_not_a_review(doc: Any) -> None:
    with pytest.raises(ReviewError, match="<root>: expected an object"):
        parse_review(doc)
