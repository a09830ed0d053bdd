"""`kerf webhook` argument handling (serving itself is covered by test_tls)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from webhook.cli import add_webhook_arguments, webhook_command


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_webhook_arguments(parser)
    return parser.parse_args(argv)


def test_defaults() -> None:
    args = parse(["--tls-cert", "c", "--tls-key", "k"])
    assert (args.host, args.port, args.deadline, args.state_dir) == ("0.0.0.0", 8443, 1.0, None)


def test_without_state_dir_explains_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert webhook_command(parse(["--tls-cert", "c", "--tls-key", "k"])) == 2
    assert "--state-dir" in capsys.readouterr().err


def test_missing_tls_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--state-dir", str(tmp_path), "--tls-cert", str(tmp_path / "nope.crt")]
    assert webhook_command(parse([*argv, "--tls-key", str(tmp_path / "k")])) == 2
    assert "nope.crt" in capsys.readouterr().err
