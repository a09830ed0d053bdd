"""`kerf status`: one line per managed workload, from its RightsizingRecommendation: the
phase, a reason true for it, the values current → target per container, and what kerf
does next and when; `-w` goes on with a line per change, through a watch. `--shards`:
one line per replica of the reconciler and the recommender, the buckets it holds, from
their Leases (kerf/shard_status.py)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from app.kube.apitimeout import add_api_timeout_argument

HEADER = ["NAMESPACE", "WORKLOAD", "PHASE", "REASON", "CURRENT → TARGET", "NEXT"]
#: where the chart and the kustomize base install kerf
DEFAULT_KERF_NAMESPACE = "kerf-system"


def add_status_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status",
        help="one line per managed workload: values current → target, phase, what is next",
        description="Reads the RightsizingRecommendations kerf keeps, one per managed "
        "workload, and prints for each: its phase, a reason true for that phase, its "
        "containers' requests and limits as they run now → as the policies want them, and "
        "the next action with its earliest time.",
    )
    p.add_argument(
        "-n", "--namespace", default=None, help="one namespace (default: every namespace)"
    )
    p.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after the list, print a line for every change (Ctrl-C stops)",
    )
    p.add_argument(
        "--kubeconfig", type=Path, default=None, help="kubeconfig (default: as kubectl finds it)"
    )
    p.add_argument(
        "--shards",
        action="store_true",
        help="instead: which replica of the reconciler and of the recommender holds which "
        "buckets, how long ago it renewed, and the expired and free buckets",
    )
    p.add_argument(
        "--kerf-namespace",
        default=DEFAULT_KERF_NAMESPACE,
        metavar="NS",
        help=f"with --shards: the namespace kerf runs in (default: {DEFAULT_KERF_NAMESPACE})",
    )
    add_api_timeout_argument(p, "give up when the API server does not answer within this")
    p.set_defaults(handler=status_command)


def status_command(args: argparse.Namespace) -> int:
    if args.shards and (args.watch or args.namespace):
        raise argparse.ArgumentTypeError(
            "--shards reads kerf's own Leases: it takes no -w or -n (--kerf-namespace "
            "names kerf's namespace)"
        )
    try:
        return asyncio.run(_shards(args) if args.shards else _status(args))
    except KeyboardInterrupt:
        return 130


async def _shards(args: argparse.Namespace) -> int:
    from app.runtime.clock import utc_now
    from kerf.records_api import Records
    from kerf.report_table import render_table
    from kerf.shard_status import HEADER as SHARD_HEADER
    from kerf.shard_status import WEIGHED_HEADER, shard_rows

    async with Records.connect(args.kubeconfig, args.api_timeout) as records:
        leases = await records.shard_leases(args.kerf_namespace)
        # the namespaces the buckets are shared by; the table goes without when not allowed
        namespaces = await records.namespace_names() if leases else None
    rows = shard_rows(leases, utc_now(), namespaces)
    if not rows:
        print(
            f"kerf status: no shard Leases in namespace {args.kerf_namespace}: kerf does not "
            "run there, or its services have not started (--kerf-namespace)",
            file=sys.stderr,
        )
        return 0
    header = SHARD_HEADER if namespaces is None else WEIGHED_HEADER
    sys.stdout.write(render_table([header, *rows]))
    return 0


async def _status(args: argparse.Namespace) -> int:
    from app.policy.record_summary import status_line
    from app.runtime.clock import utc_now
    from kerf.records_api import Records
    from kerf.report_table import render_table

    async with Records.connect(args.kubeconfig, args.api_timeout) as records:
        items, version = await records.list(args.namespace)
        rows = [status_line(r, utc_now()) for r in items]
        if rows:
            sys.stdout.write(render_table([HEADER, *rows]))
        elif not args.watch:
            where = f"namespace {args.namespace}" if args.namespace else "any namespace"
            print(f"kerf status: kerf manages no workload in {where}", file=sys.stderr)
        if not args.watch:
            return 0
        if not rows:
            sys.stdout.write("  ".join(HEADER) + "\n")
        sys.stdout.flush()
        widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER) - 1)]
        async for kind, record in records.watch(args.namespace, version):
            line = status_line(record, utc_now())
            if kind == "DELETED":
                line[2:] = ["(deleted)"]
            sys.stdout.write(_padded(line, widths) + "\n")
            sys.stdout.flush()
    return 0


def _padded(row: list[str], widths: list[int]) -> str:
    """A watched line in the list's columns (a longer value moves the rest along)."""
    cells: list[Any] = [c.ljust(w) for c, w in zip(row, widths, strict=False)]
    cells.extend(row[len(widths) :])
    return "  ".join(cells).rstrip()
