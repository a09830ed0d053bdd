"""`make bench-reconciler` at a tiny size: the bench's reconciler really works the cluster.

Its figures are only worth reading if the reconciler it measures writes: once every write
had to pass the leader's fence, a bench replica without a running elector withheld them
all and reported passes with no writes and no resizes, which looked like a fast run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
SIZE = ["--workloads", "12", "--pods", "24", "--nodes", "2", "--policies", "4"]


def test_the_first_pass_resizes_every_pod_and_the_later_passes_write_nothing(
    tmp_path: Path,
) -> None:
    out = tmp_path / "reconciler.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.reconciler", *SIZE, "--namespaces", "1"]
        + ["--timeout", "300", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    figures = orjson.loads(out.read_bytes())
    first = figures["first_pass"]
    assert first["resized_pods"] == 24
    assert first["api_calls_by_resource"]["patch pods/resize"] == 24
    assert first["writes"] >= first["resized_pods"]
    assert figures["steady_pass"]["writes"] == 0
    assert figures["resync_pass"]["writes"] == 0
