"""What every bench shares: the generated cluster's size arguments, the process's peak
memory and event-loop stalls, and writing the figures' JSON."""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import time
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


def cpu_delta(after: Mapping[str, float], before: Mapping[str, float]) -> dict[str, float]:
    """CPU seconds per process between two `cpu_seconds()` readings, and their total."""
    spent = {name: round(after[name] - before.get(name, 0.0), 1) for name in after}
    return {**spent, "total": round(sum(spent.values()), 1)}


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


class Stalls:
    """How long the process's event loop was held: the longest lateness of a timer that
    wakes every `TICK_S`, and the full collections with their longest. A loop held past a
    Lease's renew deadline loses the Lease (issue 37)."""

    TICK_S = 0.25

    def __init__(self) -> None:
        self.lag_max_s = 0.0
        self.full_collections = 0
        self.full_collection_max_s = 0.0
        self.full_collection_total_s = 0.0
        #: the unreachable objects they found (what waiting longer for them would keep)
        self.full_collection_collected = 0
        self._started = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Stalls:
        """Start measuring (in the running loop)."""
        gc.callbacks.append(self._collected)
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def stop(self) -> None:
        """Stop measuring."""
        gc.callbacks.remove(self._collected)
        if self._task is not None:
            self._task.cancel()

    def figures(self) -> dict[str, float]:
        """The figures so far; they start again from zero."""
        figures = {
            "loop_lag_max_s": round(self.lag_max_s, 3),
            "full_collections": self.full_collections,
            "full_collection_max_s": round(self.full_collection_max_s, 3),
            "full_collection_total_s": round(self.full_collection_total_s, 2),
            "full_collection_collected": self.full_collection_collected,
        }
        self.lag_max_s = self.full_collection_max_s = self.full_collection_total_s = 0.0
        self.full_collections = self.full_collection_collected = 0
        return figures

    async def _tick(self) -> None:
        while True:
            due = time.perf_counter() + self.TICK_S
            await asyncio.sleep(self.TICK_S)
            self.lag_max_s = max(self.lag_max_s, time.perf_counter() - due)

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        self.full_collections += 1
        self.full_collection_collected += info["collected"]
        self.full_collection_total_s += took
        self.full_collection_max_s = max(self.full_collection_max_s, took)
