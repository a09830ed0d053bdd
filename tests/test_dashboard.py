"""dashboards/kerf.json: every PromQL expression names only metrics kerf exports (the
collectors docs/reference.md lists), the dashboard shows what users look for, and its
namespace variable filters every series kept per namespace."""

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


def per_namespace() -> set[str]:
    """The metric families that carry a `namespace` label."""
    names: set[str] = set()
    for module_name in METRIC_MODULES:
        registry = importlib.import_module(module_name).reference_registry()
        for collector in registry._collector_to_names:  # noqa: SLF001
            # prometheus_client's collectors keep them in `_labelnames`, kerf's own in
            # `labelnames` (as tools/refgen.py reads them).
            labels = getattr(collector, "_labelnames", ()) or getattr(collector, "labelnames", ())
            if "namespace" in labels:
                names.update(family.name for family in collector.describe())
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


def variable(dashboard: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [v for v in dashboard["templating"]["list"] if v["name"] == name]
    return found


def test_the_namespace_variable_filters_every_series_kept_per_namespace() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    namespace = variable(dashboard, "namespace")
    assert namespace["multi"] and namespace["includeAll"]
    listed = namespace["query"]["query"]
    assert re.fullmatch(r"label_values\((kerf_\w+), namespace\)", listed), listed
    assert not unknown(listed, exported())
    families = per_namespace()
    assert families, "no kerf metric has a namespace label"
    filtered = 0
    for expr in expressions(dashboard):
        for selector in re.finditer(r"\b(kerf_\w+)(\{[^}]*\})?", expr):
            if selector[1] in families:
                assert 'namespace=~"$namespace"' in (selector[2] or ""), expr
                filtered += 1
    assert filtered >= 8


def test_a_recommender_row_shows_runs_rows_skips_and_prometheus_errors() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert "Recommender" in rows
    start = next(i for i, p in enumerate(dashboard["panels"]) if p["title"] == "Recommender")
    panels = dashboard["panels"][start + 1 :]
    end = next((i for i, p in enumerate(panels) if p["type"] == "row"), len(panels))
    used = {m for expr in expressions(panels[:end]) for m in METRIC.findall(expr)}
    for metric in (
        "kerf_recommender_runs_total",
        "kerf_recommender_rows",
        "kerf_recommender_workloads",
        "kerf_recommender_prometheus_queries_total",
        "kerf_recommender_configmap_writes_total",
        "kerf_recommender_last_success_timestamp_seconds",
    ):
        assert metric in used, f"the recommender row does not show {metric}"
    skipped = [e for e in expressions(panels[:end]) if "kerf_recommender_workloads" in e]
    assert any("by (reason)" in e and 'outcome="refused"' in e for e in skipped), skipped


def row_panels(dashboard: dict[str, Any], title: str) -> list[dict[str, Any]]:
    """The panels under the row `title`, up to the next row."""
    start = next(i for i, p in enumerate(dashboard["panels"]) if p["title"] == title)
    assert dashboard["panels"][start]["type"] == "row"
    panels = dashboard["panels"][start + 1 :]
    end = next((i for i, p in enumerate(panels) if p["type"] == "row"), len(panels))
    return panels[:end]


def test_a_shards_row_shows_buckets_per_replica_rebalances_and_withheld_writes() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = row_panels(dashboard, "Shards")
    found = list(expressions(panels))
    used = {m for expr in found for m in METRIC.findall(expr)}
    for service in ("reconciler", "recommender"):
        for metric in ("buckets_held", "bucket_rebalances_total", "writes_withheld_total"):
            assert f"kerf_{service}_{metric}" in used, f"the Shards row does not show {metric}"
        held = f"kerf_{service}_buckets_held"
        assert any(f"sum by (pod) ({held})" in e for e in found), "buckets held per replica"
        rebalances = f"kerf_{service}_bucket_rebalances_total"
        assert any("by (reason)" in e and rebalances in e for e in found)
    # Writes withheld for a lost bucket: the leader Lease's (bucket "") are not a bucket's.
    withheld = [e for e in found if "writes_withheld_total" in e]
    assert withheld and all('bucket!=""' in e for e in withheld)
    assert any("by (pod, bucket)" in e for e in withheld)


def test_no_two_panels_overlap() -> None:
    taken: dict[tuple[int, int], str] = {}
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in taken, f"{panel['title']} overlaps {taken[(x, y)]}"
                taken[(x, y)] = panel["title"]
