"""An eviction recorded before it is asked for (`status.pendingEviction`), so that its
Events survive a replica that dies, or loses the leader Lease, between the eviction and
the status write after it.

The eviction leaves nothing of its own behind (the pod goes, its replacement looks like any
other), so nothing else could tell a successor that it happened. The record names the pod
(name and uid), the values the eviction applies and its Events, named already: whoever
finds the record tells those Events if that pod is gone or marked by the eviction, and
drops the record if it still runs unmarked, terminating or not (the eviction never went
out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.model.crd import PendingEviction


def eviction_intent(
    pod: Mapping[str, Any],
    applied: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The `pendingEviction` status entry of an eviction of `pod` that applies `applied`
    (a `lastApplied` entry without its time; None when it applies no plan) and makes
    `events` (`pendingEvents` entries)."""
    meta = pod.get("metadata") or {}
    entry: dict[str, Any] = {
        "podUid": str(meta.get("uid") or ""),
        "podName": str(meta.get("name") or ""),
        "events": [dict(e) for e in events],
    }
    for key in ("containers", "proposal", "fingerprint"):
        if applied and applied.get(key):
            entry[key] = applied[key]
    return entry


def intent_name(intent: PendingEviction) -> str | None:
    """What names one recorded eviction: its first Event's name (random, given once)."""
    return intent.events[0].name if intent.events else None


def happened(intent: PendingEviction, pods: Sequence[Mapping[str, Any]]) -> bool:
    """The eviction went out: the pod of that name is gone, another one (a StatefulSet's
    replacement keeps the name, not the uid), or marked by an eviction (the API server's
    `DisruptionTarget` condition, set before it deletes). Deleting without the mark, it
    was deleted by someone else."""
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("name") != intent.pod_name:
            continue
        return meta.get("uid") != intent.pod_uid or evicted_by_the_api(pod)
    return True


def evicted_by_the_api(pod: Mapping[str, Any]) -> bool:
    """The Eviction API has taken the pod: its `DisruptionTarget` condition says so."""
    return any(
        c.get("type") == "DisruptionTarget"
        and c.get("status") == "True"
        and c.get("reason") == "EvictionByEvictionAPI"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def applied_by(intent: PendingEviction) -> dict[str, Any] | None:
    """The `lastApplied` entry (without its time) the eviction carried out, if any."""
    if not intent.containers:
        return None
    dumped = intent.model_dump(by_alias=True, mode="json", exclude_none=True)
    applied: dict[str, Any] = {"method": "evict", "containers": dumped["containers"]}
    for key in ("proposal", "fingerprint"):
        if key in dumped:
            applied[key] = dumped[key]
    return applied


def pending_events_of(intent: PendingEviction) -> list[dict[str, Any]]:
    """The intent's Events as `pendingEvents` entries."""
    return [e.model_dump(by_alias=True, mode="json") for e in intent.events]
