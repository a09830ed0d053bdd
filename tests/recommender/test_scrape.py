"""End to end on kubesim: a real Prometheus scrapes kubesim's cAdvisor-style metrics (from
the pods' usage annotations), and `kerf recommend --kubeconfig` writes the rows into the
namespace's labelled ConfigMap, which kerf's view then reads."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from kubernetes_asyncio import client

from app.model.recommendations import DATA_KEY, SOURCE_LABEL, rows_from_configmap
from app.recommend.rows import CONFIGMAP_NAME
from kubesim.clock import Clock
from kubesim.testing import running_sim
from kubesim.usage import USAGE
from tests.e2e.recommending import SCRAPES, recommend_once, scraped
from tests.recommender.prometheus import needs_prometheus, running_prometheus, wait_until

pytestmark = needs_prometheus
#: Seconds of scraped history the run analyses (Prometheus scrapes every second).


def deployment(name: str, usage: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": name}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {USAGE: json.dumps({"app": usage})},
                },
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "shop/web:1",
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "512Mi"},
                                "limits": {"cpu": "1", "memory": "1Gi"},
                            },
                        }
                    ]
                },
            },
        },
    }


async def test_prometheus_scrapes_kubesim_and_the_rows_reach_the_configmap(tmp_path: Path) -> None:
    async with running_sim(tmp_path, clock=Clock()) as sim:
        await sim.add_namespace("shop")
        await sim.add_node("node-a", cpu="8", memory="16Gi")
        async with sim.api_client() as api:
            apps = client.AppsV1Api(api)
            await apps.create_namespaced_deployment(
                "shop", deployment("web", {"cpu": "300m", "memory": "200Mi"})
            )
            await sim.settle()
            target = sim.url.removeprefix("http://") + "/metrics/cadvisor"
            with running_prometheus(tmp_path / "tsdb", scrape=[target]) as url:
                await asyncio.to_thread(
                    wait_until, lambda: scraped(url, "shop"), "two replicas scraped"
                )
                # A window that ended a second ago: its points are all stored, so two runs
                # over it see the same data.
                now = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
                dry = await asyncio.to_thread(
                    recommend_once, sim.kubeconfig_path, url, now, "--dry-run"
                )
                assert dry.returncode == 0, dry.stderr
                core = client.CoreV1Api(api)
                listed = await core.list_namespaced_config_map("shop")
                assert [c.metadata.name for c in listed.items] == [], "a dry run writes nothing"

                first = await asyncio.to_thread(recommend_once, sim.kubeconfig_path, url, now)
                assert first.returncode == 0, first.stderr
                [row] = orjson.loads(first.stdout)["recommendations"]
                stored = await core.read_namespaced_config_map(CONFIGMAP_NAME, "shop")
                second = await asyncio.to_thread(recommend_once, sim.kubeconfig_path, url, now)
                assert second.returncode == 0, second.stderr
                again = await core.read_namespaced_config_map(CONFIGMAP_NAME, "shop")

    # 300m of CPU as a rate of the counter kubesim reports; 200Mi + 15 %.
    assert row["ownerName"] == "web" and row["container"] == "app"
    assert 290 <= int(row["requests"]["cpu"].removesuffix("m")) <= 310
    assert row["requests"]["memory"] == "230Mi"
    assert row["samples"] >= 2 * (SCRAPES - 3)
    assert stored.metadata.labels[SOURCE_LABEL] == "true"
    rows, warnings = rows_from_configmap(
        {
            "kind": "ConfigMap",
            "metadata": {"namespace": "shop", "name": CONFIGMAP_NAME},
            "data": stored.data,
        }
    )
    assert warnings == [] and [r.requests for r in rows] == [row["requests"]]
    # The same data again: nothing to write.
    assert again.metadata.resource_version == stored.metadata.resource_version
    assert again.data[DATA_KEY] == stored.data[DATA_KEY]
