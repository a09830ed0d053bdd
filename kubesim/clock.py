"""Time source for everything the simulator stamps or schedules.

Tests use `FakeClock` and advance it explicitly, so windows, cooldowns and monitoring
periods are exercised without sleeping.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class Clock:
    """Wall-clock time in UTC."""

    def now(self) -> datetime:
        """The current time (timezone-aware, UTC)."""
        return datetime.now(UTC)

    def stamp(self) -> str:
        """The current time as the API's RFC3339 seconds format."""
        return rfc3339(self.now())


class FakeClock(Clock):
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = (start or datetime(2026, 1, 1, tzinfo=UTC)).astimezone(UTC)

    def now(self) -> datetime:
        """The fake current time."""
        return self._now

    def advance(self, seconds: float = 0.0, **delta: float) -> datetime:
        """Move time forward by `seconds` (plus any timedelta keywords) and return it."""
        step = timedelta(seconds=seconds, **delta)
        if step < timedelta(0):
            raise ValueError("a clock never runs backwards")
        self._now += step
        return self._now

    def set(self, when: datetime) -> None:
        """Jump to `when` (never backwards)."""
        when = when.astimezone(UTC)
        if when < self._now:
            raise ValueError("a clock never runs backwards")
        self._now = when


def rfc3339(when: datetime) -> str:
    """Format as `2026-01-01T00:00:00Z`, the API's Time format."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> datetime:
    """Parse the API's Time or MicroTime format."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
