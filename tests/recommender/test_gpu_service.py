"""The recommender's GPU reactive evaluation (recommender/gpu.py) against kubesim's API
server and a real Prometheus backfilled with promtool: it reads the policy's series, keeps
the baseline and the driving metric in the workload's RightsizingRecommendation status and
writes the GPU row where the selection reads it; bad input is a reason and one log line,
and changes nothing."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from kubernetes_asyncio import client

from app.store.view import ClusterView
from kubesim.sim import Simulator
from kubesim.testing import running_sim
from recommender.gpu import GpuReactor
from recommender.metrics import recommender_metrics
from tests.cluster import GROUP, VERSION, custom, install_crds, running_feed
from tests.recommender.prometheus import backfill, free_port, needs_prometheus, running_prometheus

pytestmark = needs_prometheus

NS = "ml"
REQUESTS = "gpureactive.rightsizing.kubex.ai/desired-resource-requests"
LIMITS = "gpureactive.rightsizing.kubex.ai/desired-resource-limits"
COMPUTE = "kubex_gpu_container_sm_utilization_percent"
MEMORY = "kubex_gpu_container_memory_footprint_percent"


def policy(max_percent: int, **labels: str) -> dict[str, Any]:
    """Kubex's documented GpuReactivePolicy for Deployment `train`, with pods counted at
    once (their history is written before they start, in this test)."""
    prometheus = {
        "namespaceLabel": "namespace",
        "podLabel": labels.get("pod", "pod"),
        "containerLabel": "container",
    }
    signal = {
        "upsize": {
            "thresholdPercent": 125,
            "metricsWindow": "10m",
            "headroomPercent": 20,
            "maxPercent": max_percent,
        },
        "scaleBack": {"thresholdPercent": 60, "metricsWindow": "10m", "headroomPercent": 20},
    }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GpuReactivePolicy",
        "metadata": {"name": "gpu", "namespace": NS},
        "spec": {
            "experimental": {"gpuKaiContract": "v1alpha1-2026-07"},
            "scope": {"labelSelector": {"matchLabels": {"app": "train"}}},
            "minPodMetricsAge": "0s",
            "automationStrategyRef": {"name": "gpu"},
            "metrics": {
                "compute": {**signal, "prometheus": {**prometheus, "metric": COMPUTE}},
                "memory": {
                    **signal,
                    "prometheus": {
                        **prometheus,
                        "metric": MEMORY,
                        "interpretation": "currentAllocation",
                    },
                },
            },
        },
    }


def train(kai: bool = False) -> dict[str, Any]:
    labels = {"app": "train"}
    gpu = {} if kai else {"nvidia.com/gpu": "1"}
    template_meta: dict[str, Any] = {"labels": labels}
    if kai:
        # KAI's share of a GPU is the pod's annotation; its queue a label
        template_meta = {
            "labels": {**labels, "kai.scheduler/queue": "team-a"},
            "annotations": {"gpu-fraction": "0.3"},
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "train", "namespace": NS, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": template_meta,
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "ml/train:1",
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "128Mi", **gpu},
                                "limits": gpu or {"memory": "128Mi"},
                            },
                        }
                    ]
                },
            },
        },
    }


def history(pod: str, compute: float, memory: float, end: float) -> str:
    """Twenty minutes of both series for the pod's container `app`, one point each 15 s."""
    lines: dict[str, list[str]] = {COMPUTE: [], MEMORY: []}
    labels = f'namespace="{NS}",pod="{pod}",container="app"'
    t = end - 1200
    while t <= end:
        lines[COMPUTE].append(f"{COMPUTE}{{{labels}}} {compute} {t:.0f}")
        lines[MEMORY].append(f"{MEMORY}{{{labels}}} {memory} {t:.0f}")
        t += 15
    out = []
    for name, points in lines.items():
        out += [f"# HELP {name} generated", f"# TYPE {name} gauge", *points]
    return "\n".join([*out, "# EOF"]) + "\n"


async def _train_pod(
    sim: Simulator, api: client.ApiClient, max_percent: int, *, kai: bool = False, **labels: str
) -> str:
    await install_crds(api)
    await sim.add_namespace(NS)
    await sim.add_node("gpu-node", extra={"nvidia.com/gpu": "4"})
    await client.AppsV1Api(api).create_namespaced_deployment(NS, train(kai))
    await custom(api).create_namespaced_custom_object(
        GROUP, VERSION, NS, "gpureactivepolicies", policy(max_percent, **labels)
    )
    pods = client.CoreV1Api(api)

    async def running() -> list[Any]:
        found = (await pods.list_namespaced_pod(NS)).items
        return [p for p in found if p.status.phase == "Running"]

    loop_deadline = time.monotonic() + 60
    while not (found := await running()):
        assert time.monotonic() < loop_deadline, "no Running pod of train"
        await sim.settle()
    return str(found[0].metadata.name)


async def _deployment(api: client.ApiClient) -> dict[str, str]:
    answer = await client.AppsV1Api(api).read_namespaced_deployment("train", NS)
    return dict(answer.metadata.annotations or {})


async def _gpu_status(api: client.ApiClient) -> dict[str, Any]:
    record = await custom(api).get_namespaced_custom_object(
        GROUP, VERSION, NS, "rightsizingrecommendations", "deployment-train"
    )
    return dict((record.get("status") or {}).get("gpu") or {})


async def _evaluate(sim: Simulator, api: client.ApiClient, prometheus: str, at: float) -> list[Any]:
    view = ClusterView()
    async with running_feed(api, view), aiohttp.ClientSession() as session:
        reactor = GpuReactor(view, session, api, prometheus)
        return await reactor.run(now=datetime.fromtimestamp(at, UTC))


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    async with running_sim(tmp_path) as simulator:
        yield simulator


@pytest.mark.parametrize(("max_percent", "gpus"), [(400, "3"), (200, "2")])
async def test_a_hot_pod_asks_for_more_gpus_up_to_max_percent(
    sim: Simulator, tmp_path: Path, max_percent: int, gpus: str
) -> None:
    async with sim.api_client() as api:
        pod = await _train_pod(sim, api, max_percent)
        end = time.time() - 60
        backfill(history(pod, 250, 40, end), tmp_path / "tsdb")
        with running_prometheus(tmp_path / "tsdb") as url:
            [outcome] = await _evaluate(sim, api, url, time.time() + 1)
        assert (outcome.reason, dict(outcome.values)) == ("GpuUpsize", {"app": gpus}), outcome
        annotations = await _deployment(api)
        assert orjson.loads(annotations[REQUESTS]) == {"app": {"nvidia.com/gpu": gpus}}
        assert orjson.loads(annotations[LIMITS]) == {"app": {"nvidia.com/gpu": gpus}}
        status = await _gpu_status(api)
        assert status["drivingMetric"] == "compute"
        assert status["baseline"] == {"app": "1"}
        assert status["values"] == {"app": gpus}
        assert status["policy"] == "GpuReactivePolicy ml/gpu"


async def test_a_kai_workload_gets_a_fraction_row(sim: Simulator, tmp_path: Path) -> None:
    async with sim.api_client() as api:
        pod = await _train_pod(sim, api, 400, kai=True)
        end = time.time() - 60
        # 50 % of a whole GPU on a 0.3 share: 0.5 × 1.2 = 0.6 of a GPU
        backfill(history(pod, 50, 40, end), tmp_path / "tsdb")
        with running_prometheus(tmp_path / "tsdb") as url:
            [outcome] = await _evaluate(sim, api, url, time.time() + 1)
        assert (outcome.reason, dict(outcome.values)) == ("GpuUpsize", {"app": "0.6"}), outcome
        annotations = await _deployment(api)
        # a gpu-fraction request the selection reads; a pod annotation has no limit
        assert orjson.loads(annotations[REQUESTS]) == {"app": {"gpu-fraction": "0.6"}}
        assert LIMITS not in annotations
        assert (await _gpu_status(api))["baseline"] == {"app": "0.3"}


async def test_a_quiet_pod_at_baseline_scales_back_to_it(sim: Simulator, tmp_path: Path) -> None:
    async with sim.api_client() as api:
        pod = await _train_pod(sim, api, 400)
        end = time.time() - 60
        backfill(history(pod, 20, 10, end), tmp_path / "tsdb")
        with running_prometheus(tmp_path / "tsdb") as url:
            [outcome] = await _evaluate(sim, api, url, time.time() + 1)
        # Scale-back is floored at the baseline, which the pod has: its own size again.
        assert outcome.reason == "GpuScaleBack" and dict(outcome.values) == {"app": "1"}
        assert (await _gpu_status(api))["direction"] == "scaleBack"


async def test_prometheus_down_is_a_reason_and_one_line_and_changes_nothing(
    sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    async with sim.api_client() as api:
        await _train_pod(sim, api, 400)
        before = await _deployment(api)
        down = f"http://127.0.0.1:{free_port()}"
        with caplog.at_level(logging.WARNING, logger="kerf.recommender.gpu"):
            view = ClusterView()
            async with running_feed(api, view), aiohttp.ClientSession() as session:
                metrics = recommender_metrics()
                reactor = GpuReactor(view, session, api, down, metrics=metrics)
                [first] = await reactor.run()
                [second] = await reactor.run()
        assert first.reason == second.reason == "GpuPrometheusUnavailable"
        counted = metrics.registry.get_sample_value(
            "kerf_recommender_gpu_evaluations_total", {"reason": "GpuPrometheusUnavailable"}
        )
        assert counted == 2
        said = [r for r in caplog.records if r.name == "kerf.recommender.gpu"]
        assert len(said) == 1, [r.getMessage() for r in said]
        assert await _deployment(api) == before
        status = await _gpu_status(api)
        assert status["reason"] == "GpuPrometheusUnavailable"
        assert "values" not in status or not status["values"]


async def test_a_label_mapping_that_fits_no_series_is_a_reason(
    sim: Simulator, tmp_path: Path
) -> None:
    async with sim.api_client() as api:
        pod = await _train_pod(sim, api, 400, pod="pod_name")
        end = time.time() - 60
        backfill(history(pod, 250, 40, end), tmp_path / "tsdb")
        before = await _deployment(api)
        with running_prometheus(tmp_path / "tsdb") as url:
            [outcome] = await _evaluate(sim, api, url, time.time() + 1)
        assert outcome.reason == "GpuSeriesMissing"
        assert "pod_name" in outcome.message
        assert await _deployment(api) == before
        assert (await _gpu_status(api))["reason"] == "GpuSeriesMissing"
