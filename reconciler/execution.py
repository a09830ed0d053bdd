"""How the reconciler carries out its plans (flags of `kerf reconciler`)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from datetime import timedelta

from app.outcome.rollout import Timings


@dataclass(frozen=True, slots=True)
class ExecutionConfig:
    """How the reconciler executes plans (flags of `kerf reconciler`)."""

    #: evictions per second over the whole cluster
    eviction_rate: float = 1.0
    #: how soon a workload with a change under way is looked at again
    follow_s: float = 1.0
    #: how soon an eviction a PDB refused (429) is tried again; it doubles with each
    #: refusal of the same pod in a row, up to `refused_retry_max_s`
    refused_retry_s: float = 10.0
    refused_retry_max_s: float = 300.0
    #: how soon an eviction held for a stale webhook Lease is tried again
    lease_retry_s: float = 10.0
    #: a workload whose inputs did not change is decided again when its decisions can
    #: change (their `Horizon`: a pause running out, a window opening or closing, a
    #: cooldown ending, a recommendation growing stale), and at least this often (the
    #: times a decision reads that its span does not describe)
    steady_horizon: timedelta = timedelta(minutes=10)
    #: a change in place is reported (status, `Resized` event) when its rollout is done;
    #: one under way longer than this is reported as `Pending` first (0: report every pass)
    pending_after: timedelta = timedelta(seconds=10)
    instance: str = field(default_factory=socket.gethostname)

    @property
    def timings(self) -> Timings:
        """The waits a plan asks for."""
        return Timings(self.follow_s, self.refused_retry_s, self.lease_retry_s)
