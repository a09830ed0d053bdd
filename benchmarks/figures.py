"""What every bench shares: the generated cluster's size arguments, the process's peak
memory, and writing the figures' JSON."""

from __future__ import annotations

import argparse
import resource
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson


def add_size_arguments(
    parser: argparse.ArgumentParser, *, pods: int | None = 35_000, nodes: int = 1_000
) -> None:
    """`--workloads`, `--pods` (unless `pods` is None), `--nodes`, `--policies` and
    `--namespaces` of the generated cluster (`benchmarks.explain.generate`)."""
    parser.add_argument("--workloads", type=int, default=25_000)
    if pods is not None:
        parser.add_argument("--pods", type=int, default=pods)
    parser.add_argument("--nodes", type=int, default=nodes)
    parser.add_argument("--policies", type=int, default=1_000)
    parser.add_argument("--namespaces", type=int, default=250)


def peak_rss_mib() -> float:
    """The process's peak resident memory so far, in MiB (ru_maxrss is KiB on Linux)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def decision_build() -> str:
    """Which build of the admission path this process imports: "compiled" (mypyc,
    setup.py; what `make bench-webhook` and `make bench-instructions` run) or "pure". A
    server or counted child the bench starts inherits its import path, so loads the same."""
    import app.model.quantities

    return "compiled" if (app.model.quantities.__file__ or "").endswith(".so") else "pure"


def write_figures(out: Path, figures: Mapping[str, Any]) -> None:
    """Write `figures` as indented JSON to `out`, creating its directory."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))
