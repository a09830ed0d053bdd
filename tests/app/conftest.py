"""`checks_only_read`: the decision tests that use it fail when a check changes the
decision it reads (a check returns a `Result`; only the runner applies it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from app.decide import checks
from app.decide.context import Context, Result


def _state(ctx: Context) -> tuple[Any, ...]:
    """Everything of the decision a check could change, by value and by identity."""
    return (
        id(ctx.actions),
        [(a.target, a.current, a.desired, id(a.partner)) for a in ctx.actions],
        list(ctx.dropped),
        list(ctx.filtered),
        ctx.method,
        ctx.proposal,
        ctx.approved_id,
        ctx.strategy_facts,
        ctx.has_restores,
    )


def _only_reads(check: checks.Check) -> checks.Check:
    decide = check.decide

    def guarded(ctx: Context) -> Result:
        before = _state(ctx)
        result = decide(ctx)
        assert _state(ctx) == before, f"{check.reasons[0]} changed the decision it read"
        return result

    return replace(check, decide=guarded)


@pytest.fixture
def checks_only_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for path, table in checks._BY_PATH.items():
        monkeypatch.setitem(checks._BY_PATH, path, tuple(_only_reads(c) for c in table))
    yield
