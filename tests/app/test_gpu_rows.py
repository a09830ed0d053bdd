"""A GpuReactivePolicy's GPU row as the rest of kerf decides it, end to end through
`kerf explain` on state files: selected with the policy's precedence, filtered by the
strategy's `gpu` switches, applied by eviction (GPUs do not resize in place), and
`GpuActionConflict` only when policies disagree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kerf.cli import main

NOW = "2026-12-01T12:00:00Z"
API = "rightsizing.kubex.ai/v1alpha1"
KEY = "gpureactive.rightsizing.kubex.ai/desired-resource-{}"
GPU = {"nvidia.com/gpu": "1"}
SIGNAL = {
    "prometheus": {"metric": "m", "namespaceLabel": "n", "podLabel": "p", "containerLabel": "c"}
}


def strategy(**spec: Any) -> dict[str, Any]:
    switches = {"upsize": True, "downsize": True}
    return {
        "apiVersion": API,
        "kind": "AutomationStrategy",
        "metadata": {"name": "gpu", "namespace": "ml"},
        "spec": {"enablement": {"gpu": {"requests": switches, "limits": switches}}, **spec},
    }


def policy(kind: str = "GpuReactivePolicy") -> dict[str, Any]:
    scope: dict[str, Any] = {"labelSelector": {"matchLabels": {"app": "train"}}}
    meta: dict[str, Any] = {"name": "gpu", "creationTimestamp": "2026-11-01T00:00:00Z"}
    if kind.startswith("Cluster"):
        scope["namespaceSelector"] = {"operator": "In", "values": ["ml"]}
    else:
        meta["namespace"] = "ml"
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": meta,
        "spec": {
            "automationStrategyRef": {"name": "gpu"},
            "scope": scope,
            "metrics": {"compute": SIGNAL, "memory": SIGNAL},
        },
    }


def workload(annotations: dict[str, str]) -> list[dict[str, Any]]:
    container = {"name": "app", "image": "x", "resources": {"requests": GPU, "limits": GPU}}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "train",
            "namespace": "ml",
            "labels": {"app": "train"},
            "annotations": annotations,
        },
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": "train"}},
                "spec": {"containers": [container]},
            },
        },
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"train-{i}",
                "namespace": "ml",
                "labels": {"app": "train"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "train",
                        "controller": True,
                    }
                ],
            },
            "spec": {"nodeName": "n1", "containers": [container]},
            "status": {
                "phase": "Running",
                "startTime": "2026-11-30T00:00:00Z",
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for i in (1, 2)
    ]
    return [deployment, *pods]


def gpu_row(count: str) -> dict[str, str]:
    payload = orjson.dumps({"app": {"nvidia.com/gpu": count}}).decode()
    return {KEY.format("requests"): payload, KEY.format("limits"): payload}


def explain(tmp_path: Path, capsys: pytest.CaptureFixture[str], *objects: dict[str, Any]) -> dict:
    (tmp_path / "case.yaml").write_text(yaml.safe_dump_all(objects))
    assert main(["explain", "-f", str(tmp_path), "--now", NOW, "--for", "running"]) == 0
    return dict(orjson.loads(capsys.readouterr().out)["pods"][0])


def test_the_gpu_row_is_selected_and_applied_by_eviction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = explain(tmp_path, capsys, strategy(), policy(), *workload(gpu_row("3")))
    assert (pod["outcome"], pod["method"]) == ("apply", "evict"), pod
    selected = {(s["field"], s["resource"]): (s["value"], s["policyKind"]) for s in pod["selected"]}
    assert selected == {
        ("requests", "nvidia.com/gpu"): ("3", "GpuReactivePolicy"),
        ("limits", "nvidia.com/gpu"): ("3", "GpuReactivePolicy"),
    }


def test_in_place_only_says_a_gpu_change_needs_eviction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only_in_place = strategy(podEviction={"enabled": False})
    pod = explain(tmp_path, capsys, only_in_place, policy(), *workload(gpu_row("3")))
    assert pod["reason"] == "NoCommonMethod", pod
    assert "cannot be made in place" in pod["message"]


def test_gpu_switches_are_off_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    default = {
        "apiVersion": API,
        "kind": "AutomationStrategy",
        "metadata": {"name": "gpu", "namespace": "ml"},
        "spec": {},
    }
    pod = explain(tmp_path, capsys, default, policy(), *workload(gpu_row("3")))
    assert pod["outcome"] != "apply", pod


def test_policies_that_disagree_on_a_gpu_conflict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The namespaced policy (120) sets the request, the cluster one (110) the limit.
    namespaced = orjson.dumps({"app": {"nvidia.com/gpu": "2"}}).decode()
    cluster = orjson.dumps({"app": {"nvidia.com/gpu": "3"}}).decode()
    annotations = {
        KEY.format("requests"): namespaced,
        "cwgpureactive.rightsizing.kubex.ai/desired-resource-limits": cluster,
    }
    pod = explain(
        tmp_path,
        capsys,
        strategy(),
        {**strategy(), "kind": "ClusterAutomationStrategy", "metadata": {"name": "gpu"}},
        policy(),
        policy("ClusterGpuReactivePolicy"),
        *workload(annotations),
    )
    assert pod["reason"] == "GpuActionConflict", pod
    assert pod["message"].startswith("selected GPU actions disagree")


def test_explain_shows_the_last_gpu_evaluation_and_its_driving_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gpu = {
        "policy": "GpuReactivePolicy ml/gpu",
        "reason": "GpuUpsize",
        "message": "compute upsize: pod train-1 uses 2.50 GPU of 1.00 GPU; total 3.00 GPU",
        "drivingMetric": "compute",
        "direction": "upsize",
        "baseline": {"app": "1"},
        "values": {"app": "3"},
    }
    record = {
        "apiVersion": API,
        "kind": "RightsizingRecommendation",
        "metadata": {"name": "deployment-train", "namespace": "ml"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "train"}},
        "status": {"gpu": gpu},
    }
    objects = (strategy(), policy(), record, *workload(gpu_row("3")))
    (tmp_path / "case.yaml").write_text(yaml.safe_dump_all(objects))
    assert main(["explain", "-f", str(tmp_path), "--now", NOW]) == 0
    [shown] = orjson.loads(capsys.readouterr().out)["gpu"]
    assert (shown["name"], shown["drivingMetric"], shown["values"]) == (
        "train",
        "compute",
        {"app": "3"},
    )
    assert main(["explain", "-f", str(tmp_path), "--now", NOW, "-o", "text"]) == 0
    text = capsys.readouterr().out
    assert "Deployment ml/train  (gpu reactive: GpuReactivePolicy ml/gpu)" in text
    assert "values: app=3  baseline: app=1  driving metric: compute" in text


def kai_workload(fraction: str, row: str, queue: str = "team-a") -> list[dict[str, Any]]:
    """A KAI workload: no nvidia.com/gpu, its share in the pods' `gpu-fraction`, a queue."""
    objects = workload(
        {KEY.format("requests"): orjson.dumps({"app": {"gpu-fraction": row}}).decode()}
    )
    for obj in objects:
        template = obj["spec"]["template"] if obj["kind"] == "Deployment" else obj
        template["spec"]["containers"] = [{"name": "app", "image": "x"}]
        template["metadata"]["annotations"] = {"gpu-fraction": fraction}
        template["metadata"]["labels"]["kai.scheduler/queue"] = queue
    return objects


def test_a_kai_fraction_row_is_applied_by_eviction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = explain(tmp_path, capsys, strategy(), policy(), *kai_workload("0.3", "0.46"))
    assert (pod["outcome"], pod["method"]) == ("apply", "evict"), pod
    [selected] = pod["selected"]
    assert (selected["field"], selected["resource"], selected["value"]) == (
        "requests",
        "gpu-fraction",
        "0.46",
    )


def test_a_kai_fraction_in_place_is_no_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = explain(tmp_path, capsys, strategy(), policy(), *kai_workload("0.46", "0.460"))
    assert pod["outcome"] != "apply", pod


def test_a_kai_fraction_follows_the_gpu_switches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_upsize = strategy()
    no_upsize["spec"]["enablement"]["gpu"]["requests"] = {"upsize": False, "downsize": True}
    pod = explain(tmp_path, capsys, no_upsize, policy(), *kai_workload("0.3", "0.46"))
    assert pod["outcome"] != "apply", pod
    pod = explain(tmp_path, capsys, no_upsize, policy(), *kai_workload("0.6", "0.46"))
    assert (pod["outcome"], pod["method"]) == ("apply", "evict"), pod


def test_a_kai_fraction_is_never_changed_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only_in_place = strategy(podEviction={"enabled": False})
    pod = explain(tmp_path, capsys, only_in_place, policy(), *kai_workload("0.3", "0.46"))
    assert pod["reason"] == "NoCommonMethod", pod
    assert "cannot be made in place" in pod["message"]


def test_a_kai_fraction_is_not_set_on_a_pod_without_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # kerf converts no workload to KAI, even where setFromUnspecified would allow it
    unspecified = strategy()
    unspecified["spec"]["enablement"]["gpu"]["requests"]["setFromUnspecified"] = True
    objects = kai_workload("0.3", "0.46")
    for obj in objects:
        template = obj["spec"]["template"] if obj["kind"] == "Deployment" else obj
        del template["metadata"]["annotations"]
    pod = explain(tmp_path, capsys, unspecified, policy(), *objects)
    assert (pod["outcome"], pod["reason"]) == ("skipped", "NotScheduledByKai"), pod
