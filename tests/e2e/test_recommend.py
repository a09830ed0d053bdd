"""`kerf recommend` over a real Prometheus scraping the backend's cAdvisor-style metrics:
kubesim's `/metrics/cadvisor`, or on the real control plane the node agent's endpoint.
Both render the pods' `kubesim.kerf.dev/usage` annotation, so the rows are the usage
model's numbers on either backend. Skipped when Prometheus is not installed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.recommendations import rows_from_configmap
from app.recommender_rows import CONFIGMAP_NAME
from harness.services import Kerf
from harness.wait import wait_until
from tests.e2e.recommending import SCRAPES, recommend_once, scraped, usage_deployment
from tests.e2e.scenario import Namespace
from tests.recommender.prometheus import needs_prometheus, running_prometheus

pytestmark = [pytest.mark.e2e, needs_prometheus]
NAMESPACE = "e2e-recommend"


def test_prometheus_scrapes_the_nodes_and_recommend_follows_the_usage_model(
    kerf: Kerf, tmp_path: Path
) -> None:
    kerf.kubectl("create", "namespace", NAMESPACE)
    ns = Namespace(kerf, NAMESPACE)
    ns.apply(usage_deployment({"cpu": "800m", "memory": "200Mi"}))
    ns.running("web", 2)
    with running_prometheus(tmp_path / "tsdb", scrape=[kerf.backend.cadvisor]) as url:
        wait_until(lambda: scraped(url, NAMESPACE), "two replicas scraped")
        # A window that ended a second ago: its points are all stored.
        now = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
        run = recommend_once(kerf.backend.kubeconfig, url, now)
    assert run.returncode == 0, run.stderr
    rows = [r for r in json.loads(run.stdout)["recommendations"] if r["namespace"] == NAMESPACE]
    stored = ns.get("configmap", CONFIGMAP_NAME)

    [row] = rows
    assert (row["ownerKind"], row["ownerName"], row["container"]) == ("Deployment", "web", "app")
    # The CPU it gets is its limit, 500m of the 800m it wants, as the counter's rate.
    assert 490 <= int(row["requests"]["cpu"].removesuffix("m")) <= 510
    assert abs(row["cpuThrottlingRatio"] - 0.375) < 0.01
    # 200Mi of working set + 15 %; the limit keeps the template's 8 × the request.
    assert row["requests"]["memory"] == "230Mi"
    assert row["limits"]["memory"] == "1840Mi"
    assert row["samples"] >= 2 * (SCRAPES - 3)
    parsed, warnings = rows_from_configmap({"kind": "ConfigMap", **stored})
    assert warnings == [] and [r.requests for r in parsed] == [row["requests"]]
