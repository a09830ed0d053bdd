"""`app.runtime.jsonlog.log_time`: a line's `ts` spelled exactly as `datetime` spells it."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import example, given
from hypothesis import strategies as st

from app.runtime.jsonlog import log_time


def _by_datetime(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="milliseconds")


@given(st.floats(min_value=-(2**31), max_value=2**33, allow_nan=False, allow_infinity=False))
@example(1796161687.9995)  # rounds to .999500: cut to .999, not .000 of the next second
@example(1796161687.9999996)  # rounds up to the next second
@example(86399.9999996)  # ... and the next day
@example(1796161687.0004999)
@example(0.0)
@example(-0.5)  # before 1970: the fraction is negative
def test_log_time_is_datetimes_spelling(unix: float) -> None:
    assert log_time(unix) == _by_datetime(unix)


def test_log_time_within_one_second_keeps_the_second() -> None:
    base = 1796161687.0
    assert [log_time(base + ms / 1000) for ms in (0, 1, 999)] == [
        "2026-12-01T21:48:07.000+00:00",
        "2026-12-01T21:48:07.001+00:00",
        "2026-12-01T21:48:07.999+00:00",
    ]
