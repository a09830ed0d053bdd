"""The steps a change takes to reach its target, and when each may go (seed guardrails.txt).

A decrease larger than `maxChangePercent` takes several steps, each at least one cooldown
after the last change. The steps here are the per-value rules themselves
(`apply_value_rules`) run again from each step's result, so the schedule shown is the one
the decisions will follow, as long as nothing else (a refusal, a window, a new
recommendation) intervenes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.policy.guardrails import NO_FACTS, GuardrailSettings, apply_value_rules


@dataclass(frozen=True, slots=True)
class ValueGoal:
    """One value on its way: where it is and where the policies want it."""

    field: str
    resource: str
    current: int | None
    target: int
    settings: GuardrailSettings
    tolerance_percent: int


@dataclass(frozen=True, slots=True)
class Schedule:
    """`steps` changes are left; the next may go at `next_at` (None: at once, no change
    holds it back); each later one at least one `cooldown` after the one before."""

    steps: int
    next_at: datetime | None
    cooldown: timedelta

    def step_at(self, index: int, now: datetime) -> datetime:
        """The earliest time of step `index` (0: the next one), seen at `now`."""
        first = self.next_at if self.next_at is not None and self.next_at > now else now
        return first + self.cooldown * index


def value_steps(goal: ValueGoal) -> list[int]:
    """The values one value takes, step after step, until the rules leave it (at its
    target, or within the tolerance of it). Empty: the value does not change."""
    values: list[int] = []
    current = goal.current
    while True:
        outcome = apply_value_rules(
            field=goal.field,
            resource=goal.resource,
            current=current,
            desired=goal.target,
            settings=goal.settings,
            tolerance_percent=goal.tolerance_percent,
            context=NO_FACTS,
        )
        if outcome.value is None or outcome.value == current:
            return values
        values.append(outcome.value)
        if outcome.value == goal.target or current is None:
            return values
        current = outcome.value


def schedule(
    goals: Iterable[ValueGoal], *, last_change: datetime | None, cooldown: timedelta
) -> Schedule:
    """The remaining schedule of a change whose values move together: as many steps as
    the value that needs the most, the next one a cooldown after the last change."""
    steps = max((len(value_steps(g)) for g in goals), default=0)
    next_at = last_change + cooldown if last_change is not None and steps else None
    return Schedule(steps, next_at, cooldown)
