"""`kerf recommend` against a real Prometheus holding a generated history (backfilled with
promtool): the rows are what the series imply, the bad-data cases give reasons and no row,
and kerf's own decisions read the rows with the unchanged guardrails."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from app.model.recommendations import DATA_KEY, SOURCE_LABEL, parse_rows
from tests.recommender.history import openmetrics
from tests.recommender.prometheus import backfill, free_port, needs_prometheus, running_prometheus
from tests.recommender.scene import NAMESPACE, scene, stamp

pytestmark = needs_prometheus
KERF = str(Path(sys.executable).parent / "kerf")
#: The history is scraped every 5 minutes; the rate needs three scrapes.
FLAGS = ["--rate-window", "15m", "--learning-period", "48h"]


def recommend(state: Path, url: str, end: float, *extra: str) -> subprocess.CompletedProcess[str]:
    """`kerf recommend --state-dir` once, as JSON."""
    return subprocess.run(
        [
            KERF,
            "recommend",
            "--prometheus",
            url,
            "--state-dir",
            str(state),
            "--now",
            stamp(end),
            "-o",
            "json",
            *FLAGS,
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


class History:
    """The scene's objects in a state dir, its history in a running Prometheus."""

    def __init__(self, root: Path, url: str, end: float) -> None:
        self.root, self.url, self.end = root, url, end
        self.state = root / "state"

    def run(self, *extra: str) -> dict[str, Any]:
        result = recommend(self.state, self.url, self.end, *extra)
        assert result.returncode == 0, result.stderr
        return orjson.loads(result.stdout)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    root = tmp_path_factory.mktemp("history")
    # An hour back, on the hour: the history ends before Prometheus's own head block.
    end = (time.time() // 3600) * 3600 - 3600
    generated = scene(end)
    (root / "state").mkdir()
    (root / "state" / "cluster.yaml").write_text(yaml.safe_dump_all(generated.objects))
    backfill(openmetrics(generated.replicas), root / "tsdb")
    with running_prometheus(root / "tsdb") as url:
        yield History(root, url, end)


@pytest.fixture(scope="module")
def answer(history: History) -> dict[str, Any]:
    return history.run()


def rows_of(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["ownerName"]: r for r in answer["recommendations"]}


def skipped_of(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["ownerName"]: s for s in answer["skipped"]}


def test_rows_are_what_the_series_imply(answer: dict[str, Any]) -> None:
    rows = rows_of(answer)
    # Constant 0.2 cores and 300Mi: p95 200m; 300Mi + 15 % = 345Mi; the template's
    # limit/request ratio (2) gives the limits.
    assert rows["steady"]["requests"] == {"cpu": "200m", "memory": "345Mi"}
    assert rows["steady"]["limits"] == {"cpu": "400m", "memory": "690Mi"}
    # Two hours a day at 0.5 cores is more than 5 % of the time: the p95 is the peak.
    assert rows["peaky"]["requests"]["cpu"] == "500m"
    # Three days of history, every replica counted (the one gone after a day too).
    assert rows["steady"]["coverageHours"] == 72
    assert rows["peaky"]["coverageHours"] == 72
    assert rows["steady"]["samples"] > 2 * rows["peaky"]["samples"]
    assert rows["young"]["coverageHours"] == 24
    # The rows are valid rows of the source format.
    parsed, warnings = parse_rows(orjson.dumps({"recommendations": answer["recommendations"]}), "t")
    assert warnings == [] and len(parsed) == len(answer["recommendations"])


def test_an_oom_killed_container_is_bumped_past_its_limit(answer: dict[str, Any]) -> None:
    # Working set 250Mi (+15 %: 288Mi), killed at a 256Mi limit: at least 1.2 × 256Mi.
    oomer = rows_of(answer)["oomer"]
    assert oomer["requests"]["memory"] == "308Mi"
    assert oomer["limits"] == {"memory": "308Mi"}


def test_a_throttled_container_keeps_its_cpu_request(answer: dict[str, Any]) -> None:
    # It uses 100m, but 40 % of its periods were throttled: the 500m request stays.
    db = rows_of(answer)["db"]
    assert db["requests"] == {"cpu": "500m", "memory": "115Mi"}
    assert db["cpuThrottlingRatio"] == pytest.approx(0.4, abs=0.01)


def test_a_spiky_workload_is_less_confident_than_a_steady_one(answer: dict[str, Any]) -> None:
    rows = rows_of(answer)
    assert rows["steady"]["confidence"] >= 0.9
    assert rows["spiky"]["confidence"] < rows["steady"]["confidence"] - 0.2
    assert rows["young"]["confidence"] < rows["steady"]["confidence"]


def test_bad_data_gives_a_reason_and_no_row(answer: dict[str, Any]) -> None:
    rows, skipped = rows_of(answer), skipped_of(answer)
    expected = {
        "gappy": "DataGap",
        "nan": "NotANumber",
        "ghost": "NoSeries",
        "partial": "PartialAnswer",
    }
    assert {name: skipped[name]["reason"] for name in expected} == expected
    assert not set(expected) & set(rows)
    assert "partial-4d6e2-bbbbb" in skipped["partial"]["message"]


def test_an_unreachable_prometheus_gives_every_workload_the_reason(history: History) -> None:
    result = recommend(history.state, f"http://127.0.0.1:{free_port()}", history.end)
    assert result.returncode == 1
    assert result.stderr.startswith("kerf recommend: PrometheusUnreachable: ")
    assert "Traceback" not in result.stderr
    answer = orjson.loads(result.stdout)
    assert answer["recommendations"] == []
    assert {s["reason"] for s in answer["skipped"]} == {"PrometheusUnreachable"}
    assert len(answer["skipped"]) == len(skipped_of(answer)) == 10


def test_a_refused_query_is_one_line(history: History) -> None:
    result = recommend(history.state, history.url, history.end, "--cpu-query", "rate(")
    assert result.returncode == 1
    assert "QueryFailed: Prometheus refused the cpu query: bad_data" in result.stderr
    assert "Traceback" not in result.stderr


def test_kerf_decides_on_the_rows_with_the_unchanged_guardrails(
    history: History, answer: dict[str, Any], tmp_path: Path
) -> None:
    """The young workload is blocked by the default learningPeriod (168h); a policy that
    asks for 48h of data lets the steady one through, so the block is the guardrail's."""
    source = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kerf-recommendations",
            "namespace": NAMESPACE,
            "labels": {SOURCE_LABEL: "true"},
        },
        "data": {DATA_KEY: orjson.dumps({"recommendations": answer["recommendations"]}).decode()},
    }
    strategy = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "AutomationStrategy",
        "metadata": {"name": "default", "namespace": NAMESPACE},
        "spec": {},
    }

    def policy(name: str, app: str, guardrails: dict[str, Any] | None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "automationStrategyRef": {"name": "default"},
            "scope": {"labelSelector": {"matchLabels": {"app": app}}},
        }
        if guardrails:
            spec["guardrails"] = guardrails
        return {
            "apiVersion": "rightsizing.kubex.ai/v1alpha1",
            "kind": "ProactivePolicy",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec,
        }

    documents = [
        source,
        strategy,
        policy("young", "young", None),
        policy("steady", "steady", {"learningPeriod": "48h"}),
    ]
    (tmp_path / "kerf.yaml").write_text(yaml.safe_dump_all(documents))
    result = subprocess.run(
        [
            KERF,
            "explain",
            "-f",
            str(history.state),
            "-f",
            str(tmp_path),
            "--for",
            "running",
            "--now",
            stamp(history.end),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    pods = {p["owner"]["name"]: p for p in orjson.loads(result.stdout)["pods"]}
    assert pods["young"]["reason"] == "LearningPeriod"
    assert pods["steady"]["outcome"] == "apply", pods["steady"]
    assert pods["steady"]["containers"]["app"]["requests"]["memory"] == "345Mi"


def _proactive(name: str, apps: list[str], weight: int, block: dict[str, Any] | None) -> Any:
    spec: dict[str, Any] = {
        "automationStrategyRef": {"name": "default"},
        "scope": {
            "labelSelector": {
                "matchExpressions": [{"key": "app", "operator": "In", "values": apps}]
            }
        },
        "weight": weight,
    }
    if block is not None:
        spec["recommender"] = block
    return {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "ProactivePolicy",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def test_a_policys_recommender_block_overrides_the_flags_for_its_workloads(
    history: History, answer: dict[str, Any], tmp_path: Path
) -> None:
    """Each field of the block replaces its flag for the workloads the policy covers; a
    higher-weight policy without a block does not hide it; other workloads keep the flags."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "cluster.yaml").write_text((history.state / "cluster.yaml").read_text())
    policies = [
        _proactive(
            "tuned",
            ["steady", "peaky", "oomer", "young"],
            1,
            {
                "cpuPercentile": 50,
                "memoryHeadroomPercent": 50,
                "oomBumpFactor": 2,
                "limits": "keep",
                "learningPeriod": "24h",
            },
        ),
        _proactive("plain", ["steady"], 5, None),
    ]
    (state / "policies.yaml").write_text(yaml.safe_dump_all(policies))
    result = recommend(state, history.url, history.end)
    assert result.returncode == 0, result.stderr
    tuned, flags = rows_of(orjson.loads(result.stdout)), rows_of(answer)

    # 300Mi + 50 %; `keep` writes no limits.
    assert tuned["steady"]["requests"] == {"cpu": "200m", "memory": "450Mi"}
    assert "limits" not in tuned["steady"]
    # The p50 of a usage at 0.1 cores for 22 hours a day.
    assert tuned["peaky"]["requests"]["cpu"] == "100m"
    # Killed at 256Mi: at least 2 × 256Mi.
    assert tuned["oomer"]["requests"]["memory"] == "512Mi"
    # A day of data is all the 24h learning period asks for.
    assert tuned["young"]["confidence"] > flags["young"]["confidence"]
    # Not covered by the policy: the flags' rows.
    assert tuned["db"] == flags["db"]
    assert tuned["spiky"] == flags["spiky"]
