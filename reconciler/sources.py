"""What is wrong with a recommendation ConfigMap, told once per version of it: a JSON log
line and a Warning Event on the ConfigMap (SPEC §4). A ConfigMap that did not load has
reason `RecommendationsNotLoaded`; one that loaded with rows skipped has
`InvalidRecommendation`. The workloads it feeds say it in their own status (app/decide)."""

from __future__ import annotations

import logging
from datetime import datetime

from app.model.owners import WorkloadRef
from app.runtime.clock import Clock
from app.runtime.jsonlog import log_fields
from app.store.sources import SourceKey, SourceState
from app.store.view import ClusterView
from reconciler.api import Writer
from reconciler.events import event_body, pending_event

logger = logging.getLogger("kerf.reconciler")

NOT_LOADED = "RecommendationsNotLoaded"
INVALID_ROWS = "InvalidRecommendation"


def source_problem(state: SourceState) -> tuple[str, str] | None:
    """(reason, note) of a ConfigMap's version, or None when nothing is wrong with it."""
    if state.failure is not None:
        return NOT_LOADED, f"{state.failure}; the rows it had are kept and not acted on"
    if state.invalid:
        count = len(state.invalid)
        warnings = "; ".join(bad.warning for bad in state.invalid)
        return INVALID_ROWS, f"{count} row(s) skipped, never acted on: {warnings}"
    return None


class SourceReporter:
    """Tells each bad version of a recommendation ConfigMap once (kept in memory: after a
    restart the current version is told once more)."""

    def __init__(self, writer: Writer, *, instance: str, clock: Clock) -> None:
        self._writer = writer
        self._instance = instance
        self._clock = clock
        self._told: dict[SourceKey, str] = {}

    async def report(self, view: ClusterView) -> int:
        """Log and record an Event for every bad ConfigMap version not told yet; returns
        the number of Events written."""
        with view.lock:
            states = view.recommendations("sources")
        known = {s.key for s in states}
        for key in [k for k in self._told if k not in known]:
            del self._told[key]
        written = 0
        for state in states:
            problem = source_problem(state)
            if problem is None:
                self._told.pop(state.key, None)
                continue
            if self._told.get(state.key) == state.resource_version:
                continue
            await self._tell(state, *problem, self._clock())
            self._told[state.key] = state.resource_version
            written += 1
        return written

    async def _tell(self, state: SourceState, reason: str, note: str, now: datetime) -> None:
        log_fields(
            logger,
            "recommendation ConfigMap",
            logging.WARNING,
            configmap=f"{state.namespace}/{state.name}",
            resourceVersion=state.resource_version,
            reason=reason,
            message=note,
        )
        ref = WorkloadRef("ConfigMap", state.namespace, state.name)
        await self._writer.create_event(
            event_body(
                ref,
                "v1",
                state.uid or None,
                pending_event(
                    ref, reason, note, warning=True, now=now, action="LoadRecommendations"
                ),
                self._instance,
            )
        )
