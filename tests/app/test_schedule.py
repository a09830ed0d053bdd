"""The schedule of a stepped change: how many steps, when the next, each a cooldown apart."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from app.model.quantities import MIB
from app.policy.guardrails import NO_FACTS, apply_value_rules, decrease_floor, resolve_guardrails
from app.policy.schedule import Schedule, ValueGoal, schedule, value_steps

DEFAULTS = resolve_guardrails(None, None)
NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
DAY = timedelta(hours=24)


def cpu(current: int | None, target: int, percent: int = 50, tolerance: int = 5) -> ValueGoal:
    return ValueGoal(
        "requests",
        "cpu",
        current,
        target,
        replace(DEFAULTS, max_change_percent=percent),
        tolerance,
    )


def test_one_cpu_down_to_200m_takes_three_steps() -> None:
    # The example: 1 CPU to 200m at the default 50 % step.
    assert value_steps(cpu(1000, 200)) == [500, 250, 200]
    planned = schedule([cpu(1000, 200)], last_change=None, cooldown=DAY)
    assert (planned.steps, planned.next_at) == (3, None)
    assert [planned.step_at(i, NOW) for i in range(3)] == [NOW, NOW + DAY, NOW + 2 * DAY]


def test_the_next_step_waits_for_the_cooldown_of_the_last_change() -> None:
    last = NOW - timedelta(hours=6)
    planned = schedule([cpu(500, 200)], last_change=last, cooldown=DAY)
    assert (planned.steps, planned.next_at) == (2, last + DAY)
    assert planned.step_at(1, NOW) == last + 2 * DAY
    # A cooldown long past: the next step may go now.
    assert planned.step_at(0, NOW + 3 * DAY) == NOW + 3 * DAY


def test_values_move_together_so_the_slowest_sets_the_count() -> None:
    memory = ValueGoal("requests", "memory", 1024 * MIB, 768 * MIB, DEFAULTS, 5)
    assert value_steps(memory) == [768 * MIB]
    assert schedule([memory, cpu(1000, 100)], last_change=None, cooldown=DAY).steps == 4


def test_increases_and_new_values_take_one_step_and_small_changes_none() -> None:
    assert value_steps(cpu(100, 4000)) == [4000]
    assert value_steps(cpu(None, 250)) == [250]
    assert value_steps(cpu(1000, 980)) == []
    assert schedule([cpu(1000, 980)], last_change=NOW, cooldown=DAY) == Schedule(0, None, DAY)


def test_the_minimum_and_the_tolerance_end_the_steps_short_of_the_target() -> None:
    assert value_steps(cpu(100, 1)) == [50, 25, 13, 10]  # minCPU 10m
    # 5 % tolerance: 105m does not go to 100m.
    assert value_steps(cpu(420, 100)) == [210, 105]


@settings(max_examples=200, deadline=None)
@given(
    current=st.integers(1, 64_000),
    target=st.integers(1, 64_000),
    percent=st.integers(1, 100),
    tolerance=st.integers(0, 20),
)
def test_each_step_is_one_the_guardrails_allow(
    current: int, target: int, percent: int, tolerance: int
) -> None:
    goal = cpu(current, target, percent, tolerance)
    values = value_steps(goal)
    before = current
    for value in values:
        # Each step is what the decision itself would allow from the value before it.
        allowed = apply_value_rules(
            field="requests",
            resource="cpu",
            current=before,
            desired=target,
            settings=goal.settings,
            tolerance_percent=tolerance,
            context=NO_FACTS,
        )
        assert allowed.value == value
        assert value >= decrease_floor(before, percent, "cpu")
        # Toward the target (or the minimum, 10m), never past it.
        aim = max(target, 10)
        assert min(before, aim) <= value <= max(before, aim)
        before = value
    # After the last step nothing is left to do.
    assert value_steps(replace(goal, current=before)) == []


@settings(max_examples=100, deadline=None)
@given(
    currents=st.lists(st.integers(10, 64_000), min_size=1, max_size=4),
    target=st.integers(10, 64_000),
    hours=st.integers(1, 400),
    ago=st.integers(0, 400),
)
def test_steps_are_a_cooldown_apart_and_the_first_not_before_the_cooldown(
    currents: list[int], target: int, hours: int, ago: int
) -> None:
    cooldown = timedelta(hours=hours)
    last = NOW - timedelta(hours=ago)
    planned = schedule([cpu(c, target) for c in currents], last_change=last, cooldown=cooldown)
    assert planned.steps == max(len(value_steps(cpu(c, target))) for c in currents)
    times = [planned.step_at(i, NOW) for i in range(planned.steps)]
    if times:
        assert times[0] >= max(NOW, last + cooldown)
    assert all(b - a == cooldown for a, b in zip(times, times[1:], strict=False))
