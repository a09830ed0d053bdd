"""Rollback state (SPEC §8, seed rollback-policies.txt): its annotation codec, the choice
of the rollback policy and the backoff formula."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import orjson

from app.model.annotations import ROLLBACK_STATE, dumps
from app.model.apitime import rfc3339_as_kept
from app.model.crd import ClusterRollbackPolicy, RollbackPolicy
from app.model.durations import parse_duration
from app.model.workloads import ContainerResources, Workload, parse_time

if TYPE_CHECKING:
    from app.store.view import ClusterView

Mode = Literal[
    "idle", "monitoring", "monitoringSucceeded", "rollingBack", "backingOff", "failedPermanent"
]
MODES: tuple[str, ...] = Mode.__args__  # type: ignore[attr-defined]
#: While in these modes the rollback restore keys are published and win selection.
#: `failedPermanent` keeps them: the failed recommendation must not come back through
#: selection (when no restore target exists there is nothing to publish).
RESTORING_MODES = frozenset({"rollingBack", "backingOff", "failedPermanent"})


class RollbackStateError(ValueError):
    """The rollback-state annotation cannot be read."""


@dataclass(frozen=True, slots=True)
class RollbackState:
    """The `rightsizing.kubex.ai/rollback-state` annotation of a workload."""

    mode: str = "idle"
    turn: int = 1
    started_at: datetime | None = None
    expiry_at: datetime | None = None
    rollback_started_at: datetime | None = None
    active_recommendation_fingerprint: str | None = None
    failure_reason: str | None = None
    failure_message: str | None = None
    last_successful_state: dict[str, ContainerResources] | None = field(default=None)
    #: the baseline cohort of the monitoring window: the pods adoption is measured against
    cohort: int | None = None

    @property
    def restoring(self) -> bool:
        """True while rollback values must be applied."""
        return self.mode in RESTORING_MODES


def _stamp(value: datetime | None) -> str | None:
    return rfc3339_as_kept(value) if value else None


def encode_state(state: RollbackState) -> str:
    """The annotation value (canonical JSON)."""
    body: dict[str, Any] = {
        "mode": state.mode,
        "turn": state.turn,
        "startedAt": _stamp(state.started_at),
        "expiryAt": _stamp(state.expiry_at),
        "rollbackStartedAt": _stamp(state.rollback_started_at),
        "activeRecommendationFingerprint": state.active_recommendation_fingerprint,
        "failureReason": state.failure_reason,
        "failureMessage": state.failure_message,
        "lastSuccessfulState": (
            {"containers": state.last_successful_state}
            if state.last_successful_state is not None
            else None
        ),
        "cohort": state.cohort,
    }
    return dumps({k: v for k, v in body.items() if v is not None})


def decode_state(text: str) -> RollbackState:
    """Parse the annotation; raise RollbackStateError naming what is wrong."""
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise RollbackStateError(f"rollback-state is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise RollbackStateError("rollback-state must be a JSON object")
    mode = raw.get("mode", "idle")
    if mode not in MODES:
        raise RollbackStateError(f"rollback-state mode {mode!r} is not one of {', '.join(MODES)}")
    try:
        last = raw.get("lastSuccessfulState")
        return RollbackState(
            mode=mode,
            turn=int(raw.get("turn", 1)),
            started_at=parse_time(raw.get("startedAt")),
            expiry_at=parse_time(raw.get("expiryAt")),
            rollback_started_at=parse_time(raw.get("rollbackStartedAt")),
            active_recommendation_fingerprint=raw.get("activeRecommendationFingerprint"),
            failure_reason=raw.get("failureReason"),
            failure_message=raw.get("failureMessage"),
            last_successful_state=(last or {}).get("containers") if last else None,
            cohort=int(raw["cohort"]) if raw.get("cohort") is not None else None,
        )
    except (TypeError, ValueError, AttributeError) as exc:
        raise RollbackStateError(f"rollback-state has a bad field: {exc}") from None


AnyRollbackPolicy = RollbackPolicy | ClusterRollbackPolicy


def choose_rollback_policy(policies: Iterable[AnyRollbackPolicy]) -> AnyRollbackPolicy | None:
    """Among matching rollback policies: higher weight, then older, then smaller name."""
    best: AnyRollbackPolicy | None = None
    for policy in policies:
        if best is None or _rollback_rank(policy) < _rollback_rank(best):
            best = policy
    return best


def _rollback_rank(policy: AnyRollbackPolicy) -> tuple[Any, ...]:
    created = policy.metadata.creation_timestamp
    return (
        -policy.spec.weight,
        created.timestamp() if created else float("-inf"),
        policy.metadata.namespace or "",
        policy.metadata.name,
    )


def backoff_wait(policy: AnyRollbackPolicy, turn: int) -> timedelta:
    """`timePeriod × multiplyByTurn × turn` (seed: 1m, ×2 → turn 1 waits 2m, turn 2 4m)."""
    backoff = policy.spec.backoff
    return parse_duration(backoff.time_period) * backoff.multiply_by_turn * turn


def restore_target(
    policy: AnyRollbackPolicy,
    state: RollbackState,
    manifest: dict[str, ContainerResources],
) -> dict[str, ContainerResources] | None:
    """The values a rollback restores: the manifest's, or the last successful state
    (None when `lastSuccessful` has nothing recorded: rollbackRecommendationUnavailable)."""
    if policy.spec.rollback_target == "manifest":
        return manifest
    return state.last_successful_state


def rollback_state(view: ClusterView, workload: Workload) -> RollbackState | None:
    """The rollback state annotation of a workload (None when absent or unreadable, the
    reason then among the view's warnings)."""
    text = workload.annotations.get(ROLLBACK_STATE)
    if not text:
        return None
    try:
        return decode_state(text)
    except RollbackStateError as exc:
        view.warnings.append(f"{workload.kind} {workload.namespace}/{workload.name}: {exc}")
        return None
