"""The leader Lease's timings, with no heavy import: the services' flags
(`app.kube.leaderflags`) show their defaults without loading the elector (`app.kube.leader`)."""

from __future__ import annotations

from dataclasses import dataclass

#: client-go's defaults: leaseDuration 15 s, renewDeadline 10 s, retryPeriod 2 s.
LEASE_DURATION_S = 15.0
RENEW_DEADLINE_S = 10.0
RETRY_S = 2.0


@dataclass(frozen=True, slots=True)
class LeaderTimings:
    """How long a Lease lasts, how long its holder may go without renewing it, and how
    often it is renewed (or a candidate tries)."""

    duration_s: float = LEASE_DURATION_S
    renew_deadline_s: float = RENEW_DEADLINE_S
    retry_s: float = RETRY_S

    @classmethod
    def scaled(
        cls,
        duration_s: float,
        renew_deadline_s: float | None = None,
        retry_s: float | None = None,
    ) -> LeaderTimings:
        """Timings for a Lease duration, with client-go's proportions for what is not
        given: the deadline two thirds of the duration, the retry a fifth, at most 2 s."""
        deadline = renew_deadline_s if renew_deadline_s is not None else duration_s * 2 / 3
        retry = retry_s if retry_s is not None else min(RETRY_S, duration_s / 5)
        return cls(duration_s, deadline, retry)

    def problem(self) -> str | None:
        """Why these timings cannot keep two leaders apart (None: they can)."""
        if not 0 < self.retry_s < self.renew_deadline_s < self.duration_s:
            return (
                f"--retry-period ({self.retry_s:g}s) < --renew-deadline "
                f"({self.renew_deadline_s:g}s) < --lease-duration ({self.duration_s:g}s) "
                "must hold, all positive: a leader stops before its Lease can expire"
            )
        return None
