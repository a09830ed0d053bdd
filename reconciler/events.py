"""`events.k8s.io/v1` Events on the workload (SPEC §7) and the seed's dedup rule: a
Blocked or Skipped event is recorded once per workload and reason, and again only when
the reason or the proposed values change. The last one is kept in the
RightsizingRecommendation status (`lastEvent`), so a restart does not repeat it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.annotations import dumps
from app.owners import WorkloadRef
from webhook.lease import micro_time

REPORTING_CONTROLLER = "rightsizing.kubex.ai/kerf-reconciler"
#: Reasons of actions: each is recorded as it happens (an action is never a repeat).
ACTION_REASONS = frozenset({"Resized", "Evicted", "ResizeFallback"})


def values_digest(values: Any) -> str:
    """A short digest of proposed values (what the dedup rule compares)."""
    return hashlib.sha256(dumps(values).encode()).hexdigest()[:16]


def dedup_key(reason: str, values: Any) -> dict[str, str]:
    """The `lastEvent` status entry for a Blocked or Skipped event."""
    return {"reason": reason, "values": values_digest(values)}


def is_repeat(last_event: Mapping[str, Any] | None, key: Mapping[str, str]) -> bool:
    """The same reason and values were recorded last time."""
    return last_event is not None and dict(last_event) == dict(key)


#: The API refuses an events.k8s.io/v1 note longer than this, counted in bytes (UTF-8).
NOTE_LIMIT_BYTES = 1024


def note_within(note: str, limit: int = NOTE_LIMIT_BYTES) -> str:
    """`note` cut to at most `limit` UTF-8 bytes, never inside a character."""
    encoded = note.encode()
    if len(encoded) <= limit:
        return note
    return encoded[:limit].decode(errors="ignore")


def event_body(
    ref: WorkloadRef,
    api_version: str,
    uid: str | None,
    *,
    reason: str,
    note: str,
    action: str,
    warning: bool,
    now: datetime,
    instance: str,
) -> dict[str, Any]:
    """One Event regarding the workload."""
    regarding: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": ref.kind,
        "name": ref.name,
        "namespace": ref.namespace,
    }
    if uid:
        regarding["uid"] = uid
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"generateName": f"{ref.name}.kerf-", "namespace": ref.namespace},
        "eventTime": micro_time(now),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance,
        "action": action,
        "reason": reason,
        "regarding": regarding,
        "note": note_within(note),
        "type": "Warning" if warning else "Normal",
    }
