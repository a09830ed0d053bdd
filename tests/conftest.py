"""Hooks for the whole suite: the long files start first, and the end-to-end scenarios end
the session with a table of their results.

Both live here, not beside the tests they concern, because with pytest-xdist (`make test`
runs two workers) only the controller prints the summary, and it loads no conftest below
this one."""

from __future__ import annotations

import pytest

from tests.e2e.backends import scenario_backend

_RESULTS: list[tuple[str, str, str]] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files marked `early` (pyproject.toml's markers say why) first; each file's tests
    stay together and in their order."""
    items.sort(key=lambda item: item.get_closest_marker("early") is None)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    finished = report.when == "call" or (report.when == "setup" and report.outcome != "passed")
    if finished and "tests/e2e/" in report.nodeid:
        # kubesim, agent (the real control plane, the node agent) or kubelet (a real one)
        backend = scenario_backend(report.nodeid)
        _RESULTS.append((report.nodeid.split("::")[-1], backend, report.outcome))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _RESULTS:
        return
    width = max(len(name) for name, _, _ in _RESULTS)
    terminalreporter.write_sep("=", "end-to-end scenarios")
    terminalreporter.write_line(f"{'scenario'.ljust(width)}  backend  result")
    for name, backend, outcome in _RESULTS:
        terminalreporter.write_line(f"{name.ljust(width)}  {backend.ljust(7)}  {outcome}")
