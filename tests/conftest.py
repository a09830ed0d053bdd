"""Hooks for the whole suite: the end-to-end scenarios end the session with a table of
their results.

They live here, not beside the tests they concern, because with pytest-xdist (`make test`
runs two workers) only the controller prints the summary, and it loads no conftest below
this one."""

from __future__ import annotations

import pytest

from tests.e2e.backends import selected

_RESULTS: list[tuple[str, str, str]] = []


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
