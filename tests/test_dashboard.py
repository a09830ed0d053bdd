"""dashboards/kerf.json: every PromQL expression names only metrics kerf exports (the
collectors docs/reference.md lists), and the dashboard shows what users look for."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tools.refgen import METRIC_MODULES

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "dashboards" / "kerf.json"
#: a kerf metric name in PromQL (label names and functions never start with kerf_)
METRIC = re.compile(r"\bkerf_[a-zA-Z0-9_:]*")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported() -> set[str]:
    """Every series name the services' collectors produce."""
    names: set[str] = set()
    for module_name in METRIC_MODULES:
        registry = importlib.import_module(module_name).reference_registry()
        for collector in registry._collector_to_names:  # noqa: SLF001
            for family in collector.describe():
                names.update(family.name + s for s in SUFFIXES.get(family.type, ("",)))
    return names


def expressions(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("expr"), str):
            yield node["expr"]
        for value in node.values():
            yield from expressions(value)
    elif isinstance(node, list):
        for value in node:
            yield from expressions(value)


def unknown(expr: str, known: set[str]) -> set[str]:
    return set(METRIC.findall(expr)) - known


def test_the_checker_catches_a_metric_kerf_does_not_export() -> None:
    known = exported()
    assert unknown("rate(kerf_reconciler_resizes_total[5m])", known) == set()
    assert unknown("rate(kerf_reconciler_resizes[5m])", known) == {"kerf_reconciler_resizes"}
    assert unknown("kerf_webhook_request_duration_seconds_bucket", known) == set()


def test_every_expression_names_only_metrics_kerf_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    known = exported()
    found = list(expressions(dashboard))
    assert len(found) >= 20
    for expr in found:
        assert METRIC.search(expr), f"names no kerf metric: {expr}"
        assert not unknown(expr, known), f"{expr}: {unknown(expr, known)} not exported"


def test_the_dashboard_shows_decisions_actions_rollbacks_latency_and_savings() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    used = {m for expr in expressions(dashboard) for m in METRIC.findall(expr)}
    for metric in (
        "kerf_reconciler_decisions_total",
        "kerf_webhook_requests_total",
        "kerf_reconciler_resizes_total",
        "kerf_reconciler_evictions_total",
        "kerf_reconciler_rollback_workloads",
        "kerf_webhook_request_duration_seconds_bucket",
        "kerf_reconciler_report_cpu_cores",
        "kerf_reconciler_report_memory_bytes",
    ):
        assert metric in used, f"the dashboard does not show {metric}"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "cpu_price", "memory_price"} <= variables
