"""`kerf certs`, `kerf webhook` and `kerf review`: arguments and commands for `kerf.cli`."""

from __future__ import annotations

import argparse
import difflib
import errno
import socket
import ssl
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonpatch
import jsonpointer
import orjson
import yaml

from app.kube.kubexflags import add_kubex_argument
from app.model.durations import DurationError, format_duration, parse_flag_duration
from webhook.defaults import (
    DEFAULT_HOST,
    DEFAULT_NAMESPACE,
    DEFAULT_PORT,
    DEFAULT_RELOAD_INTERVAL_S,
    DEFAULT_SERVICE,
    ConnectionLimits,
)
from webhook.review import decode_patch

if TYPE_CHECKING:
    from webhook.certs import CertificateAuthority


def add_certs_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `kerf certs`."""
    parser.add_argument("--service", default=DEFAULT_SERVICE, help="webhook Service name")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE, help="webhook namespace")
    parser.add_argument("--out", type=Path, required=True, help="directory for the PEM files")
    parser.add_argument(
        "--days", type=int, default=365, help="serving certificate validity in days"
    )
    parser.add_argument(
        "--ca-cert",
        type=Path,
        metavar="FILE",
        help="sign with this existing CA (PEM), so the caBundle stays the same; needs "
        "--ca-key (default: the CA in OUT/ca.crt and OUT/ca.key when both are there, else a "
        "new CA written there)",
    )
    parser.add_argument(
        "--ca-key",
        type=Path,
        metavar="FILE",
        help="the CA's private key (PEM; no default: it goes with --ca-cert)",
    )
    parser.add_argument(
        "--new-ca",
        action="store_true",
        help="replace the CA in OUT with a new one (the cluster's caBundle must then be "
        "updated: see docs/install.md)",
    )
    parser.add_argument(
        "--renew-if-expiring-within",
        type=_renewal_window,
        metavar="DURATION",
        help="for cron jobs: do nothing while OUT/tls.crt is valid longer than DURATION (a "
        "duration such as 720h or 30d); otherwise issue a new "
        "certificate from the CA (--ca-cert/--ca-key, default OUT/ca.crt and OUT/ca.key) "
        "(default: always issue)",
    )
    parser.add_argument(
        "--kustomize-patch",
        type=Path,
        metavar="FILE",
        help="also write a kustomize patch that sets the webhook's caBundle (default: none)",
    )


def _renewal_window(text: str) -> timedelta:
    """A duration, in days too (`30d`): certificates are reasoned about in days."""
    try:
        return parse_flag_duration(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _certificate_authority(args: argparse.Namespace) -> CertificateAuthority | None:
    """The CA to sign with: the one given, else OUT's own (re-running the install step or
    renewing keeps the caBundle the cluster trusts), else None (a new one: none in OUT, or
    `--new-ca`)."""
    from webhook.certs import CertificateError, load_certificate_authority

    if (args.ca_cert is None) != (args.ca_key is None):
        raise CertificateError("--ca-cert and --ca-key go together")
    if args.new_ca and args.ca_cert is not None:
        raise CertificateError("--new-ca and --ca-cert exclude each other")
    if args.ca_cert is not None:
        return load_certificate_authority(args.ca_cert, args.ca_key)
    if args.new_ca:
        return None
    cert, key = args.out / "ca.crt", args.out / "ca.key"
    if cert.is_file() and key.is_file():
        return load_certificate_authority(cert, key)
    if cert.is_file() or key.is_file():
        raise CertificateError(
            f"{args.out} holds only one of ca.crt and ca.key: restore the other, or replace "
            "the CA with --new-ca (a new CA would break the caBundle the cluster trusts)"
        )
    if args.renew_if_expiring_within is None:
        return None
    if not (cert.is_file() and key.is_file()):
        raise CertificateError(
            f"renewing needs the CA that the caBundle trusts: give --ca-cert and --ca-key, "
            f"or keep ca.crt and ca.key in {args.out} (a new CA would break the caBundle)"
        )
    return load_certificate_authority(cert, key)


def certs_command(args: argparse.Namespace) -> int:
    """Write ca.crt, tls.crt and tls.key (and ca.key for a new CA); print the caBundle.

    With `--renew-if-expiring-within` a certificate that is still valid long enough is
    left alone: the command says so on stderr, prints nothing on stdout and exits 0.
    """
    # Here, not at the top: the certificate code is not needed to build the parser.
    from webhook.certs import (
        CertificateError,
        expires_at,
        issue_certificates,
        kustomize_ca_bundle_patch,
        write_atomic,
        write_certificates,
    )

    if args.days < 1:
        print("kerf certs: --days must be at least 1", file=sys.stderr)
        return 2
    try:
        if args.renew_if_expiring_within is not None:
            current = args.out / "tls.crt"
            if current.is_file():
                until = expires_at(current)
                if until - datetime.now(UTC) > args.renew_if_expiring_within:
                    print(
                        f"kerf certs: {current} is valid until {until.isoformat()}, more than "
                        f"{_describe(args.renew_if_expiring_within)} from now: nothing to do",
                        file=sys.stderr,
                    )
                    return 0
        ca = _certificate_authority(args)
    except CertificateError as exc:
        print(f"kerf certs: {exc}", file=sys.stderr)
        return 2
    issued = issue_certificates(args.service, args.namespace, days=args.days, ca=ca)
    write_certificates(issued, args.out)
    if args.kustomize_patch is not None:
        write_atomic(args.kustomize_patch, kustomize_ca_bundle_patch(issued.ca_bundle).encode())
    if ca is None and args.new_ca:
        print(
            f"kerf certs: replaced the CA in {args.out} with a new one: the cluster's caBundle "
            "still names the old CA until you update it (docs/install.md, step 4)",
            file=sys.stderr,
        )
    signer = (
        "a new CA (ca.key written)" if ca is None else f"the CA {ca.cert.subject.rfc4514_string()}"
    )
    print(
        f"kerf certs: wrote ca.crt, tls.crt, tls.key to {args.out} "
        f"for {args.service}.{args.namespace}.svc, signed by {signer}",
        file=sys.stderr,
    )
    print(issued.ca_bundle)
    return 0


def _describe(window: timedelta) -> str:
    if window.seconds == 0 and window.microseconds == 0:
        return f"{window.days}d"
    return format_duration(window)


def add_webhook_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `kerf webhook`."""
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="serve from the YAML files in DIR instead of the cluster (default: watch the cluster)",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="without --state-dir: the cluster to watch (default $KUBECONFIG, else the "
        "pod's service account, else ~/.kube/config). While its API server cannot be "
        "reached the webhook keeps retrying, logs the outage when it starts, at most once a "
        "minute while it lasts and when it ends, and /readyz answers 503",
    )
    add_kubex_argument(parser)
    parser.add_argument("--tls-cert", type=Path, required=True, help="PEM certificate (chain)")
    parser.add_argument("--tls-key", type=Path, required=True, help="PEM private key")
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="HTTPS port")
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
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the lowest level logged",
    )
    defaults = ConnectionLimits()
    parser.add_argument(
        "--max-connections",
        type=int,
        default=defaults.max_connections,
        metavar="N",
        help="open connections at most; a new one beyond is closed at once",
    )
    parser.add_argument(
        "--read-timeout",
        type=float,
        default=defaults.read_timeout_s,
        metavar="SECONDS",
        help="time for a request's headers, and again for its body, to arrive (else 408)",
    )
    parser.add_argument(
        "--max-header-bytes",
        type=int,
        default=defaults.max_header_bytes,
        metavar="BYTES",
        help="size of a request line and headers at most (else 431)",
    )
    parser.add_argument(
        "--max-headers",
        type=int,
        default=defaults.max_headers,
        metavar="N",
        help="header fields per request at most (else 431)",
    )
    parser.add_argument(
        "--max-body-values",
        type=int,
        default=defaults.max_body_values,
        metavar="N",
        help="JSON values (counted as commas and opening brackets) per request body at most "
        "(else 413): bounds the parsing time of one request",
    )


def _limits(args: argparse.Namespace) -> ConnectionLimits | str:
    """The connection limits of the arguments, or a message naming the bad one."""
    for option, value in (
        ("--max-connections", args.max_connections),
        ("--read-timeout", args.read_timeout),
        ("--max-header-bytes", args.max_header_bytes),
        ("--max-headers", args.max_headers),
        ("--max-body-values", args.max_body_values),
    ):
        if not value > 0:
            return f"{option} must be positive, got {value}"
    return ConnectionLimits(
        max_connections=args.max_connections,
        read_timeout_s=args.read_timeout,
        max_header_bytes=args.max_header_bytes,
        max_headers=args.max_headers,
        max_body_values=args.max_body_values,
    )


def webhook_command(args: argparse.Namespace) -> int:
    """Serve the admission webhook until interrupted."""
    # The server, uvicorn and the cluster client load only for the command that runs them.
    from kubernetes_asyncio.config import ConfigException

    from webhook.main import run_webhook
    from webhook.tls import EncryptedKeyError

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
    limits = _limits(args)
    if isinstance(limits, str):
        print(f"kerf webhook: {limits}", file=sys.stderr)
        return 2
    if (busy := _port_in_use(args.host, args.port)) is not None:
        print(f"kerf webhook: --port {args.port} on {args.host}: {busy}", file=sys.stderr)
        return 2
    try:
        run_webhook(
            args.state_dir,
            args.tls_cert,
            args.tls_key,
            args.host,
            args.port,
            kubeconfig=args.kubeconfig,
            kubex_recommendations=args.kubex_recommendations,
            deadline_s=args.deadline,
            reload_interval_s=args.cert_reload_interval,
            log_level=args.log_level,
            limits=limits,
        )
    except ConfigException as exc:
        print(f"kerf webhook: cannot connect to the cluster: {exc}", file=sys.stderr)
        return 2
    except EncryptedKeyError as exc:
        print(f"kerf webhook: --tls-key {exc}", file=sys.stderr)
        return 2
    except ssl.SSLError as exc:
        print(
            f"kerf webhook: --tls-cert {args.tls_cert} and --tls-key {args.tls_key} "
            f"do not load as a pair: {exc}",
            file=sys.stderr,
        )
        return 2
    return 0


def _port_in_use(host: str, port: int) -> str | None:
    """Why `host:port` cannot be listened on (in use, or not an address here), else None:
    said in one line before the server starts, rather than after its start-up logs."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "in use: pick another with --port"
            return exc.strerror or str(exc)
    return None


def add_review_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `kerf review`."""
    parser.add_argument(
        "response",
        nargs="?",
        default="-",
        metavar="RESPONSE",
        help="the AdmissionReview answer (a file, or - for stdin)",
    )
    parser.add_argument(
        "--request",
        type=Path,
        required=True,
        metavar="FILE",
        help="the AdmissionReview request that was answered",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--diff", action="store_true", help="print a unified diff of the pod instead"
    )
    output.add_argument("--patch", action="store_true", help="print the decoded JSON patch instead")


class _ReviewInputError(ValueError):
    """Input `kerf review` cannot use; the message names the file and the problem."""


def _load_review(text: bytes, source: str) -> dict[str, Any]:
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise _ReviewInputError(f"{source}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("kind") != "AdmissionReview":
        raise _ReviewInputError(f"{source}: not an AdmissionReview")
    return doc


def _as_yaml(pod: Any) -> str:
    # Keep the API server's key order: a diff then shows kerf's additions where they land.
    return yaml.safe_dump(pod, sort_keys=False, default_flow_style=False, width=100)


def _describe_op(pod: Any, op: dict[str, Any]) -> str:
    """`# replace /spec/containers/0/resources/requests/cpu: 500m -> 250m` (diff preamble)."""
    value = orjson.dumps(op.get("value")).decode()
    if op.get("op") == "replace":
        old = jsonpointer.resolve_pointer(pod, op["path"], None)
        return f"# replace {op['path']}: {orjson.dumps(old).decode()} -> {value}\n"
    return f"# {op.get('op')} {op.get('path')}: {value}\n"


def review_command(args: argparse.Namespace) -> int:
    """Apply an AdmissionReview answer's patch to the pod of its request and show the result.

    The webhook answers with a base64 JSON patch, unreadable as it comes; this shows what
    the API server would create. Warnings and a refusal go to stderr, so stdout stays a
    clean YAML document (or diff, or patch) that can be piped on.
    """
    try:
        if args.response == "-":
            raw, source = sys.stdin.buffer.read(), "<stdin>"
        else:
            raw, source = Path(args.response).read_bytes(), args.response
        answer = _load_review(raw, source)
        request_doc = _load_review(args.request.read_bytes(), str(args.request))
        response = answer.get("response")
        request = request_doc.get("request")
        if not isinstance(response, dict):
            raise _ReviewInputError(f"{source}: has no response (is it the request?)")
        if not isinstance(request, dict) or not isinstance(request.get("object"), dict):
            raise _ReviewInputError(f"{args.request}: has no request.object")
        try:
            patch = decode_patch(answer)
        except (ValueError, orjson.JSONDecodeError) as exc:
            raise _ReviewInputError(
                f"{source}: response.patch is not base64 JSON ({exc})"
            ) from None
        pod = request["object"]
        try:
            patched = jsonpatch.apply_patch(pod, patch) if patch else pod
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise _ReviewInputError(
                f"the patch does not apply to {args.request}'s pod (another request?): {exc}"
            ) from None
    except OSError as exc:
        print(f"kerf review: {exc}", file=sys.stderr)
        return 2
    except _ReviewInputError as exc:
        print(f"kerf review: {exc}", file=sys.stderr)
        return 2
    if response.get("uid") != request.get("uid"):
        print(
            f"kerf review: warning: the answer's uid {response.get('uid')!r} is not the "
            f"request's {request.get('uid')!r}",
            file=sys.stderr,
        )
    for warning in response.get("warnings") or ():
        print(f"kerf review: webhook warning: {warning}", file=sys.stderr)
    if response.get("allowed") is False:
        message = (response.get("status") or {}).get("message", "")
        print(f"kerf review: the pod was DENIED: {message}", file=sys.stderr)
    if not patch:
        print("kerf review: no patch: the pod is admitted unchanged", file=sys.stderr)
    if args.patch:
        sys.stdout.write(orjson.dumps(patch, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif args.diff:
        # difflib pairs equal lines across requests and limits, which can make a changed
        # value look moved; one plain line per operation says exactly what changed.
        sys.stdout.writelines(_describe_op(pod, op) for op in patch)
        before, after = _as_yaml(pod), _as_yaml(patched)
        sys.stdout.writelines(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile=f"{args.request} (request)",
                tofile="patched",
            )
        )
    else:
        sys.stdout.write(_as_yaml(patched))
    return 0
