"""What a single run prints: `{"recommendations": [...], "skipped": [...]}` or a table."""

from __future__ import annotations

from typing import IO

import orjson

from recommender.analyze import Analysis

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


def write_json(analysis: Analysis, out: IO[str]) -> None:
    """The rows in the source format (SPEC §4), and the refused workloads with reasons."""
    out.write(orjson.dumps(analysis.as_json(), option=orjson.OPT_INDENT_2).decode() + "\n")


def write_table(analysis: Analysis, out: IO[str]) -> None:
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
