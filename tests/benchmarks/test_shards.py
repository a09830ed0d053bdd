"""`make bench-shards` at a tiny size: two replicas share the buckets out (by the
namespaces in them) and, between them, resize the pods one replica resizes, and the
steady pass writes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
SIZE = ["--workloads", "12", "--pods", "24", "--nodes", "2", "--policies", "4"]


def test_two_replicas_split_the_buckets_and_resize_what_one_resizes(tmp_path: Path) -> None:
    out = tmp_path / "shards.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.shards", *SIZE, "--namespaces", "12"]
        + ["--replicas", "1,2", "--lease-duration", "3", "--timeout", "300"]
        + ["--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    one, two = orjson.loads(out.read_bytes())["runs"]
    held = [set(r["buckets"]) for r in two["per_replica"]]
    # shared by the namespaces in them, so not necessarily 32 each
    assert held[0] | held[1] == set(range(64)) and not held[0] & held[1] and all(held)
    assert one["first_pass"]["resized_pods"] > 0
    assert two["first_pass"]["resized_pods"] == one["first_pass"]["resized_pods"]
    # the decisions by reason beside them, summed over the replicas
    resized = one["first_pass"]["events"]["Resized"]
    assert resized > 0 and two["first_pass"]["events"]["Resized"] == resized
    assert one["first_pass"]["decisions"] and two["first_pass"]["decisions"]
    assert one["steady_pass"]["writes"] == two["steady_pass"]["writes"] == 0
    # the bucket occupancy beside the figures: every workload in one bucket, held by the
    # replica that counted it, and the same buckets whatever the replica count
    assert one["bucket_occupancy"] == two["bucket_occupancy"]
    assert sum(b["workloads"] for b in two["bucket_occupancy"].values()) == 12
    for replica, counted in zip(two["per_replica"], two["per_replica_occupancy"], strict=True):
        assert {int(b) for b in replica["bucket_occupancy"]} <= set(replica["buckets"])
        assert counted["workloads"] == replica["workloads"]
