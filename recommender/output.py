"""What a single run prints: `{"recommendations": [...], "skipped": [...]}` or a table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

import orjson

from recommender.analyze import Analysis
from recommender.gpu import GpuOutcome

_COLUMNS = (
    "NAMESPACE",
    "WORKLOAD",
    "CONTAINER",
    "CPU",
    "MEMORY",
    "LIMITS",
    "COVERAGE",
    "SAMPLES",
    "CONFIDENCE",
)


def gpu_json(gpu: Sequence[GpuOutcome]) -> list[dict[str, object]]:
    """The GPU reactive evaluations: each workload's GPU rows and the metric behind them."""
    return [
        {
            "workload": o.workload,
            "policy": o.policy,
            "reason": o.reason,
            "message": o.message,
            "drivingMetric": o.status.get("drivingMetric"),
            "direction": o.status.get("direction"),
            "values": dict(o.values),
            "baseline": o.status.get("baseline", {}),
        }
        for o in gpu
    ]


def write_json(analysis: Analysis, out: IO[str], gpu: Sequence[GpuOutcome] = ()) -> None:
    """The rows in the source format (SPEC §4), the refused workloads with reasons, and
    the GPU reactive evaluations (`gpu`, when a GpuReactivePolicy matches a workload)."""
    document = analysis.as_json()
    if gpu:
        document["gpu"] = gpu_json(gpu)
    out.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")


def write_table(analysis: Analysis, out: IO[str], gpu: Sequence[GpuOutcome] = ()) -> None:
    """One line per container recommended, then one per workload refused."""
    lines: list[tuple[str, ...]] = [_COLUMNS]
    for r in analysis.rows:
        limits = ",".join(f"{k}={v}" for k, v in sorted((r.get("limits") or {}).items())) or "-"
        lines.append(
            (
                r["namespace"],
                f"{r['ownerKind']}/{r['ownerName']}",
                r["container"],
                r["requests"]["cpu"],
                r["requests"]["memory"],
                limits,
                f"{r['coverageHours']}h",
                str(r["samples"]),
                f"{r['confidence']:.2f}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(_COLUMNS))]
    for line in lines:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        out.write("\n")
    refused = [o for o in analysis.outcomes if o.refusal is not None]
    if refused:
        out.write("\nno recommendation:\n")
        for o in refused:
            assert o.refusal is not None
            out.write(
                f"  {o.ref.namespace} {o.ref.kind}/{o.ref.name}: {o.refusal.reason}: "
                f"{o.refusal.message}\n"
            )
    if gpu:
        out.write("\nGPU reactive:\n")
        for g in gpu:
            values = ",".join(f"{k}={v}" for k, v in sorted(g.values.items())) or "-"
            driver = g.status.get("drivingMetric") or "-"
            out.write(f"  {g.workload} {values} ({driver}): {g.reason}: {g.message}\n")
