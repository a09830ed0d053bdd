"""`python -m devcluster` without the binaries: one line, exit 2, nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_binary_is_one_line_and_exit_2(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    temp = tmp_path / "tmp"
    temp.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "devcluster", "--kubeconfig", str(tmp_path / "kc")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KERF_CLUSTER_TOOLS": str(tools), "TMPDIR": str(temp)},
    )
    assert result.returncode == 2
    assert result.stderr == f"devcluster: {tools / 'etcd'} is missing; run make cluster-tools\n"
    assert result.stdout == ""
    assert not (tmp_path / "kc").exists() and not list(temp.iterdir())


def test_a_component_that_fails_to_start_is_named_with_its_log(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        script = tools / name
        script.write_text("#!/bin/sh\necho 'listen tcp: address already in use' >&2\nexit 3\n")
        script.chmod(0o755)
    temp = tmp_path / "tmp"
    temp.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "devcluster", "--kubeconfig", str(tmp_path / "kc")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KERF_CLUSTER_TOOLS": str(tools), "TMPDIR": str(temp)},
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "devcluster: etcd exited with code 3",
        "listen tcp: address already in use",
    ]
    assert not (tmp_path / "kc").exists() and not list(temp.iterdir())
