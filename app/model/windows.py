"""Scheduling windows of an AutomationStrategy (SPEC §2, §6).

A window is ``{name, timezone, weekdays, start, end}`` in wall-clock time of its IANA
time zone: open when the local time is in ``[start, end)`` on one of ``weekdays`` (empty =
every day). ``end`` may be ``"24:00"``; a window with ``start > end`` crosses midnight and
its weekday is the day it *starts* (``Fri 22:00–06:00`` is open early Saturday morning).

Wall-clock semantics across daylight-saving changes: a window whose start falls into the
spring-forward gap opens when the clock jumps past it, one whose start is skipped
entirely stays shut that day, and a window on the repeated hour in autumn is open during
both passes.

Exclusion windows freeze changes (``FreezeWindow``); inclusion windows, when any exist,
are the only times a change may go in (``MaintenanceWindow``). The guardrail order checks
the freeze early and the maintenance window last, hence two verdict functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "SEARCH_DAYS",
    "WindowError",
    "WindowLike",
    "WindowVerdict",
    "freeze_verdict",
    "maintenance_verdict",
    "next_change",
    "next_close",
    "next_open",
    "window_open",
]

#: How far ahead the next open / allowed time is searched.
SEARCH_DAYS = 8

_WEEKDAYS: dict[str, int] = {"Mon": 0, "Tue": 1, "Wed": 2, "Thu": 3, "Fri": 4, "Sat": 5, "Sun": 6}
_ALL_DAYS = frozenset(range(7))
# Offsets are sampled this often to find DST transitions; real zones never change their
# offset twice within six hours.
_SAMPLE_STEP = 6 * 3600
_DAY_SECONDS = 24 * 3600


class WindowError(ValueError):
    """A window with an unknown time zone, weekday or time of day."""


class WindowLike(Protocol):
    """What the functions read from a window (``app.model.crd.Window`` satisfies it)."""

    @property
    def name(self) -> str: ...
    @property
    def timezone(self) -> str: ...
    @property
    def weekdays(self) -> Sequence[str]: ...
    @property
    def start(self) -> str: ...
    @property
    def end(self) -> str: ...


@dataclass(frozen=True, slots=True)
class WindowVerdict:
    """Whether the windows let a change go in now, and if not, why and from when."""

    allowed: bool
    reason: Literal["FreezeWindow", "MaintenanceWindow"] | None = None
    #: Earliest instant the change may go in; ``None`` when allowed or not found within
    #: ``SEARCH_DAYS``.
    next_allowed_at: datetime | None = None
    #: The window responsible: the open exclusion window, or the inclusion window that
    #: opens at ``next_allowed_at``.
    window: str | None = None


_ALLOWED = WindowVerdict(allowed=True)


@dataclass(frozen=True, slots=True)
class _Window:
    name: str
    zone: ZoneInfo
    days: frozenset[int]
    start: int  # minute of the day
    end: int  # minute of the day, 1440 for "24:00"

    def is_open(self, instant: datetime) -> bool:
        local = instant.astimezone(self.zone)
        minute = local.hour * 60 + local.minute
        weekday = local.weekday()
        if self.start < self.end:
            return weekday in self.days and self.start <= minute < self.end
        # Across midnight: the evening part belongs to today, the morning part to the
        # window that started yesterday.
        return (weekday in self.days and minute >= self.start) or (
            (weekday - 1) % 7 in self.days and minute < self.end
        )


def _minute_of_day(name: str, text: str, *, allow_24: bool) -> int:
    hours, sep, minutes = text.partition(":")
    if sep and len(hours) == 2 and len(minutes) == 2 and hours.isdigit() and minutes.isdigit():
        value = int(hours) * 60 + int(minutes)
        if (int(hours) < 24 and int(minutes) < 60) or (allow_24 and value == 1440):
            return value
    raise WindowError(f"window {name!r}: invalid time {text!r}, expected HH:MM")


@lru_cache(maxsize=1024)
def _compile(name: str, timezone: str, weekdays: tuple[str, ...], start: str, end: str) -> _Window:
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise WindowError(f"window {name!r}: unknown time zone {timezone!r}") from None
    unknown = [d for d in weekdays if d not in _WEEKDAYS]
    if unknown:
        raise WindowError(f"window {name!r}: unknown weekday {unknown[0]!r}, expected Mon..Sun")
    return _Window(
        name=name,
        zone=zone,
        days=frozenset(_WEEKDAYS[d] for d in weekdays) if weekdays else _ALL_DAYS,
        start=_minute_of_day(name, start, allow_24=False),
        end=_minute_of_day(name, end, allow_24=True),
    )


def _compiled(window: WindowLike) -> _Window:
    return _compile(window.name, window.timezone, tuple(window.weekdays), window.start, window.end)


def _require_aware(now: datetime) -> None:
    if now.utcoffset() is None:
        # A naive time would silently be read in the host's zone.
        raise ValueError(f"now must be timezone-aware, got {now!r}")


def _offset_at(zone: ZoneInfo, timestamp: int) -> timedelta | None:
    return datetime.fromtimestamp(timestamp, zone).utcoffset()


@lru_cache(maxsize=4096)
def _transitions_on(zone: ZoneInfo, utc_day: int) -> tuple[datetime, ...]:
    """UTC offset changes of ``zone`` during UTC day number ``utc_day`` (days since epoch)."""
    found: list[datetime] = []
    start = utc_day * _DAY_SECONDS
    for low in range(start, start + _DAY_SECONDS, _SAMPLE_STEP):
        high = low + _SAMPLE_STEP
        before = _offset_at(zone, low)
        if _offset_at(zone, high) == before:
            continue
        # Bisect to the first second with the new offset.
        while high - low > 1:
            middle = (low + high) // 2
            if _offset_at(zone, middle) == before:
                low = middle
            else:
                high = middle
        found.append(datetime.fromtimestamp(high, UTC))
    return tuple(found)


def _wall_instants(zone: ZoneInfo, day: date, minute: int) -> Iterator[datetime]:
    """The instants at which the wall clock of ``zone`` reads ``day`` + ``minute``: two in
    the repeated autumn hour (both folds); in a spring gap both folds land off the gap and
    the transition itself is found by :func:`_transitions_on`."""
    wall = datetime.combine(day, time()) + timedelta(minutes=minute)
    for fold in (0, 1):
        yield wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)


def _boundaries(windows: Sequence[_Window], now: datetime) -> list[datetime]:
    """Every instant in ``(now, now + SEARCH_DAYS]`` at which some window may open or
    close: its start and end on each local day, and its zone's offset changes."""
    horizon = now + timedelta(days=SEARCH_DAYS)
    first_utc_day = int(now.timestamp()) // _DAY_SECONDS - 1
    instants: set[datetime] = set()
    for window in windows:
        today = now.astimezone(window.zone).date()
        for offset in range(-1, SEARCH_DAYS + 2):
            day = today + timedelta(days=offset)
            instants.update(_wall_instants(window.zone, day, window.start))
            instants.update(_wall_instants(window.zone, day, window.end))
        for utc_day in range(first_utc_day, first_utc_day + SEARCH_DAYS + 3):
            instants.update(_transitions_on(window.zone, utc_day))
    return sorted(t for t in instants if now < t <= horizon)


def _earliest(
    holds: Callable[[datetime], bool], windows: Sequence[_Window], now: datetime
) -> datetime | None:
    """The earliest instant ≥ ``now`` where ``holds`` is true, within ``SEARCH_DAYS``.

    Window states only change at boundaries, so testing ``now`` and each boundary in
    order is exact. The result is in ``now``'s time zone.
    """
    if holds(now):
        return now
    for instant in _boundaries(windows, now):
        if holds(instant):
            return instant.astimezone(now.tzinfo)
    return None


def next_change(windows: Sequence[WindowLike], now: datetime) -> datetime | None:
    """The earliest instant after ``now`` at which any of ``windows`` opens or closes
    (until then each stays as it is at ``now``), or ``None`` if none does within
    ``SEARCH_DAYS``."""
    _require_aware(now)
    compiled = [_compiled(w) for w in windows]
    states = [w.is_open(now) for w in compiled]
    for instant in _boundaries(compiled, now):
        if [w.is_open(instant) for w in compiled] != states:
            return instant
    return None


def window_open(window: WindowLike, now: datetime) -> bool:
    """True when ``window`` is open at the tz-aware instant ``now``."""
    _require_aware(now)
    return _compiled(window).is_open(now)


def next_open(window: WindowLike, now: datetime) -> datetime | None:
    """The earliest instant ≥ ``now`` at which ``window`` is open (``now`` itself if it is
    open), or ``None`` if it does not open within ``SEARCH_DAYS``."""
    _require_aware(now)
    compiled = _compiled(window)
    return _earliest(compiled.is_open, [compiled], now)


def next_close(window: WindowLike, now: datetime) -> datetime | None:
    """The earliest instant ≥ ``now`` at which ``window`` is closed (``now`` itself if it
    is closed), or ``None`` if it stays open for ``SEARCH_DAYS``."""
    _require_aware(now)
    compiled = _compiled(window)
    return _earliest(lambda t: not compiled.is_open(t), [compiled], now)


def _allowed_at(
    inclusion: Sequence[_Window], exclusion: Sequence[_Window]
) -> Callable[[datetime], bool]:
    def allowed(instant: datetime) -> bool:
        return not any(w.is_open(instant) for w in exclusion) and (
            not inclusion or any(w.is_open(instant) for w in inclusion)
        )

    return allowed


def freeze_verdict(
    exclusion_windows: Sequence[WindowLike],
    now: datetime,
    *,
    inclusion_windows: Sequence[WindowLike] = (),
) -> WindowVerdict:
    """``FreezeWindow`` when an exclusion window is open at ``now``, else allowed.

    ``next_allowed_at`` is the earliest instant with no exclusion window open — and, when
    ``inclusion_windows`` are given, with one of them open, so the time shown is one at
    which the change can really go in.
    """
    _require_aware(now)
    exclusion = [_compiled(w) for w in exclusion_windows]
    open_now = next((w for w in exclusion if w.is_open(now)), None)
    if open_now is None:
        return _ALLOWED
    inclusion = [_compiled(w) for w in inclusion_windows]
    return WindowVerdict(
        allowed=False,
        reason="FreezeWindow",
        next_allowed_at=_earliest(_allowed_at(inclusion, exclusion), inclusion + exclusion, now),
        window=open_now.name,
    )


def maintenance_verdict(
    inclusion_windows: Sequence[WindowLike],
    exclusion_windows: Sequence[WindowLike],
    now: datetime,
) -> WindowVerdict:
    """``MaintenanceWindow`` when inclusion windows exist and none is open at ``now``.

    ``next_allowed_at`` is the earliest instant at which an inclusion window is open and
    no exclusion window is; ``window`` names the inclusion window open then. Exclusion
    windows open *now* are :func:`freeze_verdict`'s business and are not judged here.
    """
    _require_aware(now)
    inclusion = [_compiled(w) for w in inclusion_windows]
    if not inclusion or any(w.is_open(now) for w in inclusion):
        return _ALLOWED
    exclusion = [_compiled(w) for w in exclusion_windows]
    at = _earliest(_allowed_at(inclusion, exclusion), inclusion + exclusion, now)
    opening = None if at is None else next(w.name for w in inclusion if w.is_open(at))
    return WindowVerdict(
        allowed=False, reason="MaintenanceWindow", next_allowed_at=at, window=opening
    )
