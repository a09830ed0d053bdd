"""GlobalConfiguration `status`, as Kubex documents it: the `PodAdmissionWebhookHealthy`
condition and `webhookHealth` from the webhook's Lease (kerf's judgement of its health:
renewed within `webhookLeaseMaxAge`), and `recommendationReload` from the recommendation
ConfigMaps the view holds.

Pure: the reconciler hands in what it knows and writes the result when it differs from
the status in the cluster. Times move only when what they time changes, so a steady
cluster costs no write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.model.apitime import rfc3339
from app.model.durations import format_duration
from app.store.sources import SourceState

WEBHOOK_HEALTHY = "PodAdmissionWebhookHealthy"


@dataclass(frozen=True, slots=True)
class Reload:
    """What the recommendation ConfigMaps yielded: rows of those that loaded, and why the
    others did not."""

    #: (namespace, name, resourceVersion) of every ConfigMap: a new one is a reload
    versions: frozenset[tuple[str, str, str]]
    rows: int
    errors: tuple[str, ...]


def reload_of(states: Iterable[SourceState]) -> Reload:
    found = list(states)
    return Reload(
        frozenset((s.namespace, s.name, s.resource_version) for s in found),
        sum(s.counted for s in found if s.failure is None),
        tuple(sorted(f"{s.namespace}/{s.name}: {s.failure}" for s in found if s.failure)),
    )


def global_status(
    previous: Mapping[str, Any] | None,
    *,
    renewed_at: datetime | None,
    max_age: timedelta,
    reload: Reload,
    reload_changed: bool,
    now: datetime,
) -> dict[str, Any]:
    """The whole status: `reload_changed` when the ConfigMaps' versions differ from those
    the status was last written for (the reload time moves then)."""
    previous = previous or {}
    healthy = renewed_at is not None and now - renewed_at <= max_age
    if renewed_at is None:
        reason, message = "NoLease", "the webhook has not renewed its Lease yet"
    elif healthy:
        reason = "LeaseRenewed"
        message = (
            f"the webhook renews its Lease within webhookLeaseMaxAge {format_duration(max_age)}"
        )
    else:
        reason = "LeaseStale"
        message = (
            f"the webhook's Lease was last renewed at {rfc3339(renewed_at)}, more than "
            f"webhookLeaseMaxAge {format_duration(max_age)} ago"
        )
    old_condition: Mapping[str, Any] = next(
        (c for c in previous.get("conditions") or [] if c.get("type") == WEBHOOK_HEALTHY), {}
    )
    state = "True" if healthy else "False"
    since = (
        old_condition.get("lastTransitionTime")
        if old_condition.get("status") == state
        else rfc3339(now)
    )
    condition = {
        "type": WEBHOOK_HEALTHY,
        "status": state,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }
    old_reload = previous.get("recommendationReload") or {}
    reload_status: dict[str, Any] = {
        "lastTime": rfc3339(now)
        if reload_changed or "lastTime" not in old_reload
        else old_reload["lastTime"],
        "lastCount": reload.rows,
        "configMaps": len(reload.versions),
    }
    if reload.errors:
        error = "; ".join(reload.errors)
        reload_status["lastError"] = error
        reload_status["lastErrorTime"] = (
            old_reload["lastErrorTime"]
            if old_reload.get("lastError") == error and "lastErrorTime" in old_reload
            else rfc3339(now)
        )
    return {
        "conditions": [condition],
        "recommendationReload": reload_status,
        "webhookHealth": {
            "healthy": healthy,
            "reason": reason,
            "since": since,
            "leaseMaxAge": format_duration(max_age),
        },
    }
