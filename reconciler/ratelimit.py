"""A token bucket: the global eviction rate and the work queue's overall rate."""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """`rate` tokens per second, at most `burst` saved up."""

    def __init__(
        self, rate: float, burst: float = 1.0, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.burst = max(1.0, burst)
        self._clock = clock
        self._tokens = self.burst
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now

    def try_take(self) -> float:
        """Take a token: 0.0 when one was free, else the seconds until one will be."""
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self.rate
