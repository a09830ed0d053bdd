"""Go-style duration strings (``30s``, ``10m``, ``168h``, ``1h30m``, ``1.5h``, ``500ms``).

Kubernetes users write durations the way Go's ``time.ParseDuration`` reads them, so kerf
accepts exactly that grammar and formats exactly as Go's ``Duration.String`` does
(``1h30m0s``, ``500ms``, ``0s``). A :class:`datetime.timedelta` holds microseconds, so a
nanosecond remainder is rounded to the nearest microsecond (half to even).

On the command line (:func:`parse_flag_duration`) a duration also takes days, ``d`` = 24h
(``7d``, ``1d12h``); in a resource it is Go's exactly, as the API server's schema and Kubex
read it, and a day there is refused with its value in hours (docs/decisions.md).
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction
from functools import lru_cache

__all__ = ["DurationError", "format_duration", "in_hours", "parse_duration", "parse_flag_duration"]

# Nanoseconds per unit. Go accepts both the micro sign (U+00B5) and the Greek mu (U+03BC).
_UNIT_NS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
# Two-letter units come before their one-letter prefixes so "1ms" is not read as "1m" + "s".
_COMPONENT = r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)"
_DURATION_RE = re.compile(rf"([+-]?)((?:{_COMPONENT})+|0)", re.ASCII)
_COMPONENT_RE = re.compile(_COMPONENT, re.ASCII)
_MICROSECOND = timedelta(microseconds=1)
#: Leading days of a flag's duration: what is left is a Go duration (or nothing).
_DAYS_RE = re.compile(r"(\d+\.?\d*|\.\d+)d(.*)", re.ASCII)
_DAY_US = 86_400_000_000


class DurationError(ValueError):
    """A text that is not a valid Go-style duration."""


@lru_cache(maxsize=1024)
def parse_duration(text: str) -> timedelta:
    """Parse a Go duration string into a :class:`~datetime.timedelta`.

    A duration is an optionally signed sequence of decimal numbers, each with a unit
    (``ns``, ``us``/``µs``, ``ms``, ``s``, ``m``, ``h``), e.g. ``"1h30m"`` or ``"1.5h"``;
    ``"0"`` alone needs no unit. Raises :class:`DurationError` naming the text otherwise.
    """
    match = _DURATION_RE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise DurationError(
            f"invalid duration {text!r}: expected a Go duration such as 30s, 10m, 1h30m or 1.5h"
        )
    nanoseconds = sum(
        (Fraction(number) * _UNIT_NS[unit] for number, unit in _COMPONENT_RE.findall(match[2])),
        Fraction(0),
    )
    microseconds = round(nanoseconds / 1000)
    try:
        value = timedelta(microseconds=microseconds)
    except OverflowError:
        raise DurationError(f"invalid duration {text!r}: out of range") from None
    return -value if match[1] == "-" else value


def in_hours(text: str) -> str | None:
    """``text`` written without days (``7d`` -> ``168h``, ``1d12h`` -> ``36h``), or None
    when it has none or is no duration: the hint a resource's refusal of a day gives."""
    if not isinstance(text, str) or _DAYS_RE.fullmatch(text) is None:
        return None
    try:
        go = format_duration(parse_flag_duration(text))
    except DurationError:
        return None
    if go.endswith("m0s"):
        go = go.removesuffix("0s")
    return go.removesuffix("0m") if go.endswith("h0m") else go


def parse_flag_duration(text: str) -> timedelta:
    """A duration typed on the command line: a Go duration, optionally led by days
    (``7d``, ``1.5d``, ``1d12h``). Raises :class:`DurationError` naming the text."""
    match = _DAYS_RE.fullmatch(text) if isinstance(text, str) else None
    try:
        if match is None:
            return parse_duration(text)
        rest = parse_duration(match[2]) if match[2] else timedelta(0)
        if match[2].startswith(("-", "+")):
            raise DurationError(text)
        return timedelta(microseconds=round(Fraction(match[1]) * _DAY_US)) + rest
    except (DurationError, OverflowError):
        raise DurationError(
            f"invalid duration {text!r}: expected a duration such as 30s, 10m, 1h30m or 7d"
        ) from None


def _fraction(value: int, digits: int) -> str:
    """The ``.ddd`` part of a Go duration: ``value`` over 10**digits, trailing zeros cut."""
    return "." + f"{value:0{digits}d}".rstrip("0") if value else ""


def format_duration(td: timedelta) -> str:
    """Format like Go's ``Duration.String``: ``"1h30m0s"``, ``"10m0s"``, ``"1.5s"``,
    ``"500ms"``, ``"0s"``. Hours are never folded into days (``"168h0m0s"``)."""
    total = td // _MICROSECOND
    if total == 0:
        return "0s"
    sign = "-" if total < 0 else ""
    micros = abs(total)
    if micros < 1000:
        return f"{sign}{micros}\u00b5s"
    if micros < 1_000_000:
        millis, rest = divmod(micros, 1000)
        return f"{sign}{millis}{_fraction(rest, 3)}ms"
    seconds, rest = divmod(micros, 1_000_000)
    text = f"{seconds % 60}{_fraction(rest, 6)}s"
    minutes = seconds // 60
    if minutes:
        text = f"{minutes % 60}m{text}"
        hours = minutes // 60
        if hours:
            text = f"{hours}h{text}"
    return sign + text
