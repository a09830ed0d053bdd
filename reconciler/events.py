"""Events on the workload (SPEC §7) and the seed's dedup rule: a
Blocked or Skipped event is recorded once per workload and reason, and again only when
the reason or the proposed values change. The last one is kept in the
RightsizingRecommendation status (`lastEvent`), so a restart does not repeat it.

Each is created through the core `v1` API, with the new fields (eventTime, action, the
reporting controller) and the old ones (firstTimestamp, lastTimestamp, count): the
`events.k8s.io/v1` API refuses the old ones, and without them `kubectl get events
--sort-by=.lastTimestamp` sorts kerf's Events before everything else. Read through
`events.k8s.io/v1` they are `deprecatedLastTimestamp` and `deprecatedCount`.

Exactly once: a pass's Events go into the status it writes (`pendingEvents`), each under a
name of its own; then each is created under that name (a second create of it is refused
with 409, so telling it again tells nothing) and the list is cleared. A status write that
fails keeps them for the next pass; a reconciler that finds a list left behind (killed
between the writes, an answer lost) tells what it names."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from app.model.annotations import dumps
from app.model.apitime import micro_time, rfc3339
from app.model.owners import WorkloadRef

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


#: The API refuses a note (a message, in v1) longer than this, counted in bytes (UTF-8).
NOTE_LIMIT_BYTES = 1024


def note_within(note: str, limit: int = NOTE_LIMIT_BYTES) -> str:
    """`note` cut to at most `limit` UTF-8 bytes, never inside a character."""
    encoded = note.encode()
    if len(encoded) <= limit:
        return note
    return encoded[:limit].decode(errors="ignore")


#: Room left in an Event name (253 characters) after `<workload>.kerf-`.
_NAME_SUFFIX = 16


def pending_event(
    ref: WorkloadRef,
    reason: str,
    note: str,
    *,
    warning: bool,
    now: datetime,
    action: str | None = None,
    identity: str | None = None,
) -> dict[str, Any]:
    """A `pendingEvents` entry: one Event to tell, named once and for all (`action`: what
    kerf was doing; by default the reason's own action, else `Decide`).

    The name is random, or, given `identity` (what the Event was derived from), a digest
    of it: a pass that derives the Event again from the same inputs names it alike, so
    its second create is refused (409) instead of telling it twice."""
    suffix = (
        hashlib.sha256(identity.encode()).hexdigest() if identity is not None else uuid.uuid4().hex
    )
    return {
        "name": f"{ref.name[: 253 - 6 - _NAME_SUFFIX]}.kerf-{suffix[:_NAME_SUFFIX]}",
        "reason": reason,
        "note": note_within(note),
        "type": "Warning" if warning else "Normal",
        "action": action or (reason if reason in ACTION_REASONS else "Decide"),
        "eventTime": micro_time(now),
    }


def merged(*lists: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pending events of several sources, each once (by name), in order."""
    seen: dict[str, dict[str, Any]] = {}
    for entries in lists:
        for entry in entries:
            seen.setdefault(str(entry["name"]), dict(entry))
    return list(seen.values())


def event_body(
    ref: WorkloadRef,
    api_version: str,
    uid: str | None,
    pending: Mapping[str, Any],
    instance: str,
) -> dict[str, Any]:
    """The core `v1` Event a `pendingEvents` entry tells, under its own name."""
    involved: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": ref.kind,
        "name": ref.name,
        "namespace": ref.namespace,
    }
    if uid:
        involved["uid"] = uid
    # Time, to the second, of the same instant as the MicroTime eventTime.
    seen = rfc3339(datetime.strptime(pending["eventTime"], "%Y-%m-%dT%H:%M:%S.%f%z"))
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": pending["name"], "namespace": ref.namespace},
        "eventTime": pending["eventTime"],
        "firstTimestamp": seen,
        "lastTimestamp": seen,
        "count": 1,
        "reportingComponent": REPORTING_CONTROLLER,
        "reportingInstance": instance,
        "action": pending["action"],
        "reason": pending["reason"],
        "involvedObject": involved,
        "message": pending["note"],
        "type": pending["type"],
    }
