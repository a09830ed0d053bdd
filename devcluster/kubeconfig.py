"""Kubeconfig files with the CA and a client certificate embedded."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

from devcluster.certs import KeyPair


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def render(server: str, ca_cert: Path, client: KeyPair, user: str) -> str:
    """A kubeconfig for `server` as the holder of `client`, context `devcluster`."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "devcluster",
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(client.cert),
                    "client-key-data": _b64(client.key),
                },
            }
        ],
        "contexts": [{"name": "devcluster", "context": {"cluster": "devcluster", "user": user}}],
        "current-context": "devcluster",
    }
    return yaml.safe_dump(config, sort_keys=False)


def write(path: Path, text: str) -> None:
    """Write a kubeconfig readable by its owner only (it holds a private key), atomically,
    so a reader polling for the file never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    partial.replace(path)
