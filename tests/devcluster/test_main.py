"""`python -m devcluster` without the binaries: one line, exit 2, nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def devcluster(tmp_path: Path, tools: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m devcluster` with `tools` as its binaries and TMPDIR `tmp_path/tmp`."""
    return subprocess.run(
        [sys.executable, "-m", "devcluster", "--kubeconfig", str(tmp_path / "kc"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KERF_CLUSTER_TOOLS": str(tools), "TMPDIR": str(tmp_path / "tmp")},
    )


def test_a_missing_binary_is_one_line_and_exit_2(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    temp = tmp_path / "tmp"
    temp.mkdir()
    result = devcluster(tmp_path, tools, "--kubelet", "agent")
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
    result = devcluster(tmp_path, tools, "--kubelet", "agent")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "devcluster: etcd exited with code 3",
        "listen tcp: address already in use",
    ]
    assert not (tmp_path / "kc").exists() and not list(temp.iterdir())


def test_without_a_real_node_the_agent_plays_the_kubelet_and_says_why(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    temp = tmp_path / "tmp"
    temp.mkdir()
    result = devcluster(tmp_path, tools)
    why, missing = result.stderr.splitlines()
    assert why.startswith("devcluster: the node agent plays the kubelet: ")
    assert missing == f"devcluster: {tools / 'etcd'} is missing; run make cluster-tools"
    assert result.returncode == 2


def test_a_real_node_runs_one_node(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "devcluster", "--kubeconfig", str(tmp_path / "kc")]
        + ["--kubelet", "real", "--nodes", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].endswith(
        "--kubelet real runs one node; --nodes N needs --kubelet agent"
    )
