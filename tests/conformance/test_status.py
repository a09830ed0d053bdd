"""What a write of the status subresource keeps, and what a write of the main resource
does with a status, for pods, Deployments and kerf's custom resources (kube-apiserver's
status strategies)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conformance.conftest import NamespacedKubectl

#: what each status write below tries to change besides the status
METADATA = {
    "labels": {"written": "by-status"},
    "annotations": {"written": "by-status"},
    "ownerReferences": [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": "1d2f1e7a-0000-4000-8000-000000000001",
        }
    ],
}


def patched(kubectl: NamespacedKubectl, obj: str, body: dict[str, Any], status: bool) -> Any:
    """A merge patch of `obj` (of its status subresource when `status`); the object as
    the server stored it."""
    where = ["--subresource", "status"] if status else []
    out = kubectl("patch", obj, *where, "--type", "merge", "-p", json.dumps(body), "-o", "json")
    return json.loads(out)


def test_a_pod_status_write_changes_labels_and_annotations_but_not_owners_or_spec(
    kubectl: NamespacedKubectl,
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "status"},
        "spec": {"containers": [{"name": "app", "image": "web:1"}]},
    }
    kubectl("create", "-f", "-", stdin=json.dumps(pod))
    body = {
        "metadata": METADATA,
        "spec": {"activeDeadlineSeconds": 30},
        "status": {"message": "written"},
    }
    stored = patched(kubectl, "pod/status", body, status=True)
    meta = stored["metadata"]
    assert meta["labels"] == {"written": "by-status"}
    assert meta["annotations"] == {"written": "by-status"}
    assert "ownerReferences" not in meta
    assert "activeDeadlineSeconds" not in stored["spec"]
    assert stored["status"]["message"] == "written"
    assert stored["status"]["qosClass"] == "BestEffort"


def test_a_pod_write_ignores_its_status(kubectl: NamespacedKubectl) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "main"},
        "spec": {"containers": [{"name": "app", "image": "web:1"}]},
    }
    kubectl("create", "-f", "-", stdin=json.dumps(pod))
    body = {"metadata": {"labels": {"main": "yes"}}, "status": {"message": "ignored"}}
    stored = patched(kubectl, "pod/main", body, status=False)
    assert stored["metadata"]["labels"] == {"main": "yes"}
    assert "message" not in stored["status"]


def test_a_deployment_status_write_keeps_its_labels_and_spec(kubectl: NamespacedKubectl) -> None:
    kubectl("create", "deployment", "status", "--image=web:1")
    body = {"metadata": METADATA, "spec": {"replicas": 5}, "status": {"collisionCount": 3}}
    stored = patched(kubectl, "deployment/status", body, status=True)
    meta = stored["metadata"]
    assert meta["labels"] == {"app": "status"}
    assert meta["annotations"]["written"] == "by-status"
    assert [ref["name"] for ref in meta["ownerReferences"]] == ["owner"]
    assert stored["spec"]["replicas"] == 1
    assert stored["status"]["collisionCount"] == 3


def test_a_deployment_write_ignores_its_status(kubectl: NamespacedKubectl) -> None:
    kubectl("create", "deployment", "main", "--image=web:1")
    body = {"metadata": {"labels": {"main": "yes"}}, "status": {"collisionCount": 3}}
    stored = patched(kubectl, "deployment/main", body, status=False)
    assert stored["metadata"]["labels"]["main"] == "yes"
    assert "collisionCount" not in stored["status"]


@pytest.mark.usefixtures("kerf_crds")
def test_a_custom_resource_status_write_changes_only_its_status(
    kubectl: NamespacedKubectl,
) -> None:
    recommendation = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "RightsizingRecommendation",
        "metadata": {"name": "status", "labels": {"kept": "yes"}},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        "status": {"phase": "Applied"},
    }
    created = json.loads(
        kubectl("create", "-f", "-", "-o", "json", stdin=json.dumps(recommendation))
    )
    assert "status" not in created  # a create's status is dropped
    body = {
        "metadata": METADATA,
        "spec": {"targetRef": {"name": "other"}},
        "status": {"phase": "Pending"},
    }
    stored = patched(kubectl, "rsrec/status", body, status=True)
    meta = stored["metadata"]
    assert meta["labels"] == {"kept": "yes"}
    assert "annotations" not in meta
    assert "ownerReferences" not in meta
    assert stored["spec"]["targetRef"]["name"] == "web"
    assert stored["status"]["phase"] == "Pending"
    assert meta["generation"] == 1

    main = patched(
        kubectl,
        "rsrec/status",
        {"metadata": {"labels": {"main": "yes"}}, "status": {"phase": "Failed"}},
        status=False,
    )
    assert main["metadata"]["labels"] == {"kept": "yes", "main": "yes"}
    assert main["status"]["phase"] == "Pending"
