"""The one default clock: services and tools take a `Clock` so tests can fix the time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """Timezone-aware UTC now."""
    return datetime.now(UTC)
