"""The span of time over which a decision's comparisons with the clock keep their answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from app.model.horizon import TICK, Horizon

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_before_narrows_the_end_when_true_and_the_start_when_false() -> None:
    h = Horizon(NOW)
    assert h.before(NOW + HOUR) and h.before(NOW + 2 * HOUR)
    assert not h.before(NOW - HOUR) and not h.before(NOW)
    assert (h.start, h.end) == (NOW, NOW + HOUR)
    assert h.holds(NOW + HOUR - TICK) and not h.holds(NOW + HOUR) and not h.holds(NOW - TICK)


def test_elapsed_over_is_strict() -> None:
    since, span = NOW - 5 * 24 * HOUR, timedelta(days=5)
    h = Horizon(NOW)
    assert not h.elapsed_over(since, span)  # exactly the span: not over
    assert h.holds(NOW) and not h.holds(NOW + TICK)
    later = Horizon(NOW + TICK)
    assert later.elapsed_over(since, span)
    assert later.holds(NOW + TICK) and later.holds(NOW + HOUR) and not later.holds(NOW)


def test_other_offsets_are_exact() -> None:
    plus_two = timezone(timedelta(hours=2))
    since = datetime(2026, 11, 26, 14, 0, tzinfo=plus_two)  # 12:00 UTC
    h = Horizon(NOW)
    assert not h.elapsed_over(since, timedelta(days=5))
    assert h.end == NOW + TICK


def test_a_zone_with_daylight_saving_pins_the_span() -> None:
    since = datetime(2026, 11, 26, 13, 0, tzinfo=ZoneInfo("Europe/Paris"))
    h = Horizon(NOW)
    h.elapsed_over(since, timedelta(days=5))
    assert h.holds(NOW) and not h.holds(NOW + TICK) and not h.holds(NOW - TICK)


def test_an_instant_past_the_last_datetime_pins_the_span() -> None:
    h = Horizon(NOW)
    assert not h.elapsed_over(NOW, timedelta.max)
    assert h.holds(NOW) and not h.holds(NOW + TICK)


OFFSETS = st.integers(-(10**7), 10**7).map(lambda us: timedelta(microseconds=us))


@given(st.lists(st.tuples(st.booleans(), OFFSETS, OFFSETS), max_size=6), OFFSETS)
def test_every_answer_holds_wherever_the_span_does(
    comparisons: list[tuple[bool, timedelta, timedelta]], shift: timedelta
) -> None:
    """At any time inside the span, each comparison gives the answer it gave at `now`."""
    h = Horizon(NOW)
    answers = []
    for elapsed, a, b in comparisons:
        if elapsed:
            answers.append(h.elapsed_over(NOW + a, abs(b)))
        else:
            answers.append(h.before(NOW + a))
    later = NOW + shift
    if h.holds(later):
        again = Horizon(later)
        for (elapsed, a, b), answer in zip(comparisons, answers, strict=True):
            if elapsed:
                assert again.elapsed_over(NOW + a, abs(b)) == answer
            else:
                assert again.before(NOW + a) == answer


def test_until_spans_from_now_to_the_instant() -> None:
    h = Horizon(NOW)
    assert not h.before(NOW - HOUR)
    h.until(NOW + HOUR)
    assert (h.start, h.end, h.next_change()) == (NOW, NOW + HOUR, NOW + HOUR)


def test_a_pinned_span_says_nothing_about_when_it_changes() -> None:
    h = Horizon(NOW)
    h.before(NOW + HOUR)
    h.until(None)  # no end known
    assert h.pinned and h.next_change() is None and h.holds(NOW) and not h.holds(NOW + TICK)


def test_an_unbounded_span_never_changes() -> None:
    assert Horizon(NOW).next_change() is None
