from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.model.crd import Window
from app.model.windows import (
    SEARCH_DAYS,
    WindowError,
    WindowVerdict,
    freeze_verdict,
    maintenance_verdict,
    next_change,
    next_close,
    next_open,
    window_open,
)

NY = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def win(start: str, end: str, *days: str, tz: str = "UTC", name: str = "w") -> Window:
    data: dict[str, Any] = {"name": name, "start": start, "end": end, "weekdays": list(days)}
    if tz != "UTC":
        data["timezone"] = tz
    return Window.model_validate(data)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def at(day_offset: int, hour: int, minute: int = 0, second: int = 0) -> datetime:
    """UTC time ``day_offset`` days after Monday 2024-06-03."""
    return utc(2024, 6, 3 + day_offset, hour, minute, second)


OFFICE = win("09:00", "17:00", "Mon", "Tue", "Wed", "Thu", "Fri", name="office")


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (at(0, 9), True),  # start is inclusive
        (at(0, 8, 59, 59), False),
        (at(0, 16, 59, 59), True),
        (at(0, 17), False),  # end is exclusive
        (at(4, 12), True),  # Friday
        (at(5, 12), False),  # Saturday
        (at(6, 12), False),  # Sunday
    ],
)
def test_weekday_window(now: datetime, expected: bool) -> None:
    assert window_open(OFFICE, now) is expected


def test_empty_weekdays_means_every_day() -> None:
    daily = win("01:00", "02:00")
    assert all(window_open(daily, at(d, 1, 30)) for d in range(7))
    assert not any(window_open(daily, at(d, 2)) for d in range(7))


def test_time_zone() -> None:
    tokyo = win("09:00", "17:00", tz="Asia/Tokyo")  # UTC+9, no DST
    assert window_open(tokyo, at(0, 0, 30))  # 09:30 in Tokyo
    assert not window_open(tokyo, at(0, 8, 30))  # 17:30 in Tokyo
    # The same instant expressed in another zone gives the same answer.
    assert window_open(tokyo, at(0, 0, 30).astimezone(NY))


def test_weekday_is_local_to_the_window_zone() -> None:
    # Monday 01:00 in Tokyo is still Sunday in UTC.
    tokyo_monday = win("00:00", "06:00", "Mon", tz="Asia/Tokyo")
    sunday_utc = at(-1, 16, 30)
    assert window_open(tokyo_monday, sunday_utc)
    assert not window_open(win("00:00", "06:00", "Mon"), sunday_utc)


def test_end_24_00() -> None:
    late = win("22:00", "24:00", "Mon")
    assert window_open(late, at(0, 23, 59, 59))
    assert not window_open(late, at(1, 0))
    assert not window_open(late, at(0, 21, 59))
    assert next_close(late, at(0, 23)) == at(1, 0)
    assert next_open(late, at(1, 0)) == at(7, 22)


def test_end_00_00_means_midnight() -> None:
    late = win("22:00", "00:00", "Mon")
    assert window_open(late, at(0, 23, 59))
    assert not window_open(late, at(1, 0))
    assert next_close(late, at(0, 22)) == at(1, 0)


def test_all_day() -> None:
    weekend = win("00:00", "24:00", "Sat", "Sun")
    assert window_open(weekend, at(5, 0))
    assert window_open(weekend, at(6, 23, 59))
    assert not window_open(weekend, at(7, 0))
    assert next_close(weekend, at(5, 3)) == at(7, 0)


def test_across_midnight_uses_weekday_of_start() -> None:
    night = win("22:00", "06:00", "Fri")
    assert window_open(night, at(4, 22))  # Fri 22:00
    assert window_open(night, at(5, 3))  # Sat 03:00 belongs to Friday's window
    assert not window_open(night, at(5, 6))  # Sat 06:00 closed
    assert not window_open(night, at(4, 3))  # Fri 03:00 belongs to Thursday: not listed
    assert not window_open(night, at(5, 22))  # Sat 22:00: Saturday not listed
    assert not window_open(night, at(6, 3))
    assert next_open(night, at(5, 6)) == at(11, 22)
    assert next_close(night, at(4, 23)) == at(5, 6)


def test_next_open_is_now_when_open() -> None:
    now = at(0, 10, 15, 7)
    assert next_open(OFFICE, now) == now
    assert next_close(OFFICE, at(0, 18)) == at(0, 18)


def test_next_open_earliest() -> None:
    assert next_open(OFFICE, at(0, 17)) == at(1, 9)
    assert next_open(OFFICE, at(4, 17)) == at(7, 9)  # Friday evening → Monday
    assert next_open(OFFICE, at(0, 8)) == at(0, 9)
    assert next_close(OFFICE, at(0, 9)) == at(0, 17)


def test_next_open_keeps_callers_zone() -> None:
    now = at(0, 17).astimezone(NY)
    got = next_open(OFFICE, now)
    assert got == at(1, 9)
    assert got is not None and got.tzinfo is NY


def test_never_opens_within_search() -> None:
    assert next_close(win("00:00", "24:00"), at(0, 0)) is None
    assert SEARCH_DAYS == 8


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        window_open(OFFICE, datetime(2024, 6, 3, 10))


def test_invalid_zone_is_a_clear_error() -> None:
    bad = Window.model_construct(
        name="x", timezone="Mars/Olympus", weekdays=[], start="01:00", end="02:00"
    )
    with pytest.raises(WindowError, match="'x'.*Mars/Olympus"):
        window_open(bad, at(0, 0))


@pytest.mark.parametrize(
    ("start", "end", "days"),
    [
        ("1:00", "02:00", []),
        ("01:00", "24:01", []),
        ("24:00", "01:00", []),
        ("01:00", "02:00", ["Monday"]),
    ],
)
def test_invalid_fields_are_clear_errors(start: str, end: str, days: list[str]) -> None:
    bad = Window.model_construct(name="x", timezone="UTC", weekdays=days, start=start, end=end)
    with pytest.raises(WindowError, match="window 'x'"):
        window_open(bad, at(0, 0))


# --------------------------------------------------------------------------- DST


def test_spring_forward_gap_opens_when_clock_jumps() -> None:
    # 2024-03-10 (Sunday) New York: 02:00 EST jumps to 03:00 EDT (07:00 UTC).
    w = win("02:30", "03:30", "Sun", tz="America/New_York")
    before = datetime(2024, 3, 9, 12, tzinfo=NY)
    assert next_open(w, before) == utc(2024, 3, 10, 7, 0)  # 03:00 EDT
    assert next_close(w, utc(2024, 3, 10, 7, 0)) == utc(2024, 3, 10, 7, 30)  # 03:30 EDT


def test_spring_forward_skipped_window_stays_shut() -> None:
    w = win("02:00", "02:30", "Sun", tz="America/New_York")
    got = next_open(w, datetime(2024, 3, 9, 12, tzinfo=NY))
    assert got == datetime(2024, 3, 17, 2, 0, tzinfo=NY)


def test_spring_forward_window_around_the_gap() -> None:
    w = win("01:30", "02:30", "Sun", tz="America/New_York")
    assert window_open(w, utc(2024, 3, 10, 6, 59))  # 01:59 EST
    assert next_close(w, utc(2024, 3, 10, 6, 30)) == utc(2024, 3, 10, 7, 0)


def test_fall_back_repeated_hour_opens_twice() -> None:
    # 2024-11-03 (Sunday) New York: 02:00 EDT falls back to 01:00 EST (06:00 UTC).
    w = win("01:00", "01:30", "Sun", tz="America/New_York")
    assert next_open(w, utc(2024, 11, 3, 4)) == utc(2024, 11, 3, 5)  # 01:00 EDT
    assert next_close(w, utc(2024, 11, 3, 5)) == utc(2024, 11, 3, 5, 30)
    assert next_open(w, utc(2024, 11, 3, 5, 30)) == utc(2024, 11, 3, 6)  # 01:00 EST
    assert next_close(w, utc(2024, 11, 3, 6)) == utc(2024, 11, 3, 6, 30)


def test_fall_back_reopens_at_the_transition() -> None:
    w = win("00:30", "01:30", "Sun", tz="America/New_York")
    assert not window_open(w, utc(2024, 11, 3, 5, 45))  # 01:45 EDT
    assert next_open(w, utc(2024, 11, 3, 5, 45)) == utc(2024, 11, 3, 6)  # clock back to 01:00


def test_dst_day_window_in_berlin() -> None:
    # 2024-03-31 Berlin: 02:00 CET → 03:00 CEST; a 01:00–04:00 window lasts two real hours.
    w = win("01:00", "04:00", "Sun", tz="Europe/Berlin")
    opens = next_open(w, datetime(2024, 3, 30, 12, tzinfo=BERLIN))
    closes = next_close(w, opens) if opens else None
    assert opens == utc(2024, 3, 31, 0)
    assert closes == utc(2024, 3, 31, 2)


def test_daily_window_keeps_local_time_across_dst() -> None:
    w = win("09:00", "10:00", tz="Europe/Berlin")
    got = next_open(w, datetime(2024, 3, 30, 12, tzinfo=BERLIN))
    assert got == datetime(2024, 3, 31, 9, tzinfo=BERLIN)
    assert got == utc(2024, 3, 31, 7)  # CEST, not CET


# --------------------------------------------------------------------------- verdicts

WEEKEND_FREEZE = win("00:00", "24:00", "Sat", "Sun", name="weekend-freeze")
NIGHTLY = win("02:00", "04:00", name="nightly")


def test_no_windows_allow() -> None:
    assert freeze_verdict([], at(0, 0)) == WindowVerdict(allowed=True)
    assert maintenance_verdict([], [], at(0, 0)) == WindowVerdict(allowed=True)


def test_freeze_window() -> None:
    v = freeze_verdict([WEEKEND_FREEZE], at(5, 10))
    assert v == WindowVerdict(False, "FreezeWindow", at(7, 0), "weekend-freeze")
    assert freeze_verdict([WEEKEND_FREEZE], at(4, 23, 59)).allowed


def test_freeze_next_allowed_waits_for_inclusion() -> None:
    v = freeze_verdict([WEEKEND_FREEZE], at(5, 10), inclusion_windows=[NIGHTLY])
    assert v.next_allowed_at == at(7, 2)
    assert v.reason == "FreezeWindow"


def test_overlapping_freezes() -> None:
    a = win("10:00", "12:00", name="a")
    b = win("11:00", "13:00", name="b")
    v = freeze_verdict([a, b], at(0, 10, 30))
    assert v.window == "a"
    assert v.next_allowed_at == at(0, 13)


def test_maintenance_window() -> None:
    v = maintenance_verdict([NIGHTLY], [], at(0, 12))
    assert v == WindowVerdict(False, "MaintenanceWindow", at(1, 2), "nightly")
    assert maintenance_verdict([NIGHTLY], [], at(1, 3)).allowed


def test_maintenance_earliest_of_several() -> None:
    tue = win("05:00", "06:00", "Tue", name="tue")
    sat = win("01:00", "05:00", "Sat", name="sat")
    mon_night = win("23:00", "01:00", "Mon", name="mon-night")
    v = maintenance_verdict([sat, tue, mon_night], [], at(0, 12))
    assert (v.next_allowed_at, v.window) == (at(0, 23), "mon-night")
    v = maintenance_verdict([sat, tue, mon_night], [], at(1, 1))
    assert (v.next_allowed_at, v.window) == (at(1, 5), "tue")


def test_maintenance_skips_time_blocked_by_exclusion() -> None:
    freeze_tue = win("01:00", "03:00", "Tue", name="freeze")
    v = maintenance_verdict([NIGHTLY], [freeze_tue], at(0, 12))
    assert v.next_allowed_at == at(1, 3)
    assert v.window == "nightly"


def test_maintenance_never_allowed_within_search() -> None:
    v = maintenance_verdict([NIGHTLY], [win("00:00", "24:00", name="always")], at(0, 12))
    assert v == WindowVerdict(False, "MaintenanceWindow", None, None)


def test_maintenance_ignores_open_exclusion_now() -> None:
    # The freeze check runs earlier in the guardrail order; maintenance only asks about
    # inclusion windows.
    assert maintenance_verdict([NIGHTLY], [WEEKEND_FREEZE], at(5, 3)).allowed


def test_freeze_then_maintenance_next_allowed_time() -> None:
    v = freeze_verdict([WEEKEND_FREEZE], at(5, 3), inclusion_windows=[NIGHTLY])
    assert (v.reason, v.next_allowed_at) == ("FreezeWindow", at(7, 2))
    v = maintenance_verdict([NIGHTLY], [WEEKEND_FREEZE], at(4, 12))
    assert (v.reason, v.next_allowed_at) == ("MaintenanceWindow", at(7, 2))
    assert freeze_verdict([WEEKEND_FREEZE], at(4, 3), inclusion_windows=[NIGHTLY]).allowed
    assert maintenance_verdict([NIGHTLY], [WEEKEND_FREEZE], at(4, 3)).allowed


# --------------------------------------------------------------------------- properties

_TIMES = st.builds(
    lambda h, m: f"{h:02d}:{m:02d}", st.integers(0, 23), st.sampled_from([0, 15, 30, 59])
)
_DAYS = st.lists(
    st.sampled_from(["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]), unique=True, max_size=3
)
_ZONES = st.sampled_from(
    ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata"]
)
_NOW = st.datetimes(
    min_value=datetime(2024, 1, 1), max_value=datetime(2025, 12, 31), timezones=st.just(UTC)
).map(lambda d: d.replace(second=0, microsecond=0))


@st.composite
def windows(draw: st.DrawFn) -> Window:
    start = draw(_TIMES)
    end = draw(_TIMES.filter(lambda e: e != start) | st.just("24:00"))
    return win(start, end, *draw(_DAYS), tz=draw(_ZONES))


@settings(max_examples=60, deadline=None)
@given(windows(), _NOW)
def test_next_open_is_the_first_open_minute(window: Window, now: datetime) -> None:
    got = next_open(window, now)
    minute = now
    while got is None or minute < got:
        assert not window_open(window, minute)
        minute += timedelta(minutes=1)
        if minute > now + timedelta(days=SEARCH_DAYS):
            assert got is None
            return
    assert window_open(window, got)


@settings(max_examples=60, deadline=None)
@given(windows(), _NOW)
def test_next_close_is_after_an_open_stretch(window: Window, now: datetime) -> None:
    got = next_close(window, now)
    if got is None:
        return
    assert not window_open(window, got)
    assert all(
        window_open(window, now + timedelta(minutes=i))
        for i in range(int((got - now).total_seconds() // 60))
    )


def test_next_change_is_the_next_opening_or_closing_of_any_window() -> None:
    lunch = win("12:00", "13:00", name="lunch")
    assert next_change([OFFICE, lunch], at(0, 8)) == at(0, 9)  # the office opens
    assert next_change([OFFICE, lunch], at(0, 9)) == at(0, 12)  # after it opened: lunch
    assert next_change([OFFICE, lunch], at(0, 12, 30)) == at(0, 13)
    assert next_change([OFFICE], at(4, 17)) == at(7, 9)  # Friday evening: Monday morning
