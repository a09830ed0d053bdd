"""`kerf recommend`: its options and entry point."""

from __future__ import annotations

import argparse
import asyncio
import errno
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from app.kube.apitimeout import add_api_timeout_argument
from app.kube.leaderflags import (
    add_leader_arguments,
    add_shard_argument,
    leader_timings,
    shard_count,
)
from app.model.durations import DurationError, parse_flag_duration
from app.model.quantities import QuantityError, parse_resource
from app.recommend.prometheus_query import Queries
from app.recommend.rules import RuleSettings
from app.runtime.jsonlog import configure_logging
from recommender.defaults import DEFAULT_METRICS_PORT

if TYPE_CHECKING:
    from recommender.analyze import Settings

_DEFAULTS = RuleSettings()
_QUERIES = Queries()
_QUERY_HELP = {
    "cpu": "range query: CPU usage rate (cores) per namespace, pod, container",
    "memory": "range query: working set (bytes) per namespace, pod, container",
    "throttled": "instant query: throttled CFS periods over the window",
    "periods": "instant query: all CFS periods over the window",
    "oom": "instant query: above 0 for a container OOM-killed in the window",
}


def _seconds(text: str) -> float:
    try:
        return parse_flag_duration(text).total_seconds()
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cores(text: str) -> float:
    try:
        return parse_resource("cpu", text) / 1000
    except QuantityError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def _bytes(text: str) -> int:
    try:
        return parse_resource("memory", text)
    except QuantityError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is outside 0..1")
    return value


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not positive")
    return value


def _now(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC3339 time") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} needs a time zone (e.g. Z)")
    return value


def add_recommend_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `kerf recommend`."""
    parser.add_argument("--prometheus", required=True, metavar="URL", help="Prometheus base URL")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--kubeconfig",
        type=Path,
        help="the cluster (default: $KUBECONFIG, else the pod's service account, else "
        "~/.kube/config)",
    )
    source.add_argument(
        "--state-dir",
        type=Path,
        help="the workloads and pods of the YAML files in DIR; prints the rows, writes nothing "
        "(default: the cluster)",
    )
    parser.add_argument(
        "--once", action="store_true", help="one run, print it, then exit (no leader election)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="compute and log, write no ConfigMap"
    )
    add_api_timeout_argument(
        parser,
        "with --once or --dry-run: how long the first run waits for the API server. "
        "Once it has not answered, or its lists have not moved, for this long, the command "
        "exits 2 with one line naming the server and the error (a 401 or 403 at once). "
        "Without either flag the service waits as long as it takes, and logs an outage "
        "when it starts, at most once a minute while it lasts, and when it ends",
    )
    parser.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="output of a single run"
    )
    parser.add_argument(
        "--interval", type=_seconds, default="1h", metavar="DURATION", help="time between runs"
    )
    parser.add_argument(
        "--now", type=_now, default=None, metavar="RFC3339", help="end of the window (default: now)"
    )
    window = parser.add_argument_group("window")
    window.add_argument(
        "--window",
        type=_seconds,
        default="168h",
        metavar="DURATION",
        help="history analysed",
    )
    window.add_argument(
        "--step",
        type=_seconds,
        default="5m",
        metavar="DURATION",
        help="resolution of the range queries",
    )
    window.add_argument(
        "--rate-window",
        type=_seconds,
        default="5m",
        metavar="DURATION",
        help="the rate() window of the CPU query",
    )
    window.add_argument(
        "--max-gap",
        type=_seconds,
        default="15m",
        metavar="DURATION",
        help="a longer stretch without data is a gap",
    )
    rules = parser.add_argument_group("rules")
    rules.add_argument(
        "--cpu-percentile",
        type=_fraction,
        default=_DEFAULTS.cpu_percentile,
        metavar="Q",
        help="CPU request: this quantile of the usage rate",
    )
    rules.add_argument(
        "--memory-headroom",
        type=_fraction,
        default=_DEFAULTS.memory_headroom,
        metavar="F",
        help="memory request: maximum working set × (1 + F)",
    )
    rules.add_argument(
        "--oom-factor",
        type=_positive,
        default=_DEFAULTS.oom_factor,
        metavar="F",
        help="an OOM-killed container gets at least F × the limit it was killed at",
    )
    rules.add_argument(
        "--throttling-ratio",
        type=_fraction,
        default=_DEFAULTS.throttling_ratio,
        metavar="R",
        help="at or above this throttled share a container's CPU request never falls",
    )
    rules.add_argument(
        "--min-cpu",
        type=_cores,
        default="10m",
        metavar="QTY",
        help="lowest CPU request written",
    )
    rules.add_argument(
        "--min-memory",
        type=_bytes,
        default="32Mi",
        metavar="QTY",
        help="lowest memory request written",
    )
    rules.add_argument(
        "--learning-period",
        type=_seconds,
        default="168h",
        metavar="DURATION",
        help="coverage at which confidence stops rising",
    )
    rules.add_argument(
        "--full-samples",
        type=int,
        default=_DEFAULTS.full_samples,
        metavar="N",
        help="sample count at which confidence stops rising",
    )
    rules.add_argument(
        "--limits",
        choices=("ratio", "keep"),
        default=_DEFAULTS.limits,
        help="ratio: limits keep the template's limit/request ratio; keep: no limits written",
    )
    queries = parser.add_argument_group("queries ({window} and {rate} are filled in)")
    for name, what in _QUERY_HELP.items():
        # The defaults are long PromQL: shown in the help text, where wrapping is harmless.
        queries.add_argument(
            f"--{name}-query",
            default=None,
            metavar="PROMQL",
            help=f"{what} (default: {getattr(_QUERIES, name)})",
        )
    add_leader_arguments(parser)
    add_shard_argument(parser)
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=DEFAULT_METRICS_PORT,
        help="port of /healthz and /metrics (not with --once)",
    )
    parser.add_argument("--metrics-host", default="0.0.0.0", help="address of the metrics port")
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the lowest level logged",
    )


def _settings(args: argparse.Namespace) -> Settings:
    from recommender.analyze import Settings

    if args.full_samples < 1:
        raise argparse.ArgumentTypeError("--full-samples must be at least 1")
    if args.learning_period <= 0:
        raise argparse.ArgumentTypeError("--learning-period must be positive")
    rules = RuleSettings(
        cpu_percentile=args.cpu_percentile,
        memory_headroom=args.memory_headroom,
        oom_factor=args.oom_factor,
        throttling_ratio=args.throttling_ratio,
        min_cpu_cores=args.min_cpu,
        min_memory_bytes=args.min_memory,
        learning_hours=args.learning_period / 3600,
        full_samples=args.full_samples,
        max_gap_s=args.max_gap,
        limits=args.limits,
    )
    queries = Queries(
        cpu=args.cpu_query or _QUERIES.cpu,
        memory=args.memory_query or _QUERIES.memory,
        throttled=args.throttled_query or _QUERIES.throttled,
        periods=args.periods_query or _QUERIES.periods,
        oom=args.oom_query or _QUERIES.oom,
    )
    settings = Settings(
        window_s=args.window,
        step_s=args.step,
        rate_s=args.rate_window,
        queries=queries,
        rules=rules,
    )
    problem = settings.problem()
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return settings


def recommend_command(args: argparse.Namespace) -> int:
    """Run the recommender: once over a state dir or a cluster, or as a service."""
    # The recommender and its clients load only for the command that runs them.
    from kubernetes_asyncio.config import ConfigException

    from app.kube.firstsync import ApiUnavailable
    from recommender.main import Options, run_recommender, run_state_dir

    settings = _settings(args)
    if not args.prometheus.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(
            f"--prometheus {args.prometheus!r} is not an http:// or https:// URL"
        )
    if args.state_dir is not None:
        configure_logging("warning" if args.log_level == "info" else args.log_level)
        return asyncio.run(
            run_state_dir(args.state_dir, args.prometheus, settings, args.output, args.now)
        )
    configure_logging(args.log_level)
    if args.kubeconfig is not None and not args.kubeconfig.is_file():
        print(f"kerf recommend: --kubeconfig {args.kubeconfig}: no such file", file=sys.stderr)
        return 2
    timings = leader_timings(args)
    if isinstance(timings, str):
        print(f"kerf recommend: {timings}", file=sys.stderr)
        return 2
    shards = shard_count(args)
    if isinstance(shards, str):
        print(f"kerf recommend: {shards}", file=sys.stderr)
        return 2
    options = Options(
        prometheus=args.prometheus,
        settings=settings,
        kubeconfig=args.kubeconfig,
        once=args.once,
        dry_run=args.dry_run,
        output=args.output,
        interval_s=args.interval,
        now=args.now,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port,
        leader=timings,
        shards=shards,
        api_timeout_s=args.api_timeout,
    )
    try:
        return run_recommender(options)
    except ConfigException as exc:
        print(f"kerf recommend: cannot connect to the cluster: {exc}", file=sys.stderr)
        return 2
    except ApiUnavailable as exc:
        print(f"kerf recommend: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        print(
            f"kerf recommend: --metrics-port {args.metrics_port} on {args.metrics_host} is "
            "in use: pick another with --metrics-port",
            file=sys.stderr,
        )
        return 2
