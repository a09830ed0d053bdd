from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.model.durations import (
    DurationError,
    format_duration,
    in_hours,
    parse_duration,
    parse_flag_duration,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("30s", timedelta(seconds=30)),
        ("10m", timedelta(minutes=10)),
        ("168h", timedelta(days=7)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1.5h", timedelta(hours=1, minutes=30)),
        ("500ms", timedelta(milliseconds=500)),
        ("0s", timedelta(0)),
        ("0", timedelta(0)),
        ("-0", timedelta(0)),
        ("+5s", timedelta(seconds=5)),
        ("-1h", timedelta(hours=-1)),
        ("1h0m0s", timedelta(hours=1)),
        ("2h45m30.5s", timedelta(hours=2, minutes=45, seconds=30.5)),
        ("1m5s", timedelta(seconds=65)),
        ("5s1m", timedelta(seconds=65)),  # Go sums components in any order
        (".5s", timedelta(milliseconds=500)),
        ("1.s", timedelta(seconds=1)),
        ("15us", timedelta(microseconds=15)),
        ("15\u00b5s", timedelta(microseconds=15)),
        ("15\u03bcs", timedelta(microseconds=15)),
        ("1500ns", timedelta(microseconds=2)),  # 1.5µs rounds half to even
        ("2500ns", timedelta(microseconds=2)),
        ("2501ns", timedelta(microseconds=3)),
        ("0.1s", timedelta(milliseconds=100)),
    ],
)
def test_parse(text: str, value: timedelta) -> None:
    assert parse_duration(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "s",
        "10",
        "1d",
        "1w",
        "1.5",
        "abc",
        " 1s",
        "1s ",
        "1 s",
        "1H",
        ".s",
        "--1s",
        "1e3s",
        "\u0661s",
    ],
)
def test_rejects_garbage(text: str) -> None:
    with pytest.raises(DurationError, match="invalid duration"):
        parse_duration(text)


def test_error_names_the_text_and_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="'7d'"):
        parse_duration("7d")


def test_out_of_range() -> None:
    with pytest.raises(DurationError, match="out of range"):
        parse_duration("99999999999999h")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(hours=1, minutes=30), "1h30m0s"),
        (timedelta(minutes=10), "10m0s"),
        (timedelta(seconds=30), "30s"),
        (timedelta(days=7), "168h0m0s"),
        (timedelta(milliseconds=500), "500ms"),
        (timedelta(milliseconds=1500), "1.5s"),
        (timedelta(microseconds=1500), "1.5ms"),
        (timedelta(microseconds=15), "15\u00b5s"),
        (timedelta(seconds=1, microseconds=1), "1.000001s"),
        (timedelta(hours=-1), "-1h0m0s"),
        (timedelta(milliseconds=-250), "-250ms"),
        (timedelta(hours=2, seconds=5), "2h0m5s"),
    ],
)
def test_format_like_go(value: timedelta, text: str) -> None:
    assert format_duration(value) == text


_DELTAS = st.timedeltas(min_value=timedelta(days=-(10**6)), max_value=timedelta(days=10**6))


@given(_DELTAS)
def test_round_trip(value: timedelta) -> None:
    assert parse_duration(format_duration(value)) == value


@given(st.integers(0, 10**6), st.integers(0, 59), st.integers(0, 59))
def test_components_sum(hours: int, minutes: int, seconds: int) -> None:
    expected = timedelta(hours=hours, minutes=minutes, seconds=seconds)
    assert parse_duration(f"{hours}h{minutes}m{seconds}s") == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("7d", timedelta(days=7)),
        ("1.5d", timedelta(hours=36)),
        (".5d", timedelta(hours=12)),
        ("1d12h", timedelta(hours=36)),
        ("30d", timedelta(days=30)),
    ],
)
def test_a_flag_s_duration_takes_days(text: str, value: timedelta) -> None:
    assert parse_flag_duration(text) == value


@pytest.mark.parametrize("text", ["d", "7dd", "1h7d", "7d-1h", "7 d", "-7d", "7x"])
def test_a_flag_s_duration_refuses_what_is_no_duration(text: str) -> None:
    with pytest.raises(DurationError, match=r"such as 30s, 10m, 1h30m or 7d"):
        parse_flag_duration(text)


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["s", "m", "h", "ms"]))
def test_a_flag_reads_every_go_duration_as_go_does(number: int, unit: str) -> None:
    assert parse_flag_duration(f"{number}{unit}") == parse_duration(f"{number}{unit}")


@pytest.mark.parametrize(
    ("text", "hours"),
    [("7d", "168h"), ("1.5d", "36h"), ("1d30m", "24h30m"), ("30s", None), ("7dx", None)],
)
def test_days_are_said_again_in_hours_for_a_resource(text: str, hours: str | None) -> None:
    assert in_hours(text) == hours
