"""The end-to-end fixture: one backend (`KERF_E2E_BACKEND`, see backends.py) with kerf
installed and running, shared by the session; each test gets a namespace of its own (the
table of the scenarios' results is tests/conftest.py's)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from harness.services import Kerf, running_kerf
from tests.e2e.backends import selected_backend
from tests.e2e.scenario import Namespace, make_namespace

_COUNTER = itertools.count(1)


@pytest.fixture(scope="session")
def kerf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kerf]:
    """kerf on the selected backend."""
    with (
        selected_backend(tmp_path_factory, "e2e") as cluster,
        running_kerf(cluster, cluster.kubeconfig.parent) as running,
    ):
        yield running


@pytest.fixture
def ns(kerf: Kerf) -> Namespace:
    """A fresh namespace with the AutomationStrategy `default` (in place and eviction)."""
    return make_namespace(kerf, f"e2e-{next(_COUNTER)}")
