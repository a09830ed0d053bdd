"""`python -m benchmarks.statedir` (part of `make bench`) at a tiny size: the generated cluster
written as YAML and as JSON loads into the same view. No time is asserted."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from benchmarks.statedir import main


def test_both_encodings_load_every_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "statedir.json"
    args = ["--workloads", "30", "--pods", "45", "--nodes", "3", "--policies", "4"]
    assert main([*args, "--namespaces", "2", "--rounds", "1", "--out", str(out)]) == 0
    figures = orjson.loads(out.read_bytes())
    # 3 nodes, 2 namespaces and strategies, 4 policies, 30 Deployments, 1 ConfigMap, 45 pods
    assert figures["yaml_documents"] == figures["json_documents"] == 87
    assert figures["yaml_view_pods"] == figures["json_view_pods"] == 45
    assert "yaml_load_seconds" in capsys.readouterr().out
