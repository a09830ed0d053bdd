"""`kerf recommend` over a real Prometheus scraping the backend's cAdvisor metrics:
kubesim's `/metrics/cadvisor`, the node agent's endpoint, or a real kubelet's cAdvisor
(through the API server's node proxy). kubesim and the agent render the pods'
`kubesim.kerf.dev/usage` annotation, so the rows are the usage model's numbers; on a real
kubelet kerf-load uses what the annotation says (harness/loadimage.py `runnable`), so the
rows are what the kernel measured and throttled, within bounds. Skipped when Prometheus is
not installed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.model.recommendations import rows_from_configmap
from app.recommend.rows import CONFIGMAP_NAME
from harness.services import Kerf
from harness.wait import wait_until
from tests.e2e.recommending import SCRAPES, recommend_once, scraped, tls_files, usage_deployment
from tests.e2e.scenario import Namespace
from tests.recommender.prometheus import needs_prometheus, running_prometheus

pytestmark = [pytest.mark.e2e, needs_prometheus]
NAMESPACE = "e2e-recommend"
#: A real kubelet's cAdvisor refreshes a container's figures every 2 s on devcluster
#: (housekeeping), and its series carry that time: the analysis spans 20 s of them.
REAL_HISTORY = ("--window", "20s", "--step", "2s", "--rate-window", "6s", "--max-gap", "6s")
REAL_HISTORY += ("--learning-period", "20s")
#: Points of 2 s that cover REAL_HISTORY's window.
REAL_POINTS = 11


def test_prometheus_scrapes_the_nodes_and_recommend_follows_the_usage(
    kerf: Kerf, tmp_path: Path
) -> None:
    real = kerf.backend.real_kubelet
    kerf.kubectl("create", "namespace", NAMESPACE)
    ns = Namespace(kerf, NAMESPACE)
    ns.apply(usage_deployment({"cpu": "800m", "memory": "200Mi"}))
    ns.running("web", 2)
    tls = tls_files(kerf.backend.kubeconfig, tmp_path) if real else None
    with running_prometheus(tmp_path / "tsdb", scrape=[kerf.backend.cadvisor], tls=tls) as url:
        points = REAL_POINTS if real else SCRAPES
        wait_until(lambda: scraped(url, NAMESPACE, points), "two replicas scraped")
        # A window that ended a second ago: its points are all stored.
        now = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
        run = recommend_once(kerf.backend.kubeconfig, url, now, *(REAL_HISTORY if real else ()))
    assert run.returncode == 0, run.stderr
    rows = [r for r in json.loads(run.stdout)["recommendations"] if r["namespace"] == NAMESPACE]
    stored = ns.get("configmap", CONFIGMAP_NAME)

    [row] = rows
    assert (row["ownerKind"], row["ownerName"], row["container"]) == ("Deployment", "web", "app")
    cpu_m = int(row["requests"]["cpu"].removesuffix("m"))
    memory_mi = int(row["requests"]["memory"].removesuffix("Mi"))
    if real:
        print(f"\nreal recommendation for 800m under a 500m limit, 200Mi: {row}")
        # The CPU it gets is its limit, 500m of the 800m it wants (the kernel's CFS quota);
        # a busy machine may give it a little less.
        assert 400 <= cpu_m <= 525, row
        # The kernel throttles it in more of its periods than the model's share,
        # (800m - 500m) / 800m = 0.375 (0.65 in a run on 2 cores).
        assert row["cpuThrottlingRatio"] >= 0.375, row
        # 200Mi of working set and kerf-load's own few MiB, + 15 %.
        assert 230 <= memory_mi <= 1.15 * 230, row
        assert row["samples"] >= 2 * 8, row
    else:
        # The CPU it gets is its limit, 500m of the 800m it wants, as the counter's rate.
        assert 490 <= cpu_m <= 510
        assert abs(row["cpuThrottlingRatio"] - 0.375) < 0.01
        # 200Mi of working set + 15 %.
        assert memory_mi == 230
        assert row["samples"] >= 2 * (SCRAPES - 3)
    # The limit keeps the template's 8 × the request.
    assert row["limits"]["memory"] == f"{8 * memory_mi}Mi"
    parsed, warnings = rows_from_configmap({"kind": "ConfigMap", **stored})
    assert warnings == [] and [r.requests for r in parsed] == [row["requests"]]
