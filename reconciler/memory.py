"""What the reconciler remembers of each workload between passes: one record per workload
(kopf's inventory is the model), created by the first pass over it and dropped when the
workload is gone, with everything of its pods inside it.

The cluster holds everything a decision reads; this memory only holds what the cluster
does not show yet (this replica's writes the view has not caught up with, a rollout in
place not reported yet, Events not told) and what saves work (a status found written, the
inputs of a quiet pass). Losing it costs a pass, never a wrong write: a new leader starts
with none.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, TypeVar

import orjson

from app.decide import PodDecision

#: How long (seconds) a workload waits for the view to show annotations this reconciler
#: wrote before it is decided again regardless (someone else may have changed them).
ANNOTATIONS_WAIT_S = 30.0
#: How long (seconds) a workload whose view is behind this reconciler's own writes waits
#: before it looks again with no news. The watch brings each written version and queues
#: the workload at once; a look before it would find the view as behind (under load the
#: watches lag by seconds, and polling every `follow_s` made most of the passes), so this
#: is only the net should that event never come.
BEHIND_WAIT_S = 30.0

_K = TypeVar("_K")
_V = TypeVar("_V")
#: The empty mapping every workload's memory holds until its first write of a kind (a
#: dict each, four per workload, weighed 256 bytes a workload, and most stay empty).
_NOTHING: Mapping[Any, Any] = MappingProxyType({})


def _nothing() -> Mapping[Any, Any]:
    return _NOTHING


def _own(mapping: Mapping[_K, _V]) -> dict[_K, _V]:
    """A mapping of a memory to write to: itself once written, else a new dict."""
    return mapping if isinstance(mapping, dict) else {}


def _shared_if_empty(mapping: Mapping[_K, _V]) -> Mapping[_K, _V]:
    """The mapping, or the shared empty one once it is empty (an emptied dict keeps the
    size it grew to)."""
    return mapping or _NOTHING


@dataclass(frozen=True, slots=True)
class Unreported:
    """A change in place whose rollout is under way and not in the status yet."""

    since: datetime
    last_applied: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Steady:
    """A quiet pass: one over exactly these objects and this version of the record before
    `until` would decide the same and write nothing; `timed`: `until` is when its
    decisions change. `again`: the pass followed a rollout in place and looks again after
    that many seconds (a pass over the same objects would only wait as it did)."""

    until: datetime
    inputs: tuple[Any, ...]
    timed: bool
    #: the version of the record whose status the pass found as it reports it, or wrote
    #: ("" without a record): the report reads all of it, the decisions only some fields
    record: str
    again: float | None = None


def _uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid"))


def proposal_key(pod: Mapping[str, Any], decision: PodDecision) -> tuple[str, Any, bytes]:
    """What identifies one resize proposal for one pod: its uid, its spec's generation
    and the values proposed."""
    meta = pod.get("metadata") or {}
    values = orjson.dumps(decision.values, option=orjson.OPT_SORT_KEYS)
    return str(meta.get("uid")), meta.get("generation"), values


@dataclass(slots=True)
class WorkloadMemory:
    """Everything remembered of one workload and its pods."""

    #: pod uid -> the resourceVersion it had when kerf acted on it (until the view shows
    #: the pod changed, it is not acted on again)
    sent: Mapping[str, str] = field(default_factory=_nothing)
    #: (pod uid, pod generation, proposed values) -> the API's message for a resize it
    #: rejected: that proposal is never sent again, it goes to the fallback at once
    rejected: Mapping[tuple[str, Any, bytes], str] = field(default_factory=_nothing)
    #: pod uid -> evictions of it refused in a row (429: a disruption budget)
    refusals: Mapping[str, int] = field(default_factory=_nothing)
    #: "workload" | "record" -> the resourceVersions this reconciler's writes left behind:
    #: the one it wrote over, and those between two writes of one pass (a record is
    #: created, then its status written). While the view shows one of them, it waits.
    #: (Tuples of one or two versions: a set weighs 216 bytes, kept for every workload
    #: written until its next pass.)
    written: Mapping[str, tuple[str, ...]] = field(default_factory=_nothing)
    #: the change in place under way that the status does not show yet
    unreported: Unreported | None = None
    #: Events of a pass whose status write failed: the next pass tells them
    untold: Sequence[dict[str, Any]] = ()
    #: the name (`intent_name`) of an eviction this reconciler recorded and knows did not
    #: go out (not asked for yet, refused, or its pod already gone): whatever becomes of the
    #: pod, that record is dropped, not told. Only the replica that recorded it can know.
    unsent_eviction: str | None = None
    #: annotations this reconciler wrote and a monotonic deadline: until the view's
    #: workload shows them (or the deadline passes), the workload waits
    annotations_sent: tuple[dict[str, str | None], float] | None = None
    #: (record version, digest of a status) found equal to that record's status, or
    #: written as it (a digest: 25,000 whole statuses would weigh ~100 MB)
    seen_status: tuple[str, bytes] | None = None
    #: the last quiet pass
    steady: Steady | None = None

    # ------------------------------------------------------------------ pods

    def awaiting(self, pod: Mapping[str, Any]) -> bool:
        """The pod was acted on and the view has not shown it changed since."""
        uid = _uid(pod)
        sent = self.sent.get(uid)
        if sent is None:
            return False
        if sent == (pod.get("metadata") or {}).get("resourceVersion"):
            return True
        del _own(self.sent)[uid]  # written: its own dict
        self.sent = _shared_if_empty(self.sent)
        return False

    def awaits(self, pods: Iterable[Mapping[str, Any]]) -> bool:
        """The view has not shown one of these pods changed since kerf acted on it."""
        return bool(self.sent) and any(self.awaiting(p) for p in pods)

    def mark_sent(self, pod: Mapping[str, Any]) -> None:
        """Remember the version of a pod just acted on."""
        sent = self.sent = _own(self.sent)
        sent[_uid(pod)] = str((pod.get("metadata") or {}).get("resourceVersion"))

    def reject(self, pod: Mapping[str, Any], decision: PodDecision, message: str) -> None:
        """Remember the API's message for a proposal it rejected (`rejection`)."""
        rejected = self.rejected = _own(self.rejected)
        rejected[proposal_key(pod, decision)] = message

    def rejection(self, pod: Mapping[str, Any], decision: PodDecision) -> str | None:
        """The API's message for this proposal, if it rejected it before."""
        return self.rejected.get(proposal_key(pod, decision)) if self.rejected else None

    def refused(self, pod: Mapping[str, Any]) -> int:
        """Count one more refused eviction of the pod; returns the refusals before it."""
        uid = _uid(pod)
        count = self.refusals.get(uid, 0)
        refusals = self.refusals = _own(self.refusals)
        refusals[uid] = count + 1
        return count

    def evicted(self, pod: Mapping[str, Any]) -> None:
        """The pod's eviction went through: its refusals are forgotten."""
        if self.refusals:
            _own(self.refusals).pop(_uid(pod), None)
            self.refusals = _shared_if_empty(self.refusals)

    def knows_unsent(self, intent_name: str | None) -> bool:
        """This reconciler recorded the eviction so named and knows it did not go out."""
        return intent_name is not None and intent_name == self.unsent_eviction

    def keep_pods(self, pods: Iterable[Mapping[str, Any]]) -> None:
        """Forget what is remembered of pods the workload no longer has."""
        if not (self.sent or self.rejected or self.refusals):
            return
        uids = {_uid(p) for p in pods}
        self.sent = _shared_if_empty({u: v for u, v in self.sent.items() if u in uids})
        self.rejected = _shared_if_empty({k: v for k, v in self.rejected.items() if k[0] in uids})
        self.refusals = _shared_if_empty({u: n for u, n in self.refusals.items() if u in uids})

    # ------------------------------------------------------------------ own writes

    def behind(self, versions: Mapping[str, str]) -> bool:
        """The view shows a version of the workload or its record that this reconciler
        wrote over: a pass now would decide from what was there before. A version not
        among them means the view caught up: forgotten."""
        behind = False
        for key, version in versions.items():
            written = self.written.get(key)
            if written is None:
                continue
            if version in written:
                behind = True
            else:
                del _own(self.written)[key]
        self.written = _shared_if_empty(self.written)
        return behind

    def wrote(self, key: str, before: str, after: str) -> None:
        """A write of the workload or its record left `before` stale; `after`, the version
        it answered with, is not."""
        stale = self.written.get(key, ())
        if before not in stale:
            stale = (*stale, before)
        written = self.written = _own(self.written)
        written[key] = tuple(v for v in stale if v != after) if after else stale

    def wait_s(self) -> float:
        """How long to wait for the view to catch up (`behind`, `unseen_annotations`)
        before looking again regardless."""
        if self.annotations_sent is None:
            return BEHIND_WAIT_S
        return max(0.05, min(BEHIND_WAIT_S, self.annotations_sent[1] - time.monotonic()))

    def remember_annotations(self, patch: Mapping[str, str | None]) -> None:
        """Remember what a write of workload annotations set (`unseen_annotations`)."""
        before = self.annotations_sent[0] if self.annotations_sent else {}
        self.annotations_sent = ({**before, **patch}, time.monotonic() + ANNOTATIONS_WAIT_S)

    def unseen_annotations(self, annotations: Mapping[str, str]) -> bool:
        """The view's workload does not show the annotations this reconciler wrote yet. A
        newer version alone does not prove it does: another writer (the Deployment
        controller updating the status) may have committed in between, and a pass over
        that version would decide from the annotations as they were before (and start a
        rollback turn twice, say). Bounded in time, should someone else change the keys."""
        if self.annotations_sent is None:
            return False
        patch, until = self.annotations_sent
        if all(annotations.get(k) == v for k, v in patch.items()) or time.monotonic() > until:
            self.annotations_sent = None
            return False
        return True


class Inventory:
    """One `WorkloadMemory` per workload key: created on the first pass over a workload,
    dropped when the workload is gone (`forget`, or `keep` with the workloads there are)."""

    def __init__(self) -> None:
        self._records: dict[Any, WorkloadMemory] = {}

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._records)

    def get(self, key: Any) -> WorkloadMemory:
        """The workload's record, new when there is none."""
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = WorkloadMemory()
        return record

    def peek(self, key: Any) -> WorkloadMemory | None:
        """The workload's record, if there is one."""
        return self._records.get(key)

    def forget(self, key: Any) -> None:
        """The workload is gone: nothing of it is kept."""
        self._records.pop(key, None)

    def keep(self, keys: Iterable[Any]) -> None:
        """Forget every workload but these (the view's, at a resync: a deletion this
        replica did not pass over, while it was not leading, leaves nothing behind)."""
        live = set(keys)
        for key in [k for k in self._records if k not in live]:
            del self._records[key]

    def forget_unreported(self) -> None:
        """Drop the rollouts not reported yet (a change of leader: the next pass reads
        what was applied from the pods and the record)."""
        for record in self._records.values():
            record.unreported = None
