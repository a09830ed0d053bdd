"""`kerf explain` end to end: the CLI on the bundled examples, its JSON contract, and
user errors that exit non-zero with one line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from kubernetes_asyncio import client

from kerf.cli import main
from kubesim.testing import running_sim
from tests.cluster import deployment as cluster_deployment
from tests.cluster import eventually, install_shop
from tests.webhook.test_manifests import kubectl

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
        (
            "apiVersion: rightsizing.kubex.ai/v1alpha1\nkind: Gadget\nmetadata: {name: g}\n",
            "unknown kind 'Gadget'",
        ),
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
    bad.write_text("apiVersion: rightsizing.kubex.ai/v1alpha1\nkind: Gadget\nmetadata: {name: g}\n")
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


UNREAD = """
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: shop}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: api, namespace: shop}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: shop}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: shop}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: shop}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
"""

KUSTOMIZATION = """
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [cluster.yaml, policies.yaml, workloads.yaml, app.yaml]
"""


def app_directory(tmp_path: Path) -> Path:
    """The storefront as an application's directory: its files, an Ingress, a Role, … and
    a kustomization.yaml listing them."""
    directory = tmp_path / "app"
    directory.mkdir()
    for path in (EXAMPLES / "storefront").glob("*.yaml"):
        (directory / path.name).write_text(path.read_text())
    (directory / "app.yaml").write_text(UNREAD)
    (directory / "kustomization.yaml").write_text(KUSTOMIZATION)
    return directory


def kerf(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kerf", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=120,
    )


def test_a_directory_with_kinds_kerf_does_not_read_is_explained_with_one_summary_line(
    tmp_path: Path,
) -> None:
    done = kerf("explain", "-f", str(app_directory(tmp_path)), "--now", NOW)
    assert done.returncode == 0, done.stderr
    expected = kerf("explain", "-f", str(EXAMPLES / "storefront"), "--now", NOW)
    assert orjson.loads(done.stdout) == orjson.loads(expected.stdout)
    assert done.stderr.splitlines() == [
        "warning: skipped 7 documents of kinds kerf does not read: Ingress 2, "
        "Kustomization 1, NetworkPolicy 1, PersistentVolumeClaim 1, Role 1, Service 1 "
        "(for a Kustomization's output: kubectl kustomize DIR | kerf explain -f -)"
    ]


def test_a_kustomizations_output_on_stdin_is_explained_as_its_files(tmp_path: Path) -> None:
    rendered = subprocess.run(
        [kubectl(), "kustomize", str(app_directory(tmp_path))],  # required, as for the manifests
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    done = kerf("explain", "-f", "-", "--now", NOW, stdin=rendered)
    assert done.returncode == 0, done.stderr
    expected = kerf("explain", "-f", str(EXAMPLES / "storefront"), "--now", NOW)
    assert orjson.loads(done.stdout) == orjson.loads(expected.stdout)
    assert done.stderr.splitlines() == [
        "warning: skipped 6 documents of kinds kerf does not read: Ingress 2, "
        "NetworkPolicy 1, PersistentVolumeClaim 1, Role 1, Service 1"
    ]


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        ((), {"web-7d4b9-abcde", "web-7d4b9-new01", "api-5f6c7-xyz12"}),
        (("-n", "shop"), {"web-7d4b9-abcde", "web-7d4b9-new01", "api-5f6c7-xyz12"}),
        (("web",), {"web-7d4b9-abcde", "web-7d4b9-new01"}),
        (("-n", "shop", "deployment/api"), {"api-5f6c7-xyz12"}),
        (("deploy/api",), {"api-5f6c7-xyz12"}),
    ],
)
def test_a_namespace_or_a_workload_narrows_what_is_explained(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], names: set[str]
) -> None:
    result = run_json(capsys, EXAMPLES / "storefront", extra=argv)
    assert {pod["name"] for pod in result["pods"]} == names


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("-n", "blog"), "no namespace blog (and no pods in it)"),
        (("shop/web/x",), "workload kind 'shop/web' is not one kerf sizes"),
        (("statefulset/web",), "no workload StatefulSet/web in any namespace"),
        (("-n", "blog", "web"), "no workload web in namespace blog"),
        (("widget/web",), "workload kind 'widget' is not one kerf sizes"),
        (("deployment/",), "expected NAME or KIND/NAME"),
    ],
)
def test_a_selection_that_selects_nothing_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], expected: str
) -> None:
    assert main(["explain", "-f", str(EXAMPLES / "storefront"), "--now", NOW, *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err, err


async def test_a_live_cluster_is_explained_read_only_as_its_files_would_be(tmp_path: Path) -> None:
    """`kerf explain --kubeconfig` lists kubesim once over real HTTP, decides through the
    same code and writes nothing: the store's resourceVersion does not move."""
    async with running_sim(tmp_path) as sim, sim.api_client() as api:
        await install_shop(sim, api)
        apps = client.AppsV1Api(api)
        await apps.create_namespaced_deployment("shop", cluster_deployment("web", "shop", 2))
        await apps.create_namespaced_deployment("shop", cluster_deployment("api", "shop", 1))
        await eventually(
            lambda: (
                len(
                    [
                        p
                        for p in sim.store.iter(("", "pods"), "shop")
                        if (p.get("status") or {}).get("phase") == "Running"
                    ]
                )
                == 3
            ),
            "three running pods",
        )
        before = sim.store.resource_version
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kerf",
            "explain",
            "--kubeconfig",
            str(sim.kubeconfig_path),
            "-n",
            "shop",
            "deployment/web",
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 0, err.decode()
        assert sim.store.resource_version == before
    pods = orjson.loads(out)["pods"]
    assert len(pods) == 2
    for decision in pods:
        assert decision["owner"] == {"kind": "Deployment", "name": "web"}
        # The pods run the manifest's 100m/128Mi; the StaticPolicy asks 250m/256Mi.
        assert (decision["outcome"], decision["method"]) == ("apply", "inPlace")
        assert decision["containers"]["app"]["requests"] == {"cpu": "250m", "memory": "256Mi"}


def test_an_empty_standard_input_is_one_line_and_exit_2() -> None:
    done = kerf("explain", "-f", "-", stdin="")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "kerf explain: <stdin>: no documents on standard input (did the command before the "
        "pipe fail?)"
    ]
