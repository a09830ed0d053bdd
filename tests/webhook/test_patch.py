"""The JSON patch built from a decision, applied to real AdmissionReview fixtures."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import orjson
import pytest

from app.model.annotations import POD_INFO
from tests.webhook.fakes import load_example, result
from webhook.patch import build_patch, escape_pointer_token, plan_patch

STATIC_REQUESTS = "static.rightsizing.kubex.ai/desired-resource-requests"


def pod_of(example: str) -> dict[str, Any]:
    return load_example(example)["request"]["object"]


def apply(pod: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply like the API server: the patch must be valid against the original pod."""
    return jsonpatch.apply_patch(pod, ops, in_place=False)


def assert_idempotent(pod: dict[str, Any], decision: Any) -> dict[str, Any]:
    patched = apply(pod, build_patch(pod, decision))
    assert build_patch(patched, decision) == []
    return patched


def info(containers: dict[str, Any]) -> str:
    return orjson.dumps(
        {"fingerprint": "f1", "keys": [STATIC_REQUESTS], "containers": containers}
    ).decode()


def test_replicaset_pod_gets_resources_and_annotations() -> None:
    pod = pod_of("replicaset-pod.json")
    desired = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
    decision = result(
        resources={"app": desired},
        annotations={POD_INFO: info({"app": desired}), STATIC_REQUESTS: '{"app":{}}'},
    )
    ops = build_patch(pod, decision)
    assert [op["path"] for op in ops] == [
        "/spec/containers/0/resources/requests/cpu",
        "/spec/containers/0/resources/requests/memory",
        "/metadata/annotations",
    ]
    patched = assert_idempotent(pod, decision)
    assert patched["spec"]["containers"][0]["resources"] == desired
    assert patched["metadata"]["annotations"][POD_INFO] == decision.annotations[POD_INFO]
    assert pod == pod_of("replicaset-pod.json"), "the input pod must not be modified"


def test_pod_without_resources_or_annotations_is_built_with_add() -> None:
    pod = pod_of("no-resources.json")
    desired = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    decision = result(resources={"worker": desired}, annotations={POD_INFO: info({})})
    ops = build_patch(pod, decision)
    assert ops == [
        {"op": "add", "path": "/spec/containers/0/resources", "value": desired},
        {"op": "add", "path": "/metadata/annotations", "value": {POD_INFO: info({})}},
    ]
    patched = assert_idempotent(pod, decision)
    assert patched["spec"]["containers"][0]["resources"] == desired


def test_annotations_are_added_one_by_one_next_to_existing_ones() -> None:
    pod = pod_of("init-and-sidecar.json")
    decision = result(annotations={POD_INFO: info({}), STATIC_REQUESTS: '{"app":{}}'})
    assert [op["path"] for op in build_patch(pod, decision)] == [
        "/metadata/annotations/automation-webhook.kubex.ai~1pod-rightsizing-info",
        "/metadata/annotations/static.rightsizing.kubex.ai~1desired-resource-requests",
    ]
    patched = assert_idempotent(pod, decision)
    assert patched["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"] == "app"


def test_empty_resources_object_gets_requests_added() -> None:
    pod = pod_of("no-resources.json")
    pod["spec"]["containers"][0]["resources"] = {}
    decision = result(resources={"worker": {"requests": {"cpu": "100m"}, "limits": {}}})
    assert build_patch(pod, decision) == [
        {"op": "add", "path": "/spec/containers/0/resources/requests", "value": {"cpu": "100m"}}
    ]


def test_multi_container_changes_only_named_containers_and_args() -> None:
    pod = pod_of("multi-container.json")
    decision = result(
        resources={
            "envoy": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "metrics": {"requests": {"cpu": "10m", "memory": "32Mi"}},
        },
        args={"app": ["--port=8080", "--log-level=info", "--gc=low-latency"]},
    )
    patched = assert_idempotent(pod, decision)
    app, envoy, metrics = patched["spec"]["containers"]
    assert app["resources"] == pod["spec"]["containers"][0]["resources"]
    assert app["args"][-1] == "--gc=low-latency"
    assert envoy["resources"] == decision.resources["envoy"]
    assert envoy["args"] == ["-c", "/etc/envoy/envoy.yaml"]
    assert metrics["resources"] == decision.resources["metrics"]


def test_args_added_where_container_has_none() -> None:
    pod = pod_of("multi-container.json")
    decision = result(args={"metrics": ["--statsd.listen-udp=:9125"]})
    assert build_patch(pod, decision) == [
        {"op": "add", "path": "/spec/containers/2/args", "value": ["--statsd.listen-udp=:9125"]}
    ]


def test_init_and_sidecar_containers_are_addressed_in_init_containers() -> None:
    pod = pod_of("init-and-sidecar.json")
    decision = result(
        resources={
            "app": {"requests": {"cpu": "200m"}},
            "log-shipper": {"requests": {"memory": "96Mi"}},
        }
    )
    ops = build_patch(pod, decision)
    assert [op["path"] for op in ops] == [
        "/spec/containers/0/resources/requests/cpu",
        "/spec/initContainers/1/resources/requests/memory",
    ]
    patched = assert_idempotent(pod, decision)
    assert patched["spec"]["initContainers"][0] == pod["spec"]["initContainers"][0]
    assert patched["spec"]["initContainers"][1]["resources"]["limits"] == {"memory": "128Mi"}


def test_guaranteed_pod_keeps_requests_equal_to_limits() -> None:
    pod = pod_of("guaranteed.json")
    desired = {
        "requests": {"cpu": "1500m", "memory": "3Gi"},
        "limits": {"cpu": "1500m", "memory": "3Gi"},
    }
    patched = assert_idempotent(pod, result(resources={"db": desired}))
    resources = patched["spec"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"] == desired["limits"]


def test_values_kerf_does_not_manage_are_kept() -> None:
    pod = pod_of("replicaset-pod.json")
    container = pod["spec"]["containers"][0]
    container["resources"]["requests"]["ephemeral-storage"] = "1Gi"
    container["resources"]["claims"] = [{"name": "gpu"}]
    patched = assert_idempotent(pod, result(resources={"app": {"requests": {"cpu": "300m"}}}))
    assert patched["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "300m", "memory": "512Mi", "ephemeral-storage": "1Gi"},
        "limits": {"memory": "1Gi"},
        "claims": [{"name": "gpu"}],
    }


def test_unchanged_decision_yields_empty_patch() -> None:
    pod = pod_of("guaranteed.json")
    same = copy.deepcopy(pod["spec"]["containers"][0]["resources"])
    assert build_patch(pod, result(resources={"db": same})) == []
    assert build_patch(pod, result("skipped", reason="NoSignificantChange")) == []


def test_another_spelling_of_the_same_quantity_is_not_a_change() -> None:
    pod = pod_of("guaranteed.json")  # db: cpu "2", memory "4Gi" (requests and limits)
    desired = {
        "requests": {"cpu": "2000m", "memory": "2Gi"},
        "limits": {"cpu": "2", "memory": "4096Mi"},
    }
    ops = build_patch(pod, result(resources={"db": desired}))
    assert [(o["op"], o["path"]) for o in ops if "/resources/" in o["path"]] == [
        ("replace", "/spec/containers/0/resources/requests/memory")
    ]


def test_unknown_container_is_ignored() -> None:
    pod = pod_of("guaranteed.json")
    assert build_patch(pod, result(resources={"ghost": {"requests": {"cpu": "1"}}})) == []


def test_annotation_key_escaping_round_trips() -> None:
    pod = pod_of("guaranteed.json")
    pod["metadata"]["annotations"] = {"existing": "x"}
    key = "odd~key/with~1slashes"
    ops = build_patch(pod, result(annotations={key: "v", "existing": "y"}))
    assert ops == [
        {"op": "add", "path": "/metadata/annotations/odd~0key~1with~01slashes", "value": "v"},
        {"op": "replace", "path": "/metadata/annotations/existing", "value": "y"},
    ]
    assert apply(pod, ops)["metadata"]["annotations"] == {"existing": "y", key: "v"}


@pytest.mark.parametrize(
    ("token", "escaped"),
    [("a/b", "a~1b"), ("a~b", "a~0b"), ("~/", "~0~1"), ("~1", "~01"), ("plain", "plain")],
)
def test_escape_pointer_token(token: str, escaped: str) -> None:
    assert escape_pointer_token(token) == escaped


def test_pod_without_metadata_gets_metadata_added() -> None:
    pod = {"spec": {"containers": [{"name": "c"}]}}
    patched = assert_idempotent(pod, result(annotations={"k": "v"}))
    assert patched["metadata"] == {"annotations": {"k": "v"}}


def test_labels_are_set_beside_the_annotations() -> None:
    pod = pod_of("replicaset-pod.json")
    decision = result(annotations={"gpu-fraction": "0.5"}, labels={"kai.scheduler/queue": "q"})
    assert [op["path"] for op in build_patch(pod, decision)] == [
        "/metadata/annotations",
        "/metadata/labels/kai.scheduler~1queue",
    ]
    patched = assert_idempotent(pod, decision)
    assert patched["metadata"]["labels"] == {
        **pod["metadata"]["labels"],
        "kai.scheduler/queue": "q",
    }
    bare = assert_idempotent({"spec": {"containers": []}}, decision)
    assert bare["metadata"] == {
        "annotations": {"gpu-fraction": "0.5"},
        "labels": {"kai.scheduler/queue": "q"},
    }


def test_patch_counts_only_values_it_sets() -> None:
    pod = pod_of("multi-container.json")
    pod["spec"]["containers"][2]["resources"] = {}
    decision = result(
        resources={
            "app": {"requests": {"cpu": "1", "memory": "900Mi"}},
            "envoy": {"requests": {"cpu": "100m"}, "limits": {"memory": "256Mi"}},
            "metrics": {"requests": {"cpu": "10m", "nvidia.com/gpu": "1"}},
        },
        args={"envoy": ["-c", "/etc/envoy/other.yaml"]},
    )
    patch = plan_patch(pod, decision)
    assert patch.ops == build_patch(pod, decision)
    assert patch.values == {"memory": 2, "cpu": 1, "nvidia.com/gpu": 1, "args": 1}
    no_resources = pod_of("no-resources.json")
    whole = plan_patch(no_resources, result(resources={"worker": {"limits": {"cpu": "1"}}}))
    assert [op["path"] for op in whole.ops] == ["/spec/containers/0/resources"]
    assert whole.values == {"cpu": 1}


@pytest.mark.parametrize(
    ("current", "desired", "same"),
    [
        ("250m", "300m", False),
        ("512Mi", "512Mi", True),
        ("1000m", "1", True),
        ("1", "1000m", True),
        ("0250m", "250m", True),
        ("0.25", "250m", True),
        ("1Gi", "1024Mi", True),
        ("1G", "1Gi", False),
        ("1e3", "1k", True),
        ("0", "0m", True),
        ("0m", "5m", False),
        ("10", "1", False),
        ("١٠m", "10m", False),
        ("bogus", "1", False),
        (2, "2", True),
    ],
)
def test_only_a_different_quantity_is_replaced(current: Any, desired: str, same: bool) -> None:
    pod = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": current}}}]}}
    ops = build_patch(pod, result(resources={"c": {"requests": {"cpu": desired}}}))
    expected = (
        []
        if same
        else [
            {"op": "replace", "path": "/spec/containers/0/resources/requests/cpu", "value": desired}
        ]
    )
    assert ops == expected
