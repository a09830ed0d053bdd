"""`kerf certs` and `kerf webhook`: argument definitions and commands for `app.cli`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kubernetes_asyncio.config import ConfigException

from webhook.certs import (
    DEFAULT_NAMESPACE,
    DEFAULT_SERVICE,
    issue_certificates,
    kustomize_ca_bundle_patch,
    write_atomic,
    write_certificates,
)
from webhook.main import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_RELOAD_INTERVAL_S, run_webhook


def add_certs_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `kerf certs`."""
    parser.add_argument("--service", default=DEFAULT_SERVICE, help="webhook Service name")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE, help="webhook namespace")
    parser.add_argument("--out", type=Path, required=True, help="directory for the PEM files")
    parser.add_argument("--days", type=int, default=365, help="serving certificate validity")
    parser.add_argument(
        "--kustomize-patch",
        type=Path,
        metavar="FILE",
        help="also write a kustomize patch that sets the webhook's caBundle",
    )


def certs_command(args: argparse.Namespace) -> int:
    """Write ca.crt, tls.crt and tls.key; print the base64 caBundle on stdout."""
    if args.days < 1:
        print("kerf certs: --days must be at least 1", file=sys.stderr)
        return 2
    issued = issue_certificates(args.service, args.namespace, days=args.days)
    write_certificates(issued, args.out)
    if args.kustomize_patch is not None:
        write_atomic(args.kustomize_patch, kustomize_ca_bundle_patch(issued.ca_bundle).encode())
    print(
        f"kerf certs: wrote ca.crt, tls.crt, tls.key to {args.out} "
        f"for {args.service}.{args.namespace}.svc",
        file=sys.stderr,
    )
    print(issued.ca_bundle)
    return 0


def add_webhook_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `kerf webhook`."""
    parser.add_argument(
        "--state-dir", type=Path, help="serve from the YAML files in DIR instead of the cluster"
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="without --state-dir: the cluster to watch (default $KUBECONFIG, else the "
        "pod's service account, else ~/.kube/config)",
    )
    parser.add_argument("--tls-cert", type=Path, required=True, help="PEM certificate (chain)")
    parser.add_argument("--tls-key", type=Path, required=True, help="PEM private key")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument(
        "--deadline",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="time budget of one decision; past it the pod is admitted unchanged",
    )
    parser.add_argument(
        "--cert-reload-interval",
        type=float,
        default=DEFAULT_RELOAD_INTERVAL_S,
        metavar="SECONDS",
        help="how often the TLS files are checked for new content",
    )
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )


def webhook_command(args: argparse.Namespace) -> int:
    """Serve the admission webhook until interrupted."""
    files = [
        ("--tls-cert", args.tls_cert, " (see `kerf certs`)"),
        ("--tls-key", args.tls_key, " (see `kerf certs`)"),
    ]
    if args.state_dir is None and args.kubeconfig is not None:
        files.append(("--kubeconfig", args.kubeconfig, ""))
    for option, path, hint in files:
        if not path.is_file():
            print(f"kerf webhook: {option} {path}: no such file{hint}", file=sys.stderr)
            return 2
    try:
        run_webhook(
            args.state_dir,
            args.tls_cert,
            args.tls_key,
            args.host,
            args.port,
            kubeconfig=args.kubeconfig,
            deadline_s=args.deadline,
            reload_interval_s=args.cert_reload_interval,
            log_level=args.log_level,
        )
    except ConfigException as exc:
        print(f"kerf webhook: cannot connect to the cluster: {exc}", file=sys.stderr)
        return 2
    return 0
