"""`--api-timeout`, the flag of every command that may run once against the cluster
(`kerf reconciler`, `kerf recommend`, `kerf report`): how long a run by hand waits for
the API server before it gives up with one line (app/kube/firstsync.py). A light module: the
parser of `kerf --help` is built from it without the cluster client."""

from __future__ import annotations

import argparse
import math

from app.model.durations import DurationError, parse_flag_duration

#: How long a one-shot run waits for the API server (seconds).
DEFAULT_API_TIMEOUT_S = 30.0


def api_timeout(text: str) -> float:
    """`--api-timeout`'s value: seconds (`30`, `2.5`) or a duration (`30s`, `2m`), > 0."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_flag_duration(text).total_seconds()
        except DurationError:
            seconds = math.nan
    if not 0 < seconds < math.inf:
        raise argparse.ArgumentTypeError(
            f"--api-timeout {text!r} is not a positive number of seconds or a duration (30s, 2m)"
        )
    return seconds


def add_api_timeout_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    """`--api-timeout` (seconds, or a duration such as `2m`), with the command's own help."""
    parser.add_argument(
        "--api-timeout",
        type=api_timeout,
        default=f"{DEFAULT_API_TIMEOUT_S:g}s",
        metavar="SECONDS",
        help=f"{help_text} (seconds, or a duration such as 2m)",
    )
