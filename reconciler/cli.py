"""`kerf reconciler`: its options and entry point."""

from __future__ import annotations

import argparse
import asyncio
import errno
import sys
from pathlib import Path

from app.kube.apitimeout import add_api_timeout_argument
from app.kube.kubexflags import add_kubex_argument
from app.kube.leaderflags import (
    add_leader_arguments,
    add_shard_argument,
    leader_timings,
    shard_count,
)
from app.runtime.jsonlog import configure_logging
from reconciler.defaults import DEFAULT_METRICS_PORT, DEFAULT_RESYNC_S, DEFAULT_WORKERS


def add_reconciler_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `kerf reconciler`."""
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="the cluster (default: $KUBECONFIG, else the pod's service account, else "
        "~/.kube/config)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="decide every running pod of the YAML files in DIR and print what would be "
        "done, one JSON line each, then a summary; changes nothing (default: watch the cluster)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="watch the cluster and log what would be done for every running pod, then a "
        "summary, at start and every --resync-interval (with --once: one pass); write nothing",
    )
    parser.add_argument("--once", action="store_true", help="one full pass, then exit")
    add_api_timeout_argument(
        parser,
        "with --once or --dry-run: how long the first pass waits for the API server. "
        "Once it has not answered, or its lists have not moved, for this long, the command "
        "exits 2 with one line naming the server and the error (a 401 or 403 at once). "
        "Without either flag the service waits as long as it takes, and logs an outage "
        "when it starts, at most once a minute while it lasts, and when it ends",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=DEFAULT_METRICS_PORT,
        help="port of /healthz, /readyz and /metrics",
    )
    parser.add_argument("--metrics-host", default="0.0.0.0", help="address of the metrics port")
    parser.add_argument(
        "--eviction-rate",
        type=float,
        default=1.0,
        metavar="PER_SECOND",
        help="evictions per second over the whole cluster",
    )
    parser.add_argument(
        "--resync-interval",
        type=float,
        default=DEFAULT_RESYNC_S,
        metavar="SECONDS",
        help="how often every workload is reconciled even without a change",
    )
    parser.add_argument(
        "--workers", type=int, default=DEFAULT_WORKERS, help="workloads handled at once"
    )
    add_leader_arguments(parser)
    add_shard_argument(parser)
    add_kubex_argument(parser)
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the lowest level logged",
    )


def reconciler_command(args: argparse.Namespace) -> int:
    """Run the reconciler (or print its plan for a state dir)."""
    # The reconciler and its cluster client load only for the command that runs them.
    from kubernetes_asyncio.config import ConfigException

    from app.kube.firstsync import ApiUnavailable
    from reconciler.execution import ExecutionConfig
    from reconciler.main import Options, plan_state_dir, run_reconciler
    from reconciler.service import ServiceConfig

    if args.state_dir is not None:
        # The plan goes to stdout; keep stderr for warnings unless asked for more.
        configure_logging("warning" if args.log_level == "info" else args.log_level)
        if not args.state_dir.exists():
            print(f"kerf reconciler: --state-dir {args.state_dir}: no such file", file=sys.stderr)
            return 2
        return asyncio.run(
            plan_state_dir(args.state_dir, sys.stdout, kubex=args.kubex_recommendations)
        )
    configure_logging(args.log_level)
    if args.kubeconfig is not None and not args.kubeconfig.is_file():
        print(f"kerf reconciler: --kubeconfig {args.kubeconfig}: no such file", file=sys.stderr)
        return 2
    if args.eviction_rate <= 0:
        print("kerf reconciler: --eviction-rate must be positive", file=sys.stderr)
        return 2
    timings = leader_timings(args)
    if isinstance(timings, str):
        print(f"kerf reconciler: {timings}", file=sys.stderr)
        return 2
    shards = shard_count(args)
    if isinstance(shards, str):
        print(f"kerf reconciler: {shards}", file=sys.stderr)
        return 2
    options = Options(
        kubeconfig=args.kubeconfig,
        dry_run=args.dry_run,
        once=args.once,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port,
        execution=ExecutionConfig(eviction_rate=args.eviction_rate),
        service=ServiceConfig(workers=args.workers, resync_s=args.resync_interval),
        leader=timings,
        shards=shards,
        kubex=args.kubex_recommendations,
        api_timeout_s=args.api_timeout,
    )
    try:
        return run_reconciler(options)
    except ConfigException as exc:
        print(f"kerf reconciler: cannot connect to the cluster: {exc}", file=sys.stderr)
        return 2
    except ApiUnavailable as exc:
        print(f"kerf reconciler: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        print(
            f"kerf reconciler: --metrics-port {args.metrics_port} on {args.metrics_host} is "
            "in use: pick another with --metrics-port",
            file=sys.stderr,
        )
        return 2
