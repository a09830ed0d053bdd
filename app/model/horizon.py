"""The span of time over which a decision stays the same.

A decision reads the clock only through comparisons with fixed instants (a pause ends,
a recommendation grows stale, a cooldown runs out). Each comparison made through a
`Horizon` narrows the span of clock readings at which every comparison made so far would
come out the same; a decision made at `now` is therefore the same decision at any time in
that span, as long as nothing else it read changed. `app.decide.admission` keeps decisions for
exactly that span; the reconciler looks at a workload again when the span of its pass's
decisions ends (`next_change`).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

#: datetimes count in microseconds: `a > b` is `a >= b + TICK`
TICK = timedelta(microseconds=1)


class Horizon:
    """Clock readings `start <= t < end` (None: unbounded) at which every comparison made
    through this object keeps the answer it gave at `now`."""

    __slots__ = ("now", "start", "end", "pinned")

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.start: datetime | None = None
        self.end: datetime | None = None
        #: a reading of the clock was not described: the span is `now` alone
        self.pinned = False

    def before(self, instant: datetime) -> bool:
        """`now < instant`, narrowing the span to where that answer holds."""
        if self.now < instant:
            if self.end is None or instant < self.end:
                self.end = instant
            return True
        if self.start is None or instant > self.start:
            self.start = instant
        return False

    def elapsed_over(self, since: datetime, span: timedelta) -> bool:
        """`now - since > span`, narrowing the span to where that answer holds.

        With fixed UTC offsets (what ISO times parse to) it is `now >= since + span + 1µs`;
        anything else (a zone with daylight saving, an instant past `datetime.max`) pins
        the span to `now` alone rather than reason about it.
        """
        result = self.now - since > span
        if isinstance(since.tzinfo, timezone) and isinstance(self.now.tzinfo, timezone):
            try:
                threshold = since + span + TICK
            except OverflowError:
                threshold = None
            if threshold is not None and self.before(threshold) is not result:
                return result
        self.pin()
        return result

    def until(self, instant: datetime | None) -> None:
        """Answers that hold from `now` until `instant`, whatever they were before `now`:
        the span starts at `now` and ends by `instant` (None: no end is known, `pin`)."""
        if instant is None or instant <= self.now:
            self.pin()
            return
        self.before(self.now)
        self.before(instant)

    def pin(self) -> None:
        """A reading of the clock this object cannot describe: only `now` keeps it."""
        self.pinned = True
        self.before(self.now + TICK)
        self.before(self.now)

    def next_change(self) -> datetime | None:
        """The earliest time after `now` at which a comparison may answer otherwise, or
        None: none will (unbounded), or the span is pinned and says nothing about when."""
        return None if self.pinned else self.end

    def holds(self, now: datetime) -> bool:
        """Whether every comparison made would come out the same at `now`."""
        return (self.start is None or now >= self.start) and (self.end is None or now < self.end)
