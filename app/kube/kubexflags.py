"""`--kubex-recommendations [NAMESPACE/]NAME`: where the services that decide (`kerf
webhook`, `kerf reconciler`) read Kubex's recommendation file; the same name, default and
rules for both."""

from __future__ import annotations

import argparse
import re

from app.model.kubex_rows import DEFAULT_CONFIGMAP

#: A namespace (DNS label) and a ConfigMap name (DNS subdomain), as the API server checks them.
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?")

#: The flag's value: (namespace, or None for kerf's own; name).
KubexFlag = tuple[str | None, str]
DEFAULT_FLAG: KubexFlag = (None, DEFAULT_CONFIGMAP)


def parse_kubex_source(text: str) -> KubexFlag:
    """(namespace or None for kerf's own, name) of `[NAMESPACE/]NAME`."""
    namespace, _, name = text.rpartition("/")
    if namespace and not _NAMESPACE.fullmatch(namespace):
        raise argparse.ArgumentTypeError(f"{namespace!r} is not a namespace name")
    if not _NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(f"{name!r} is not a ConfigMap name")
    return namespace or None, name


def add_kubex_argument(parser: argparse.ArgumentParser) -> None:
    """`--kubex-recommendations`."""
    parser.add_argument(
        "--kubex-recommendations",
        type=parse_kubex_source,
        default=DEFAULT_FLAG,
        metavar="[NAMESPACE/]NAME",
        help="the ConfigMap of Kubex's recommendation file (its local-recommendations "
        f"mode; read beside kerf's labelled ones) (default: {DEFAULT_CONFIGMAP} in kerf's "
        "namespace)",
    )


def kubex_source(flag: KubexFlag, own_namespace: str) -> tuple[str, str]:
    """(namespace, name) the flag names, kerf's namespace when it names none."""
    namespace, name = flag
    return namespace or own_namespace, name
