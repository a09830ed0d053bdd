"""What one pass did: the plan's state, as the actuator carried it out (a resize the API
accepted or rejected, an eviction it took or refused). The report is built from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.model.crd import RightsizingRecommendation


@dataclass(slots=True)
class Outcome:
    """What one pass did and found, beyond the decisions."""

    requeue: float | None = None
    #: a change is under way (made now, or still settling)
    busy: bool = False
    blocked: tuple[str, str] | None = None
    #: the `lastApplied` entry (without its time) of what this pass applied
    applied: dict[str, Any] | None = None
    #: the pod resized in place in this pass, and the pod evicted
    resized: str | None = None
    evicted: str | None = None
    #: the status must be written now (a decision is about to read it)
    report: bool = False
    #: Events still to name: (reason, note, warning)
    events: list[tuple[str, str, bool]] = field(default_factory=list)
    #: Events named already (an eviction's, in the intent recorded before it)
    named: list[dict[str, Any]] = field(default_factory=list)
    #: `named` and `events` as `pendingEvents` entries, once named
    told: list[dict[str, Any]] | None = None
    #: the record as the pass read it; `created`: the pass created it (it was missing)
    record: RightsizingRecommendation | None = None
    created: bool = False
    #: this pass recorded an eviction intent (`pendingEviction`): its status clears it
    intent: bool = False
    #: something was written to the cluster in this pass
    wrote: bool = False
    #: "workload" | "record" -> the version this pass's last write of it answered with
    versions: dict[str, str] = field(default_factory=dict)
    #: the version of the record's status this pass wrote (its eviction intent), which
    #: a retry reads: Events are named from it as from a status read
    status_version: str | None = None

    def again_in(self, seconds: float | None) -> None:
        """Look again after `seconds` at the latest (None: no change)."""
        if seconds is not None:
            self.requeue = seconds if self.requeue is None else min(self.requeue, seconds)
