"""The recommender's ConfigMap writes pass the leader fence (issue 18): a replica that
does not hold the Lease sends none of them, counts each one withheld, and its run ends."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.kube.leader import LeaderElector, NotLeading, write_fence
from app.kube.transport import ApiTransport
from app.model.owners import WorkloadRef
from app.recommend.rows import CONFIGMAP_NAME, row
from app.recommend.rules import ContainerResult
from kubesim.testing import running_sim
from recommender.analyze import Analysis, Outcome
from recommender.configmaps import store
from recommender.metrics import recommender_metrics

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
REF = WorkloadRef("Deployment", "shop", "web")
RESULT = ContainerResult("app", {"cpu": "200m", "memory": "345Mi"}, {}, 48.0, 576, 0.9, 0.0)


async def test_a_follower_sends_no_configmap_write(tmp_path: Path) -> None:
    async with running_sim(tmp_path) as sim, sim.api_client() as api:
        await sim.add_namespace("shop")
        sim.http.requests.enable()
        metrics = recommender_metrics()
        # An elector that has not won the Lease (it never ran) does not lead.
        follower = LeaderElector(ApiTransport(api), "kerf-system", "b", name="kerf-recommender")
        analysis = Analysis(NOW, [Outcome(REF, rows=[row(REF, RESULT, NOW)], confidence=0.9)])
        with pytest.raises(NotLeading):
            await store(
                api, analysis, metrics, fence=write_fence(follower, metrics.writes_withheld)
            )
        assert sim.store.get(("", "configmaps"), "shop", CONFIGMAP_NAME) is None
        assert [w for w in sim.http.requests.writes if w.resource == "configmaps"] == []
        withheld = {"resource": "configmaps", "bucket": ""}
        sample = metrics.registry.get_sample_value(
            "kerf_recommender_writes_withheld_total", withheld
        )
        assert sample == 1

        # Without a fence (a single run) the same write is sent.
        assert await store(api, analysis, metrics) == {"shop": "created"}
