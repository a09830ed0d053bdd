"""Behaviours of the real kube-apiserver 1.35 that kerf depends on, checked on both
backends (kubesim must agree with the real server; docs/kubesim.md lists what it does not
model)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from harness.wait import wait_until
from tests.conformance.conftest import NamespacedKubectl

ROOT = Path(__file__).resolve().parents[2]


def pod(name: str, *, sidecar: bool = False, guaranteed: bool = False) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    if guaranteed:
        resources["limits"] = {"cpu": "100m", "memory": "128Mi"}
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "web:1", "resources": resources}]
    }
    if sidecar:
        spec["initContainers"] = [
            {"name": "proxy", "image": "envoy:1", "restartPolicy": "Always", "resources": resources}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def running(kubectl: NamespacedKubectl, body: dict[str, Any]) -> dict[str, Any]:
    kubectl("create", "-f", "-", stdin=json.dumps(body))
    name = body["metadata"]["name"]

    def ready() -> dict[str, Any] | None:
        found = json.loads(kubectl("get", "pod", name, "-o", "json"))
        return found if (found.get("status") or {}).get("phase") == "Running" else None

    return wait_until(ready, f"pod {name} running")


def resize(kubectl: NamespacedKubectl, name: str, patch: dict[str, Any]) -> str:
    """`kubectl patch --subresource resize` (strategic merge); its output or its error."""
    return kubectl(
        "patch",
        "pod",
        name,
        "--subresource",
        "resize",
        "--type",
        "strategic",
        "-p",
        json.dumps(patch),
        check=False,
    )


def test_a_resize_that_changes_the_qos_class_is_refused(kubectl: NamespacedKubectl) -> None:
    running(kubectl, pod("qos", guaranteed=True))
    out = resize(
        kubectl,
        "qos",
        {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "50m"}}}]}},
    )
    assert "Pod QOS Class may not change as a result of resizing" in out


def test_a_resize_may_not_remove_a_request(kubectl: NamespacedKubectl) -> None:
    running(kubectl, pod("removal"))
    patch = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": None}}}]}}
    assert "resource requests cannot be removed" in resize(kubectl, "removal", patch)


def test_an_event_note_over_1024_bytes_is_refused(kubectl: NamespacedKubectl) -> None:
    def event(name: str, note: str) -> str:
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name},
            "eventTime": "2026-12-01T10:00:00.000000Z",
            "reportingController": "kerf.dev/conformance",
            "reportingInstance": "test",
            "action": "Resize",
            "reason": "Resized",
            "type": "Normal",
            "regarding": {
                "kind": "Pod",
                "name": "p",
                "namespace": kubectl.namespace,
                "apiVersion": "v1",
            },
            "note": note,
        }
        return kubectl("create", "-f", "-", stdin=json.dumps(body), check=False)

    assert "created" in event("fits", "a" * 1024)
    assert "can have at most 1024 characters" in event("too-long", "a" * 1025)
    # Counted in bytes: 600 two-byte characters are 1,200 bytes.
    assert "can have at most 1024 characters" in event("wide", "é" * 600)


def test_only_a_core_v1_event_carries_the_old_timestamps(kubectl: NamespacedKubectl) -> None:
    """What kerf's Events rely on (reconciler/events.py): events.k8s.io/v1 refuses
    lastTimestamp and count at create; a core v1 Event of the new kind carries them, and
    holds its message to 1024 bytes as the new API does."""
    regarding = {"kind": "Pod", "name": "p", "namespace": kubectl.namespace, "apiVersion": "v1"}
    new = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "new"},
        "eventTime": "2026-12-01T10:00:00.000000Z",
        "reportingController": "kerf.dev/conformance",
        "reportingInstance": "test",
        "action": "Resize",
        "reason": "Resized",
        "type": "Normal",
        "regarding": regarding,
        "note": "n",
        "deprecatedLastTimestamp": "2026-12-01T10:00:00Z",
        "deprecatedCount": 1,
    }
    refused = kubectl("create", "-f", "-", stdin=json.dumps(new), check=False)
    assert "needs to be unset" in refused
    old = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "old"},
        "eventTime": "2026-12-01T10:00:00.000000Z",
        "reportingComponent": "kerf.dev/conformance",
        "reportingInstance": "test",
        "action": "Resize",
        "reason": "Resized",
        "type": "Normal",
        "involvedObject": regarding,
        "message": "n",
        "firstTimestamp": "2026-12-01T10:00:00Z",
        "lastTimestamp": "2026-12-01T10:00:00Z",
        "count": 1,
    }
    assert "created" in kubectl("create", "-f", "-", stdin=json.dumps(old))
    read = json.loads(kubectl("get", "events.v1.events.k8s.io", "old", "-o", "json"))
    assert (read["deprecatedLastTimestamp"], read["deprecatedCount"]) == (
        "2026-12-01T10:00:00Z",
        1,
    )
    long = {**old, "metadata": {"name": "long"}, "message": "a" * 1025}
    assert "can have at most 1024 characters" in kubectl(
        "create", "-f", "-", stdin=json.dumps(long), check=False
    )


def test_a_configmap_over_1_mib_of_values_is_refused(kubectl: NamespacedKubectl) -> None:
    def configmap(name: str, data: dict[str, str], binary: dict[str, str] | None = None) -> str:
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name},
            "data": data,
        }
        if binary:
            body["binaryData"] = binary
        return kubectl("create", "-f", "-", stdin=json.dumps(body), check=False)

    limit = 1024 * 1024
    refused = "[]: Too long: may not be more than 1048576 bytes"
    # The values are counted, not the keys: 1 MiB of values under long keys fits.
    assert "created" in configmap("fits", {"a" * 200: "x" * (limit - 1), "b": "y"})
    assert refused in configmap("too-big", {"a": "x" * (limit + 1)})
    # binaryData counts its decoded bytes, with data's.
    binary = {"b": base64.b64encode(b"z" * 1000).decode()}
    assert refused in configmap("with-binary", {"a": "x" * (limit - 999)}, binary)


def test_a_server_side_dry_run_create_stores_nothing(kubectl: NamespacedKubectl) -> None:
    out = kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(pod("dry"))
    )
    assert json.loads(out)["metadata"]["name"] == "dry"
    assert "dry" not in kubectl("get", "pods", "-o", "name")


def test_a_sidecar_is_resized_under_init_containers(kubectl: NamespacedKubectl) -> None:
    running(kubectl, pod("sidecar", sidecar=True))
    wanted = {"requests": {"cpu": "200m", "memory": "128Mi"}}
    out = resize(
        kubectl, "sidecar", {"spec": {"initContainers": [{"name": "proxy", "resources": wanted}]}}
    )
    assert "patched" in out, out
    found = json.loads(kubectl("get", "pod", "sidecar", "-o", "json"))
    assert found["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] == "200m"
    assert found["metadata"]["generation"] == 2


def test_a_sidecar_named_under_containers_is_a_container_a_resize_may_not_add(
    kubectl: NamespacedKubectl,
) -> None:
    running(kubectl, pod("misnamed", sidecar=True))
    wanted = {"requests": {"cpu": "200m"}}
    out = resize(
        kubectl, "misnamed", {"spec": {"containers": [{"name": "proxy", "resources": wanted}]}}
    )
    assert "containers may not be added or removed on resize" in out
    found = json.loads(kubectl("get", "pod", "misnamed", "-o", "json"))
    assert found["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] == "100m"


def test_a_strategic_merge_patch_of_a_list_item_without_its_merge_key_is_refused(
    kubectl: NamespacedKubectl,
) -> None:
    running(kubectl, pod("smp"))
    patch = {"spec": {"containers": [{"image": "web:2"}]}}
    out = kubectl(
        "patch", "pod", "smp", "--type", "strategic", "-p", json.dumps(patch), check=False
    )
    assert (
        "Error from server: map: map[image:web:2] does not contain declared merge key: name" in out
    )


def static_policy(name: str, values: dict[str, Any], weight: Any = 0) -> str:
    """A StaticPolicy as kubectl sends it (YAML: `0` is an integer, `1e+30` a float)."""
    return (
        "apiVersion: rightsizing.kubex.ai/v1alpha1\n"
        "kind: StaticPolicy\n"
        f"metadata: {{name: {name}}}\n"
        "spec:\n"
        "  automationStrategyRef: {name: default}\n"
        f"  weight: {weight}\n"
        f"  resources: {{containers: {{app: {{limits: {json.dumps(values)}}}}}}}\n"
    )


def install_crds(kubectl: NamespacedKubectl) -> None:
    kubectl("apply", "-k", str(ROOT / "manifests" / "crds"))
    kubectl("wait", "--for", "condition=Established", "crd/staticpolicies.rightsizing.kubex.ai")


@pytest.mark.parametrize(
    ("values", "weight", "words"),
    [
        ({"memory": 0}, 0, "should be greater than or equal to 1"),
        ({"memory": "0"}, 0, "should match"),
        ({"memory": "0Mi"}, 0, "should match"),
        ({"cpu": "0.000"}, 0, "should match"),
        ({"memory": "-384Mi"}, 0, "should match"),
        ({"memory": "256Mi"}, "1e+30", "spec.weight in body must be of type integer"),
        (
            {"memory": "256Mi"},
            2000000,
            "spec.weight in body should be less than or equal to 1000000",
        ),
    ],
)
def test_kerfs_schema_refuses_a_zero_quantity_and_an_unbounded_weight(
    kubectl: NamespacedKubectl, values: dict[str, Any], weight: Any, words: str
) -> None:
    install_crds(kubectl)
    out = kubectl("create", "-f", "-", stdin=static_policy("bad", values, weight), check=False)
    assert "is invalid" in out and words in out, out
    assert "created" in kubectl(
        "create", "-f", "-", stdin=static_policy("good", {"memory": "1Gi", "cpu": 200000})
    )


def disruption_target(kubectl: NamespacedKubectl, name: str) -> dict[str, Any] | None:
    """The pod's `DisruptionTarget` condition, once it is deleting (its finalizer holds
    it), then lets it go."""
    found = json.loads(kubectl("get", "pod", name, "-o", "json"))
    assert found["metadata"].get("deletionTimestamp"), found["metadata"]
    kubectl("patch", "pod", name, "--type", "merge", "-p", '{"metadata":{"finalizers":null}}')
    conditions = (found.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "DisruptionTarget"), None)


def test_an_evicted_pod_is_marked_before_it_goes_and_a_deleted_one_is_not(
    kubectl: NamespacedKubectl,
) -> None:
    """What tells a successor whether an eviction recorded before it was asked for went
    out (reconciler/intent.py): the Eviction API marks the pod, a delete does not."""
    for name in ("evicted", "deleted"):
        body = pod(name)
        body["metadata"]["finalizers"] = ["kerf.dev/conformance"]
        running(kubectl, body)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "evicted"}}
    path = f"/api/v1/namespaces/{kubectl.namespace}/pods/evicted/eviction"
    kubectl("create", "--raw", path, "-f", "-", stdin=json.dumps(eviction))
    kubectl("delete", "pod", "deleted", "--wait=false")
    marked = disruption_target(kubectl, "evicted")
    assert marked is not None
    assert (marked["status"], marked["reason"]) == ("True", "EvictionByEvictionAPI")
    assert disruption_target(kubectl, "deleted") is None
