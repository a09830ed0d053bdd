"""What a single run prints: `{"recommendations": [...], "skipped": [...]}` or a table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

import orjson

from recommender.analyze import Analysis, Outcome
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
        _say_refused(out, refused, analysis.failure is not None)
    if gpu:
        out.write("\nGPU reactive:\n")
        for g in gpu:
            values = ",".join(f"{k}={v}" for k, v in sorted(g.values.items())) or "-"
            driver = g.status.get("drivingMetric") or "-"
            out.write(f"  {g.workload} {values} ({driver}): {g.reason}: {g.message}\n")


def _say_refused(out: IO[str], refused: list[Outcome], failed: bool) -> None:
    """Workloads refused for the same reason and message are said once, with their names;
    a failed run's message is kerf recommend's line on stderr, not said here again."""
    groups: dict[tuple[str, str], list[str]] = {}
    for o in refused:
        assert o.refusal is not None
        message = "" if failed else o.refusal.message
        key = (o.refusal.reason, message)
        groups.setdefault(key, []).append(f"{o.ref.namespace} {o.ref.kind}/{o.ref.name}")
    out.write("\nno recommendation:\n")
    for (reason, message), names in groups.items():
        said = f"{reason}: {message}" if message else reason
        if len(names) == 1:
            out.write(f"  {names[0]}: {said}\n")
            continue
        out.write(f"  {len(names)} workloads: {said}\n")
        out.writelines(f"    {name}\n" for name in names)
