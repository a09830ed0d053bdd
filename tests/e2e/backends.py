"""The backend the end-to-end and conformance suites run on: `KERF_E2E_BACKEND` picks one
of `harness.backend`'s two (`kubesim` by default, `real` in `make e2e`); what differs
between them is said there and in `docs/devcluster.md`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

from harness.backend import BACKENDS, Backend, real_available, running_backend


def selected() -> str:
    """The backend `KERF_E2E_BACKEND` names (kubesim when unset)."""
    backend = os.environ.get("KERF_E2E_BACKEND", "kubesim")
    if backend not in BACKENDS:
        raise ValueError(f"KERF_E2E_BACKEND={backend!r}: one of {', '.join(BACKENDS)}")
    return backend


@contextlib.contextmanager
def selected_backend(tmp_path_factory: pytest.TempPathFactory, purpose: str) -> Iterator[Backend]:
    """The backend `KERF_E2E_BACKEND` selects, for a session fixture: skipped, naming
    `make cluster-tools`, when the real one is selected but not built."""
    kind = selected()
    if kind == "real" and not real_available():
        pytest.skip("the real control plane is not built: run make cluster-tools")
    with running_backend(kind, tmp_path_factory.mktemp(f"{purpose}-{kind}")) as cluster:
        yield cluster
