"""The `kerf` command line: explain, report, cleanup and completion over `app`, and the
services' entry points (`webhook`, `reconciler`, `recommender`), which only this module
puts together."""

from __future__ import annotations

import argparse
import csv
import io
import os
import signal
import sys
from collections.abc import Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from app.kube.apitimeout import add_api_timeout_argument
from app.kube.kubexflags import add_kubex_argument, kubex_source
from app.runtime.clock import utc_now
from kerf.cleanup import CleanupInputError, annotate_commands
from kerf.completion import SHELLS, completion_script

if TYPE_CHECKING:
    from app.outcome.report import Prices, Report


def _now(text: str | None) -> datetime:
    if text is None:
        return utc_now()
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--now {text!r} is not an RFC3339 time") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"--now {text!r} needs a time zone (e.g. Z)")
    return value


def explain_command(args: argparse.Namespace) -> int:
    """`kerf explain`: print the decision for every pod of the given files or of the
    cluster, or of one namespace or workload."""
    # The decisions and the models load in the commands that decide: not for --help,
    # completion or cleanup.
    from app.outcome.explain import Selection, explain, render_text

    selection = Selection.parse(args.namespace, args.workload)
    now = _now(args.now)
    kubex = kubex_source(args.kubex_recommendations, "kerf-system")
    if args.kubeconfig:
        # The cluster client loads only when a cluster is listed.
        from app.kube.snapshot import cluster_snapshot

        view = cluster_snapshot(args.kubeconfig, args.api_timeout, kubex)
    else:
        from app.store.statedir import load_view

        view = load_view(args.file, kubex_source=kubex, now=now)
    result = explain(view, now=now, forced=args.for_, selection=selection)
    if args.output == "json":
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render_text(result))
    for warning in view.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _price(flag: str, text: str | None) -> float:
    if text is None:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{flag} {text!r} is not a price (a number >= 0)")
    return value


def report_command(args: argparse.Namespace) -> int:
    """`kerf report`: requests now, recommended and applied, reclaimable, monthly cost."""
    from app.outcome.report import Prices, build_report, report_json
    from app.store.statedir import load_view

    prices = None
    if args.cpu_price is not None or args.memory_price is not None:
        prices = Prices(
            _price("--cpu-price", args.cpu_price),
            _price("--memory-price", args.memory_price),
            _currency(args.currency),
        )
    now = _now(args.now)
    if args.kubeconfig:
        # The cluster client loads only when a cluster is listed.
        from app.kube.snapshot import cluster_snapshot

        view = cluster_snapshot(args.kubeconfig, args.api_timeout)
    else:
        view = load_view(args.file, now=now)
    report = build_report(view, now=now)
    if args.output == "json":
        body = orjson.dumps(report_json(report, prices), option=orjson.OPT_INDENT_2)
        sys.stdout.write(body.decode() + "\n")
    elif args.output == "html":
        from kerf.report_html import render_html

        sys.stdout.write(render_html(report, prices, now=now))
    else:
        sys.stdout.write(_report_text(args.output, report, prices))
    for warning in view.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _report_text(output: str, report: Report, prices: Prices | None) -> str:
    from kerf.report_table import (
        TABLE_WIDTH,
        csv_rows,
        render_markdown,
        render_table,
        table_rows,
    )

    if output == "csv":
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(csv_rows(report, prices))
        return buffer.getvalue()
    if output == "markdown":
        return render_markdown(report, prices)
    if output == "wide":
        return render_table(table_rows(report, prices, wide=True))
    return render_table(table_rows(report, prices), TABLE_WIDTH)


def _currency(text: str) -> str:
    label = text.strip()
    if not label or len(label) > 8 or any(c in label for c in "<>&\"'|"):
        raise argparse.ArgumentTypeError(
            f"--currency {text!r} is not a currency label (1 to 8 characters, such as EUR)"
        )
    return label


def _add_explain_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help="print the decision for every pod, from YAML files or the cluster (read-only)",
        description="The decision for every pod, through the code the services run: from "
        "YAML files (-f; documents of kinds kerf does not read are skipped and counted), "
        "from `kubectl kustomize DIR` on standard input (-f -), or listed once from a "
        "cluster (--kubeconfig; nothing is written).",
    )
    p.add_argument(
        "workload",
        nargs="?",
        metavar="WORKLOAD",
        help="only this workload's pods: NAME or KIND/NAME (deployment/web), in every "
        "namespace unless -n names one (default: every pod)",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "-f",
        "--file",
        action="append",
        metavar="PATH",
        help="a YAML file, a directory of YAML files, or - for standard input (repeatable); "
        "one of -f and --kubeconfig is required, no default",
    )
    source.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="list the cluster of this kubeconfig once, read-only (default: -f files)",
    )
    p.add_argument(
        "-n", "--namespace", metavar="NS", help="only this namespace's pods (default: all)"
    )
    add_api_timeout_argument(
        p,
        "with --kubeconfig: how long listing the cluster may take; past it, or at the "
        "first error, the command exits 2 with one line naming the API server",
    )
    p.add_argument(
        "--for",
        dest="for_",
        choices=("admission", "running"),
        default=None,
        help="decide every pod as new (admission) or running; default: by pod state",
    )
    p.add_argument(
        "--now",
        default=None,
        metavar="RFC3339",
        help="the time to decide at, which the files' relative times (${now-24h}) count "
        "from (default: now)",
    )
    p.add_argument("-o", "--output", choices=("json", "text"), default="json", help="output format")
    add_kubex_argument(p)
    p.set_defaults(handler=explain_command)


def _add_report_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="what kerf saves: requests now, recommended and applied, per workload",
        description="Per workload and container, per namespace and for the cluster: CPU and "
        "memory requested now, with the recommendations, and with what kerf applies through "
        "its guardrails; what kerf saved and what is still reclaimable; an upsize as a cost "
        "with its reason; why nothing is applied; with prices, the monthly cost (730 hours). "
        "-o html writes one self-contained page to share.",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "-f",
        "--file",
        action="append",
        metavar="PATH",
        help="a YAML file or a directory of YAML files, as for explain (repeatable); "
        "one of -f and --kubeconfig is required, no default",
    )
    source.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="list the cluster of this kubeconfig once (default: -f files)",
    )
    add_api_timeout_argument(
        p,
        "with --kubeconfig: how long listing the cluster may take; past it, or at the "
        "first error, the command exits 2 with one line naming the API server",
    )
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "wide", "csv", "json", "markdown", "html"),
        default="table",
        help="output format: table (120 columns), wide (every column), csv, json, markdown, "
        "or html (one self-contained file: kerf report -o html > report.html)",
    )
    p.add_argument(
        "--currency",
        default="USD",
        metavar="LABEL",
        help="the unit of the prices, shown beside every cost",
    )
    p.add_argument(
        "--cpu-price",
        metavar="P",
        help="price of one CPU core for one hour (default: no costs; 0 with --memory-price)",
    )
    p.add_argument(
        "--memory-price",
        metavar="P",
        help="price of one GiB of memory for one hour (default: no costs; 0 with --cpu-price)",
    )
    p.add_argument(
        "--now",
        default=None,
        metavar="RFC3339",
        help="the time to decide at, which the files' relative times (${now-24h}) count "
        "from (default: now)",
    )
    p.set_defaults(handler=report_command)


def completion_command(args: argparse.Namespace) -> int:
    """`kerf completion SHELL`: print the completion script."""
    sys.stdout.write(completion_script(build_parser(), args.shell))
    return 0


def _version() -> str:
    try:
        return version("kerf")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default in `--help`.

    A default of None or False means "not given"; such an option's help text says itself
    what happens without it, so "(default: None)" is not printed.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand; each subcommand's --help shows defaults."""
    parser = argparse.ArgumentParser(prog="kerf", description="Kubernetes pod rightsizer")
    parser.add_argument("--version", action="version", version=f"kerf {_version()}")
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=_subcommand_parser_class()
    )
    _add_explain_command(sub)
    cleanup = sub.add_parser(
        "cleanup",
        help="after uninstalling: print kubectl commands removing kerf's workload annotations",
        description="Reads `kubectl get deployments,statefulsets,daemonsets,jobs,cronjobs -A "
        "-o json` on stdin; prints one `kubectl annotate` command per object that carries "
        "annotations kerf wrote (pipe them to sh to run them).",
    )
    cleanup.set_defaults(handler=cleanup_command)
    _add_report_command(sub)
    from kerf.approve import add_approve_command
    from kerf.status import add_status_command

    add_approve_command(sub)
    add_status_command(sub)
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh)",
        description="bash: `source <(kerf completion bash)`; zsh: `source <(kerf completion "
        "zsh)` (through zsh's bashcompinit). Add the line to ~/.bashrc or ~/.zshrc to keep it.",
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell")
    completion.set_defaults(handler=completion_command)
    _add_service_commands(sub)
    return parser


def cleanup_command(args: argparse.Namespace) -> int:
    """`kerf cleanup`: print the commands that remove kerf's annotations (see kerf.cleanup)."""
    try:
        listing = orjson.loads(sys.stdin.buffer.read())
        if not isinstance(listing, dict):
            raise CleanupInputError("expected a kubectl List (kubectl get ... -o json)")
        commands = list(annotate_commands(listing))
    except (orjson.JSONDecodeError, CleanupInputError) as exc:
        print(f"kerf cleanup: stdin: {exc}", file=sys.stderr)
        return 2
    for command in commands:
        print(command)
    print(f"kerf cleanup: {len(commands)} object(s) carry kerf annotations", file=sys.stderr)
    return 0


def _subcommand_parser_class() -> type[argparse.ArgumentParser]:
    class SubcommandParser(argparse.ArgumentParser):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("formatter_class", HelpFormatter)
            super().__init__(*args, **kwargs)

    return SubcommandParser


def _add_service_commands(sub: argparse._SubParsersAction) -> None:
    """`kerf certs`, `kerf webhook`, `kerf reconciler`, `kerf review` and `kerf recommend`;
    their code lives with the service packages."""
    from webhook import cli as webhook_cli

    certs = sub.add_parser("certs", help="create a CA and a serving certificate")
    webhook_cli.add_certs_arguments(certs)
    certs.set_defaults(handler=webhook_cli.certs_command)
    serve = sub.add_parser("webhook", help="serve the mutating admission webhook over TLS")
    webhook_cli.add_webhook_arguments(serve)
    serve.set_defaults(handler=webhook_cli.webhook_command)
    from reconciler import cli as reconciler_cli

    reconcile = sub.add_parser(
        "reconciler", help="resize running pods in place, publish values, report status"
    )
    reconciler_cli.add_reconciler_arguments(reconcile)
    reconcile.set_defaults(handler=reconciler_cli.reconciler_command)
    review = sub.add_parser(
        "review", help="show the pod an AdmissionReview answer makes (YAML, diff or patch)"
    )
    webhook_cli.add_review_arguments(review)
    review.set_defaults(handler=webhook_cli.review_command)
    from recommender import cli as recommender_cli

    recommend = sub.add_parser(
        "recommend",
        help="compute recommendation rows from Prometheus history and store them",
        description="Reads usage history from Prometheus for every workload of the cluster "
        "(or of --state-dir) and writes the rows kerf's ProactivePolicies apply into a "
        "labelled ConfigMap per namespace (docs/recommender.md).",
    )
    recommender_cli.add_recommend_arguments(recommend)
    recommend.set_defaults(handler=recommender_cli.recommend_command)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kerf` console script; user errors exit 2 with one line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = int(args.handler(args))
        # Flushed here, not at exit, so a reader that went away is handled below.
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _reader_went_away()
    except _user_errors() as exc:
        print(f"kerf {args.command}: {exc}", file=sys.stderr)
        return 2


def _user_errors() -> tuple[type[Exception], ...]:
    """The errors of a user's input, said in one line. Evaluated only once an exception is
    raised: they come with the models and the cluster client, which most commands never
    load."""
    from app.kube.snapshot import SnapshotError
    from app.model.crd import InvalidObject
    from app.outcome.explain import SelectionError
    from app.store.statedir import LoadError

    return (LoadError, InvalidObject, SnapshotError, SelectionError, argparse.ArgumentTypeError)


def _reader_went_away() -> int:
    """`kerf review ... | head -1`: the reader closed the pipe. Stop quietly, as cat or git
    do, with their status (128 + SIGPIPE). What is still buffered for stdout goes to
    /dev/null, or the interpreter would fail again flushing it at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE
