"""`kerf recommend` over a real Prometheus scraping the backend's cAdvisor-style metrics:
kubesim's `/metrics/cadvisor`, or on the real control plane the node agent's endpoint.
Both render the pods' `kubesim.kerf.dev/usage` annotation, so the rows are the usage
model's numbers on either backend. Skipped when Prometheus is not installed."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.recommendations import rows_from_configmap
from app.recommender_rows import CONFIGMAP_NAME
from harness.services import KERF, Kerf
from harness.wait import wait_until
from kubesim.usage import USAGE
from tests.e2e.scenario import Namespace
from tests.recommender.prometheus import needs_prometheus, running_prometheus

pytestmark = [pytest.mark.e2e, needs_prometheus]
#: Seconds of scraped history the run analyses (Prometheus scrapes every second).
SCRAPES = 8
NAMESPACE = "e2e-recommend"


def _deployment(usage: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {
                    "labels": {"app": "web"},
                    "annotations": {USAGE: json.dumps({"app": usage})},
                },
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "shop/web:1",
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "512Mi"},
                                # A CPU limit below the usage: throttled in the share
                                # (800m - 500m) / 800m of its CFS periods.
                                "limits": {"cpu": "500m", "memory": "1Gi"},
                            },
                        }
                    ]
                },
            },
        },
    }


def _query(url: str, promql: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    ) as answer:
        return list(json.load(answer)["data"]["result"])


def _scraped(url: str) -> bool:
    """Both replicas have at least SCRAPES points of working set."""
    found = _query(
        url, f'count_over_time(container_memory_working_set_bytes{{namespace="{NAMESPACE}"}}[1m])'
    )
    return len(found) == 2 and all(float(s["value"][1]) >= SCRAPES for s in found)


def _recommend(kerf: Kerf, url: str, now: datetime) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            KERF,
            "recommend",
            "--kubeconfig",
            str(kerf.backend.kubeconfig),
            "--prometheus",
            url,
            "--once",
            "-o",
            "json",
            "--now",
            now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "--window",
            f"{SCRAPES}s",
            "--step",
            "1s",
            "--rate-window",
            "3s",
            "--max-gap",
            "4s",
            "--learning-period",
            f"{SCRAPES}s",
            "--full-samples",
            "10",
            "--log-level",
            "warning",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_prometheus_scrapes_the_nodes_and_recommend_follows_the_usage_model(
    kerf: Kerf, tmp_path: Any
) -> None:
    kerf.kubectl("create", "namespace", NAMESPACE)
    ns = Namespace(kerf, NAMESPACE)
    ns.apply(_deployment({"cpu": "800m", "memory": "200Mi"}))
    ns.running("web", 2)
    with running_prometheus(tmp_path / "tsdb", scrape=[kerf.backend.cadvisor]) as url:
        wait_until(lambda: _scraped(url), "two replicas scraped")
        # A window that ended a second ago: its points are all stored.
        now = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
        run = _recommend(kerf, url, now)
    assert run.returncode == 0, run.stderr
    rows = [r for r in json.loads(run.stdout)["recommendations"] if r["namespace"] == NAMESPACE]
    stored = ns.get("configmap", CONFIGMAP_NAME)

    [row] = rows
    assert (row["ownerKind"], row["ownerName"], row["container"]) == ("Deployment", "web", "app")
    # The CPU it gets is its limit, 500m of the 800m it wants, as the counter's rate.
    assert 490 <= int(row["requests"]["cpu"].removesuffix("m")) <= 510
    assert abs(row["cpuThrottlingRatio"] - 0.375) < 0.01
    # 200Mi of working set + 15 %; the limit keeps the template's 2 × the request.
    assert row["requests"]["memory"] == "230Mi"
    assert row["limits"]["memory"] == "460Mi"
    assert row["samples"] >= 2 * (SCRAPES - 3)
    parsed, warnings = rows_from_configmap({"kind": "ConfigMap", **stored})
    assert warnings == [] and [r.requests for r in parsed] == [row["requests"]]
