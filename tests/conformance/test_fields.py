"""Unknown fields (field validation): by default the real server drops them and warns
once per field (`Warning: unknown field "…"`); `fieldValidation=Strict`, which `kubectl
create -f` sends, refuses the write with 400 "strict decoding error"; for built-in kinds
and custom resources alike."""

from __future__ import annotations

import json

import pytest

from tests.conformance.conftest import NamespacedKubectl


def pod_with_unknown_fields(name: str) -> str:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"foo": 1, "containers": [{"name": "app", "image": "web:1", "bar": 2}]},
    }
    return json.dumps(body)


def recommendation_with_unknown_fields(name: str) -> str:
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "bar": 2}
    body = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "RightsizingRecommendation",
        "metadata": {"name": name},
        "spec": {"foo": 1, "targetRef": target},
    }
    return json.dumps(body)


def test_strict_refuses_a_pod_with_unknown_fields(kubectl: NamespacedKubectl) -> None:
    out = kubectl("create", "-f", "-", stdin=pod_with_unknown_fields("strict"), check=False)
    assert (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.containers[0].bar", unknown field "spec.foo"' in out
    ), out
    assert "strict" not in kubectl("get", "pods", "-o", "name")


def test_by_default_unknown_fields_of_a_pod_are_dropped_with_a_warning(
    kubectl: NamespacedKubectl,
) -> None:
    out = kubectl(
        "create", "--validate=warn", "-f", "-", stdin=pod_with_unknown_fields("warn"), check=False
    )
    assert 'Warning: unknown field "spec.containers[0].bar"' in out, out
    assert 'Warning: unknown field "spec.foo"' in out, out
    spec = json.loads(kubectl("get", "pod", "warn", "-o", "json"))["spec"]
    assert "foo" not in spec
    assert "bar" not in spec["containers"][0]
    patched = kubectl(
        "patch", "pod", "warn", "--type", "merge", "-p", '{"spec": {"zzz": 1}}', check=False
    )
    assert 'Warning: unknown field "spec.zzz"' in patched, patched
    assert "zzz" not in json.loads(kubectl("get", "pod", "warn", "-o", "json"))["spec"]


@pytest.mark.usefixtures("kerf_crds")
def test_unknown_fields_of_a_custom_resource_are_refused_or_dropped_with_a_warning(
    kubectl: NamespacedKubectl,
) -> None:
    strict = kubectl(
        "create", "-f", "-", stdin=recommendation_with_unknown_fields("strict"), check=False
    )
    assert (
        'RightsizingRecommendation in version "v1alpha1" cannot be handled as a '
        'RightsizingRecommendation: strict decoding error: unknown field "spec.foo", '
        'unknown field "spec.targetRef.bar"' in strict
    ), strict
    warned = kubectl(
        "create",
        "--validate=warn",
        "-f",
        "-",
        stdin=recommendation_with_unknown_fields("warn"),
        check=False,
    )
    assert 'Warning: unknown field "spec.foo"' in warned, warned
    assert 'Warning: unknown field "spec.targetRef.bar"' in warned, warned
    spec = json.loads(kubectl("get", "rsrec", "warn", "-o", "json"))["spec"]
    assert spec == {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}
