"""`kerf recommend` given bad input: one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kerf.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
STATE = str(ROOT / "examples" / "storefront")


def one_line_exit_2(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run `kerf recommend` in this process (as the console script does); its last line."""
    try:
        code = main(["recommend", *argv])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    assert "Traceback" not in stderr
    return [line for line in stderr.splitlines() if line.strip()][-1]


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
        (
            ["--prometheus", "http://p", "--lease-duration", "6", "--renew-deadline", "6"],
            "--renew-deadline (6s) < --lease-duration (6s)",
        ),
        (["--prometheus", "http://p", "--retry-period", "soon"], "invalid float value"),
    ],
)
def test_bad_input_is_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert says in one_line_exit_2(capsys, *argv)


def test_window_takes_days(capsys: pytest.CaptureFixture[str]) -> None:
    """`--window 7d` is the default `168h`: a flag's duration takes days (docs/decisions.md)."""
    argv = ["recommend", "--prometheus", "http://p", "--state-dir", STATE]
    by_days = build_parser().parse_args([*argv, "--window", "7d", "--interval", "1d"])
    by_hours = build_parser().parse_args(argv)
    assert by_days.window == by_hours.window == 7 * 24 * 3600
    assert by_days.interval == 24 * 3600


def test_a_busy_metrics_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
            capsys,
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
