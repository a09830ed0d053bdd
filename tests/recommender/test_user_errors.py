"""`kerf recommend` given bad input: one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERF = str(Path(sys.executable).parent / "kerf")
STATE = str(ROOT / "examples" / "storefront")


def one_line_exit_2(*argv: str) -> str:
    done = subprocess.run([KERF, "recommend", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return lines[-1]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["--prometheus", "prometheus:9090", "--state-dir", STATE],
            "is not an http:// or https:// URL",
        ),
        (["--prometheus", "http://p", "--state-dir", STATE, "--step", "1s"], "raise --step"),
        (["--prometheus", "http://p", "--state-dir", STATE, "--window", "1y"], "invalid duration"),
        (
            ["--prometheus", "http://p", "--state-dir", STATE, "--cpu-percentile", "95"],
            "outside 0..1",
        ),
        (["--prometheus", "http://p", "--state-dir", STATE, "--max-gap", "1m"], "--max-gap"),
        (["--prometheus", "http://p", "--state-dir", "no/such/dir"], "no such file"),
        (
            ["--prometheus", "http://p", "--kubeconfig", str(ROOT / "README.md")],
            "is not a kubeconfig",
        ),
    ],
)
def test_bad_input_is_one_line(argv: list[str], says: str) -> None:
    assert says in one_line_exit_2(*argv)


def test_a_busy_metrics_port(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        line = one_line_exit_2(
            "--prometheus",
            "http://p",
            "--kubeconfig",
            str(kubeconfig),
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            str(port),
        )
    assert "is in use" in line
