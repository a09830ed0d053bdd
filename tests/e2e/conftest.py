"""The end-to-end fixture: one backend (`KERF_E2E_BACKEND`, see backends.py) with kerf
installed and running, shared by the session; each test gets a namespace of its own. The
session ends with a table of the scenarios and their results."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from harness.services import Kerf, running_kerf
from tests.e2e.backends import selected, selected_backend
from tests.e2e.scenario import Namespace, make_namespace

_RESULTS: list[tuple[str, str, str]] = []
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


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    finished = report.when == "call" or (report.when == "setup" and report.outcome != "passed")
    if finished and "tests/e2e/" in report.nodeid:
        _RESULTS.append((report.nodeid.split("::")[-1], selected(), report.outcome))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _RESULTS:
        return
    width = max(len(name) for name, _, _ in _RESULTS)
    terminalreporter.write_sep("=", "end-to-end scenarios")
    terminalreporter.write_line(f"{'scenario'.ljust(width)}  backend  result")
    for name, backend, outcome in _RESULTS:
        terminalreporter.write_line(f"{name.ljust(width)}  {backend.ljust(7)}  {outcome}")
