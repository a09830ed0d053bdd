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
    if not refused:
        return
    # Workloads refused for the same reason and message are said once, with their names;
    # a failed run's message is kerf recommend's line on stderr, not said here again.
    groups: dict[tuple[str, str], list[str]] = {}
    for o in refused:
        assert o.refusal is not None
        message = "" if analysis.failure is not None else o.refusal.message
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
