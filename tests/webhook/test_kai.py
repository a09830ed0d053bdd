"""A KAI pod through the webhook app with the real decision: the GPU reactive row's
`gpu-fraction` becomes the pod's annotation, never a container resource, and the pod's
`kai.scheduler/queue` label is kept unless the strategy sets `kai.setQueueWhenSpecified`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import pytest
import yaml
from fastapi.testclient import TestClient

from app.model.annotations import POD_INFO
from app.store.statedir import load_view
from app.store.view import ClusterView
from webhook.review import decode_patch
from webhook.server import create_app

API = "rightsizing.kubex.ai/v1alpha1"
ROW = "gpureactive.rightsizing.kubex.ai/desired-resource-requests"
SIGNAL = {
    "prometheus": {"metric": "m", "namespaceLabel": "n", "podLabel": "p", "containerLabel": "c"}
}


def state(tmp_path: Path, kai: dict[str, Any], row: str) -> ClusterView:
    switches = {"upsize": True, "downsize": True}
    strategy = {
        "apiVersion": API,
        "kind": "AutomationStrategy",
        "metadata": {"name": "gpu", "namespace": "ml"},
        "spec": {"enablement": {"gpu": {"requests": switches}}, "kai": kai},
    }
    policy = {
        "apiVersion": API,
        "kind": "GpuReactivePolicy",
        "metadata": {"name": "gpu", "namespace": "ml"},
        "spec": {
            "automationStrategyRef": {"name": "gpu"},
            "scope": {"labelSelector": {"matchLabels": {"app": "train"}}},
            "metrics": {"compute": SIGNAL, "memory": SIGNAL},
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "train",
            "namespace": "ml",
            "labels": {"app": "train"},
            "annotations": {ROW: orjson.dumps({"app": {"gpu-fraction": row}}).decode()},
        },
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"labels": {"app": "train"}},
                "spec": {"containers": [{"name": "app", "image": "x"}]},
            },
        },
    }
    (tmp_path / "state.yaml").write_text(yaml.safe_dump_all([strategy, policy, deployment]))
    return load_view([tmp_path])


def review(fraction: str) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "train-5f6d7-",
            "namespace": "ml",
            "labels": {
                "app": "train",
                "pod-template-hash": "5f6d7",
                "kai.scheduler/queue": "team-a",
            },
            "annotations": {"gpu-fraction": fraction},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "train-5f6d7",
                    "uid": "u1",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "app", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "kai-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "ml",
            "operation": "CREATE",
            "object": pod,
        },
    }


def admit(view: ClusterView, fraction: str) -> tuple[dict[str, Any], dict[str, Any]]:
    sent = review(fraction)
    answer = TestClient(create_app(view)).post("/mutate", json=sent).json()
    assert answer["response"]["allowed"] is True
    return jsonpatch.apply_patch(sent["request"]["object"], decode_patch(answer)), answer


def test_the_fraction_is_the_pod_annotation_and_the_queue_label_is_kept(tmp_path: Path) -> None:
    pod, _ = admit(state(tmp_path, {}, "0.46"), "0.3")
    assert pod["metadata"]["annotations"]["gpu-fraction"] == "0.46"
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"
    # KAI reads the annotation: no container gets a GPU resource
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
    info = orjson.loads(pod["metadata"]["annotations"][POD_INFO])
    assert ROW in info["keys"]


def test_set_queue_when_specified_sets_the_strategy_queue(tmp_path: Path) -> None:
    kai = {"setQueueWhenSpecified": True, "queue": "research"}
    pod, _ = admit(state(tmp_path, kai, "0.46"), "0.3")
    assert pod["metadata"]["annotations"]["gpu-fraction"] == "0.46"
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "research"


@pytest.mark.parametrize("kai", [{}, {"setQueueWhenSpecified": True}])
def test_a_pod_with_the_fraction_already_is_left_alone(tmp_path: Path, kai: dict[str, Any]) -> None:
    pod, answer = admit(state(tmp_path, kai, "0.46"), "0.46")
    assert "patch" not in answer["response"], answer
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"
