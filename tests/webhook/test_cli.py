"""`kerf webhook` argument handling (serving itself is covered by test_tls)."""

from __future__ import annotations

import argparse
import shlex
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.webhook.tls_helpers import encrypt_key
from webhook.certs import issue_certificates, write_certificates
from webhook.cli import add_webhook_arguments, webhook_command

ROOT = Path(__file__).resolve().parents[2]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_webhook_arguments(parser)
    return parser.parse_args(argv)


def test_defaults() -> None:
    args = parse(["--tls-cert", "c", "--tls-key", "k"])
    assert (args.host, args.port, args.deadline, args.state_dir) == ("0.0.0.0", 8443, 1.0, None)
    assert args.kubeconfig is None  # $KUBECONFIG, in-cluster or ~/.kube/config decide


def test_without_state_dir_a_missing_kubeconfig_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "c").touch()
    (tmp_path / "k").touch()
    argv = ["--tls-cert", str(tmp_path / "c"), "--tls-key", str(tmp_path / "k")]
    assert webhook_command(parse([*argv, "--kubeconfig", str(tmp_path / "nope")])) == 2
    assert "--kubeconfig" in capsys.readouterr().err


def test_missing_tls_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--state-dir", str(tmp_path), "--tls-cert", str(tmp_path / "nope.crt")]
    assert webhook_command(parse([*argv, "--tls-key", str(tmp_path / "k")])) == 2
    assert "nope.crt" in capsys.readouterr().err


def test_an_unusable_kubeconfig_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_certificates(issue_certificates(), tmp_path)
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    argv = ["--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key")]
    assert webhook_command(parse([*argv, "--kubeconfig", str(tmp_path / "kubeconfig")])) == 2
    assert "kerf webhook: cannot connect to the cluster" in capsys.readouterr().err


def test_an_encrypted_key_is_refused_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_certificates(issue_certificates(), tmp_path)
    encrypt_key(tmp_path / "tls.key")
    argv = ["--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key")]
    assert webhook_command(parse([*argv, "--state-dir", str(tmp_path)])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "tls.key" in err and "encrypted" in err


def test_connection_limit_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(["--tls-cert", "c", "--tls-key", "k"])
    assert (args.max_connections, args.read_timeout) == (1000, 5.0)
    assert (args.max_header_bytes, args.max_headers) == (32 * 1024, 100)
    assert args.max_body_values == 32_768
    write_certificates(issue_certificates(), tmp_path)
    argv = ["--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key")]
    assert webhook_command(parse([*argv, "--read-timeout", "0"])) == 2
    assert "--read-timeout must be positive" in capsys.readouterr().err


def test_serving_prints_a_curl_line_that_works(tmp_path: Path) -> None:
    """`kerf webhook` says once it listens how to try it; the line, run as printed, gets
    an answer (curl itself may be missing here, so its arguments are replayed)."""
    write_certificates(issue_certificates(), tmp_path)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kerf = Path(sys.executable).parent / "kerf"
    argv = [str(kerf), "webhook", "--state-dir", str(ROOT / "examples" / "storefront")]
    argv += ["--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key")]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    server = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        lines = [server.stderr.readline() for _ in range(2)]
        assert lines[0] == "kerf webhook: serving; try:\n"
        words = shlex.split(lines[1])
        assert words[:3] == ["curl", "--cacert", str(tmp_path / "ca.crt")]
        assert words[-1] == f"https://127.0.0.1:{port}/mutate"
        body = (ROOT / words[words.index("-d") + 1].removeprefix("@")).read_bytes()
        context = ssl.create_default_context(cafile=words[2])
        response = httpx.post(words[-1], content=body, verify=context, timeout=10)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert response.json()["response"]["allowed"] is True


def test_make_run_listens_on_loopback_only() -> None:
    dry_run = subprocess.run(
        ["make", "-n", "run", "BIN=bin"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    (line,) = [row for row in dry_run.splitlines() if "kerf webhook" in row]
    assert "--host 127.0.0.1" in line
