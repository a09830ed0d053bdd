"""Waiting on a condition, bounded."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from harness.errors import HarnessError

T = TypeVar("T")
#: how long a condition may take to come true (a bound, not an expectation)
WAIT_S = 180.0


class TimedOut(HarnessError):
    """A condition did not come true within its bound."""


def wait_until(check: Callable[[], T], what: str, timeout_s: float = WAIT_S) -> T:
    """Poll `check` until it returns something truthy; raise TimedOut naming `what` past
    the bound."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimedOut(f"timed out waiting for {what}")
        time.sleep(0.25)
