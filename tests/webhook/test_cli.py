"""`kerf webhook` argument handling (serving itself is covered by test_tls)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tests.webhook.tls_helpers import encrypt_key
from webhook.certs import issue_certificates, write_certificates
from webhook.cli import add_webhook_arguments, webhook_command


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
