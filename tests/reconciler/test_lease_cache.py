"""The reconciler's cache of the webhook Lease (`cached_lease`): one read serves for
LEASE_CACHE_S of wall time and of decision time, so a simulated clock that jumps ahead
(`make demo`) never judges the Lease by a read from before the jump."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.main import LEASE_CACHE_S, cached_lease

RENEWED = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)


class Reader:
    """A Lease whose renewTime is read from `renewed`, counting the reads."""

    def __init__(self) -> None:
        self.reads = 0
        self.renewed = RENEWED

    async def renewed_at(self) -> datetime:
        self.reads += 1
        return self.renewed


class Clocks:
    def __init__(self) -> None:
        self.wall = 100.0
        self.decision = RENEWED

    def monotonic(self) -> float:
        return self.wall

    def now(self) -> datetime:
        return self.decision


async def test_one_read_serves_while_neither_clock_moved_past_the_cache() -> None:
    reader, clocks = Reader(), Clocks()
    lease = cached_lease(reader, clocks.now, clocks.monotonic)
    assert await lease() == RENEWED
    clocks.wall += LEASE_CACHE_S / 2
    clocks.decision += timedelta(seconds=LEASE_CACHE_S / 2)
    assert await lease() == RENEWED
    assert reader.reads == 1


async def test_a_clock_that_stands_still_reads_again_by_wall_time() -> None:
    reader, clocks = Reader(), Clocks()
    lease = cached_lease(reader, clocks.now, clocks.monotonic)
    await lease()
    reader.renewed = RENEWED + timedelta(seconds=10)
    clocks.wall += LEASE_CACHE_S
    assert await lease() == reader.renewed
    assert reader.reads == 2


async def test_a_clock_moved_ahead_reads_the_lease_again() -> None:
    reader, clocks = Reader(), Clocks()
    lease = cached_lease(reader, clocks.now, clocks.monotonic)
    await lease()
    # The demo skips 30 s; the webhook renews at the new time within a moment of wall time.
    clocks.decision += timedelta(seconds=30)
    reader.renewed = clocks.decision
    clocks.wall += 0.2
    assert await lease() == clocks.decision
    assert reader.reads == 2
