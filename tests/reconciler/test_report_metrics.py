"""The totals of `kerf report`, exported per namespace by the reconciler's /metrics."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.model.annotations import ROLLBACK_STATE
from app.store.view import ClusterView
from reconciler.main import Options, build_service
from reconciler.metrics import (
    REPORT_REUSE_S,
    ROLLBACK_MODES,
    RollbackStatesCollector,
    SavingsCollector,
)
from tests.app.builders import NOW, base_objects, deployment, namespace, node, pod, static, view

GIB = 1024**3


def samples(registry: CollectorRegistry) -> dict[tuple[str, str, str], float]:
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            if s.name.startswith("kerf_reconciler_report_"):
                found[(s.name, s.labels["namespace"], s.labels["state"])] = s.value
    return found


class Ticks:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def shop() -> ClusterView:
    return view(*base_objects(replicas=1), node(), static(), pod(node="node-a"))


def test_each_namespace_exports_now_recommended_and_applied() -> None:
    registry = CollectorRegistry()
    registry.register(SavingsCollector(shop(), clock=lambda: NOW))
    found = samples(registry)
    assert found[("kerf_reconciler_report_cpu_cores", "shop", "now")] == pytest.approx(0.4)
    assert found[("kerf_reconciler_report_cpu_cores", "shop", "recommended")] == 0.25
    assert found[("kerf_reconciler_report_cpu_cores", "shop", "applied")] == 0.25
    assert found[("kerf_reconciler_report_memory_bytes", "shop", "now")] == GIB / 2
    assert found[("kerf_reconciler_report_memory_bytes", "shop", "recommended")] == GIB / 4


def test_an_unsynced_view_exports_no_totals() -> None:
    v = shop()
    v.synced = False
    registry = CollectorRegistry()
    registry.register(SavingsCollector(v, clock=lambda: NOW))
    assert samples(registry) == {}


def test_a_scrape_reuses_the_last_totals_until_they_are_old() -> None:
    v = shop()
    ticks = Ticks()
    registry = CollectorRegistry()
    registry.register(SavingsCollector(v, clock=lambda: NOW, monotonic=ticks))
    key = ("kerf_reconciler_report_cpu_cores", "shop", "now")
    assert samples(registry)[key] == pytest.approx(0.4)
    v.apply(pod("web-7d4b9-bbbbb", node="node-a"))
    ticks.now = REPORT_REUSE_S - 1
    assert samples(registry)[key] == pytest.approx(0.4)
    ticks.now = REPORT_REUSE_S
    assert samples(registry)[key] == pytest.approx(0.8)


async def test_the_service_registers_them_on_its_metrics() -> None:
    async with client.ApiClient() as api:
        _, service = build_service(api, Options(), namespace="kerf-system", identity="test")
    names = {
        family.name
        for family in text_string_to_metric_families(
            generate_latest(service.metrics.registry).decode()
        )
    }
    assert {
        "kerf_reconciler_report_cpu_cores",
        "kerf_reconciler_report_memory_bytes",
        "kerf_reconciler_rollback_workloads",
    } <= names


def test_workloads_are_counted_by_rollback_mode() -> None:
    monitoring = {ROLLBACK_STATE: '{"mode": "monitoring", "turn": 1}'}
    failed = {ROLLBACK_STATE: '{"mode": "failedPermanent", "turn": 3}'}
    v = view(
        namespace(),
        deployment("web", annotations=monitoring),
        deployment("api", annotations=monitoring),
        deployment("cart", annotations=failed),
        deployment("plain"),
    )
    registry = CollectorRegistry()
    registry.register(RollbackStatesCollector(v))
    found = {
        s.labels["mode"]: s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }
    assert found == dict.fromkeys(ROLLBACK_MODES, 0.0) | {"monitoring": 2.0, "failedPermanent": 1.0}
    v.synced = False
    assert "kerf_reconciler_rollback_workloads{" not in generate_latest(registry).decode()
