"""`kerf explain` end to end: the CLI on the bundled examples, its JSON contract, and
user errors that exit non-zero with one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from kerf.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
NOW = "2026-11-29T12:00:00Z"


def run_json(capsys: pytest.CaptureFixture[str], *paths: Path, extra: tuple[str, ...] = ()) -> dict:
    argv = ["explain", *(a for p in paths for a in ("-f", str(p))), "--now", NOW, *extra]
    assert main(argv) == 0
    return orjson.loads(capsys.readouterr().out)


def by_name(result: dict) -> dict[str, dict]:
    return {pod["name"]: pod for pod in result["pods"]}


def test_storefront_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    pods = by_name(run_json(capsys, EXAMPLES / "storefront"))
    running = pods["web-7d4b9-abcde"]
    assert set(running) >= {
        "namespace",
        "name",
        "owner",
        "outcome",
        "reason",
        "method",
        "containers",
        "selected",
    }
    assert running["owner"] == {"kind": "Deployment", "name": "web"}
    assert running["outcome"] == "apply" and running["reason"] is None
    assert running["method"] == "inPlace"
    assert running["containers"] == {
        "app": {
            "requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        }
    }
    cpu = next(
        s for s in running["selected"] if s["field"] == "requests" and s["resource"] == "cpu"
    )
    assert cpu == {
        "container": "app",
        "field": "requests",
        "resource": "cpu",
        "value": "250m",
        "policyKind": "StaticPolicy",
        "policyNamespace": "shop",
        "policyName": "web-static",
        "annotationKey": "static.rightsizing.kubex.ai/desired-resource-requests",
    }
    assert pods["web-7d4b9-new01"]["method"] == "admission"
    api = pods["api-5f6c7-xyz12"]
    assert api["containers"]["api"] == {
        "requests": {"cpu": "300m", "memory": "384Mi"},
        "limits": {"memory": "768Mi"},
    }


def test_for_flag_forces_the_path(capsys: pytest.CaptureFixture[str]) -> None:
    pods = by_name(run_json(capsys, EXAMPLES / "storefront", extra=("--for", "admission")))
    assert {p["method"] for p in pods.values()} == {"admission"}


def test_multi_policy_composes_targets_from_two_policies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pod = run_json(capsys, EXAMPLES / "multi-policy")["pods"][0]
    winners = {
        (s["container"], s["field"], s["resource"]): s["policyName"] for s in pod["selected"]
    }
    # Same kind, weight and wildcard target: the older policy (checkout-cpu) wins the CPU.
    assert winners[("app", "requests", "cpu")] == "checkout-cpu"
    assert winners[("proxy", "requests", "cpu")] == "checkout-cpu"
    assert winners[("app", "requests", "memory")] == "checkout-memory"
    assert pod["containers"]["proxy"] == {
        "requests": {"cpu": "200m", "memory": "128Mi"},
        "limits": {"memory": "256Mi"},
    }
    assert all("/h" in s["annotationKey"] for s in pod["selected"])


def test_blocked_example_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    pods = by_name(run_json(capsys, EXAMPLES / "blocked"))
    ingest = pods["ingest-55d7c-aaaaa"]
    assert (ingest["outcome"], ingest["reason"], ingest["method"]) == (
        "blocked",
        "LowConfidence",
        None,
    )
    assert ingest["containers"]["ingest"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert pods["warehouse-0"]["reason"] == "LearningPeriod"


def test_bad_row_warning_names_the_row(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "-f", str(EXAMPLES / "blocked"), "--now", NOW]) == 0
    err = capsys.readouterr().err
    assert "recommendations[2] (analytics/Deployment/broken/x) skipped" in err


def test_text_form_has_table_and_outcome(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "-f", str(EXAMPLES / "storefront"), "--now", NOW, "-o", "text"]) == 0
    out = capsys.readouterr().out
    assert "TARGET" in out and "ANNOTATION KEY" in out
    assert "app.requests.cpu     250m   StaticPolicy shop/web-static" in out
    assert "outcome: apply  method: inPlace" in out


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("kind: [unclosed\n", "invalid YAML"),
        ("apiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n", "unknown kind 'Gadget'"),
        (
            "apiVersion: rightsizing.kubex.ai/v1alpha1\nkind: StaticPolicy\n"
            "metadata: {name: p, namespace: shop}\nspec: {resources: {containers: {app: {}}}}\n",
            "StaticPolicy shop/p: spec.automationStrategyRef: Field required",
        ),
        ("- just\n- a list\n", "not a Kubernetes object"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: x}\n"
            "spec: {containers: [{name: a, resources: {requests: {cpu: lots}}}]}\n",
            "Pod x/p: spec.containers[0].resources.requests.cpu: invalid quantity 'lots'",
        ),
    ],
)
def test_user_errors_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    assert main(["explain", "-f", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert str(bad) in err and expected in err


def test_missing_path_is_a_user_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "-f", str(tmp_path / "nope")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_console_script_runs_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "kerf", "explain", "-f", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "unknown kind" in proc.stderr


ROLLBACK_YAML = """
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web}
  annotations:
    rightsizing.kubex.ai/rollback-state: >-
      {"mode": "backingOff", "turn": 2, "startedAt": "2026-11-29T11:58:00Z",
      "expiryAt": "2026-11-29T12:02:00Z", "activeRecommendationFingerprint": "abc",
      "failureReason": "oomKilled", "failureMessage": "web-1: container app OOM-killed 1 time(s)"}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx
        resources: {requests: {cpu: 400m, memory: 512Mi}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: calm, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: calm}}
  template:
    metadata: {labels: {app: calm}}
    spec:
      containers:
      - {name: app, image: nginx}
---
apiVersion: rightsizing.kubex.ai/v1alpha1
kind: RollbackPolicy
metadata: {name: rb, namespace: shop, creationTimestamp: "2026-11-01T00:00:00Z"}
spec:
  scope: {labelSelector: {matchLabels: {app: web}}}
  monitoringPeriod: 5m
  rollbackTarget: manifest
  adoptionThresholdPercent: 80
  backoff: {timePeriod: 1m, multiplyByTurn: 2, maxAttempts: 3}
"""


def test_explain_shows_a_workloads_rollback_state_and_next_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rollback.yaml"
    path.write_text(ROLLBACK_YAML)
    result = run_json(capsys, path)
    assert result["workloads"] == [
        {
            "kind": "Deployment",
            "namespace": "shop",
            "name": "web",
            "rollback": {
                "policy": {"kind": "RollbackPolicy", "namespace": "shop", "name": "rb"},
                "mode": "backingOff",
                "turn": 2,
                "maxAttempts": 3,
                "activeRecommendationFingerprint": "abc",
                "failureReason": "oomKilled",
                "failureMessage": "web-1: container app OOM-killed 1 time(s)",
                "nextStep": "retry the recommendation (turn 3)",
                "nextStepAt": "2026-11-29T12:02:00Z",
            },
        }
    ]
    assert main(["explain", "-f", str(path), "--now", NOW, "-o", "text"]) == 0
    text = capsys.readouterr().out
    assert "Deployment shop/web  (rollback)" in text
    assert "state: backingOff  turn 2/3" in text
    assert "failure: oomKilled: web-1: container app OOM-killed 1 time(s)" in text
    assert "next: retry the recommendation (turn 3) at 2026-11-29T12:02:00Z" in text
    assert "calm" not in text
