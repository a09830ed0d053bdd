"""What a user meets when the machine is not ready for a command: one line on stderr and
exit 2, never a traceback (no cluster configured, a port in use), for the reconciler, the
webhook and kubesim."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.certs import issue_certificates, write_certificates

ROOT = Path(__file__).resolve().parents[1]
KERF = str(Path(sys.executable).parent / "kerf")


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def one_line_exit_2(argv: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_the_reconciler_without_any_cluster_configuration(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    env["HOME"] = str(tmp_path)
    line = one_line_exit_2([KERF, "reconciler", "--metrics-port", "0"], env)
    assert "no cluster to talk to" in line and "--kubeconfig" in line


def test_the_reconciler_with_a_kubeconfig_that_is_not_yaml() -> None:
    line = one_line_exit_2([KERF, "reconciler", "--kubeconfig", "README.md", "--metrics-port", "0"])
    assert "is not a kubeconfig" in line


def test_the_reconciler_on_a_busy_metrics_port(tmp_path: Path, busy_port: int) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    argv = [KERF, "reconciler", "--kubeconfig", str(kubeconfig), "--metrics-host", "127.0.0.1"]
    line = one_line_exit_2([*argv, "--metrics-port", str(busy_port)])
    assert f"--metrics-port {busy_port}" in line and "in use" in line


def test_the_webhook_on_a_busy_port(tmp_path: Path, busy_port: int) -> None:
    write_certificates(issue_certificates("kerf-webhook", "kerf-system"), tmp_path)
    argv = [KERF, "webhook", "--state-dir", "examples/storefront", "--host", "127.0.0.1"]
    argv += ["--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key")]
    line = one_line_exit_2([*argv, "--port", str(busy_port)])
    assert f"--port {busy_port}" in line and "in use" in line


def test_kubesim_on_a_busy_port(busy_port: int) -> None:
    line = one_line_exit_2([sys.executable, "-m", "kubesim", "--port", str(busy_port)])
    assert "in use" in line
