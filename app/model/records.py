"""How the view keeps a RightsizingRecommendation: its status as compressed JSON, parsed
when read.

A record's status is the heaviest kerf object in a cluster of any size (one per workload):
as pydantic models, ~5 KB each — conditions, selected values, the proposal, the last
applied change, each a model with its own dict — against ~1.6 KB as compact JSON, and a
third of that compressed (its keys and policy names repeat; a decompression costs a few µs
against the parse's tens). The
reconciler reads no status in a pass over a workload whose inputs did not change (most
passes of a steady cluster) and a handful in a pass that decides, one after the other:
the last few statuses parsed are kept (`RECENT`), so such a pass parses its record's
status once (a parse is tens of µs; keeping every status parsed cost ~3.5 KB a workload).
"""

from __future__ import annotations

import threading
import zlib
from typing import Any

from pydantic import PrivateAttr

from app.model.crd import RecommendationStatus, RightsizingRecommendation
from app.model.workloads import WORKLOAD_KINDS

#: How many parsed statuses are kept: a pass reads its record's status between API calls,
#: and the reconciler's workers (8 at most in practice) interleave their passes there.
RECENT = 16
#: (namespace, name) -> (the record, its parsed status), oldest first; an entry serves only
#: that very record (a new version of it parses its own)
_recent: dict[tuple[str, str], tuple[StoredRecommendation, RecommendationStatus | None]] = {}
_recent_lock = threading.Lock()  # the webhook decides on several threads


def record_name(kind: str, name: str) -> str:
    """The name of the RightsizingRecommendation kerf keeps for a workload:
    `<kind-lowercase>-<workload name>` (SPEC §2)."""
    return f"{kind.lower()}-{name}"


def record_targets(namespace: str, name: str) -> list[tuple[str, str, str]]:
    """The (kind, namespace, name) of every workload whose record `name` could be (a name
    reads as `<kind>-<name>` for each kind whose prefix it has)."""
    return [
        (kind, namespace, name[len(kind) + 1 :])
        for kind in WORKLOAD_KINDS
        if name.startswith(record_name(kind, ""))
    ]


class StoredRecommendation(RightsizingRecommendation):
    """A RightsizingRecommendation whose `status` is parsed from compressed JSON when read.

    Readers share the parsed status as they shared the view's model before: none changes
    it (a reader that did would change what the next reads of this version see)."""

    #: the status as zlib-compressed JSON (None: no status)
    _status_packed: bytes | None = PrivateAttr(default=None)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names not in the instance dict: `status` was taken out of it.
        if name == "status":
            return _status_of(self)
        return super().__getattr__(name)  # type: ignore[misc]

    def whole(self) -> RightsizingRecommendation:
        """The record with its status parsed, as a plain RightsizingRecommendation."""
        return RightsizingRecommendation.model_construct(**self.__dict__, status=self.status)

    # Pydantic dumps what the instance dict holds, which lacks the status: dump it whole.
    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """As RightsizingRecommendation.model_dump, status included."""
        return self.whole().model_dump(**kwargs)

    def model_dump_json(self, **kwargs: Any) -> str:
        """As RightsizingRecommendation.model_dump_json, status included."""
        return self.whole().model_dump_json(**kwargs)


def stored(record: RightsizingRecommendation) -> StoredRecommendation:
    """The record as the view keeps it: the same object for every read until a new version
    arrives (the reconciler's steady-pass check compares its inputs by identity)."""
    if isinstance(record, StoredRecommendation):
        return record
    fields = {k: v for k, v in record.__dict__.items() if k != "status"}
    kept = StoredRecommendation.model_construct(**fields)
    del kept.__dict__["status"]
    status = record.status
    # Null fields left out: every field that can be null defaults to null, so the status
    # read back equals the one given (a null field of an older writer, unknown to this
    # one, is dropped; kerf's own dumps leave nulls out too).
    raw = (
        zlib.compress(status.model_dump_json(by_alias=True, exclude_none=True).encode(), 1)
        if status is not None
        else None
    )
    kept.__pydantic_private__["_status_packed"] = raw  # type: ignore[index]
    return kept


def _status_of(record: StoredRecommendation) -> RecommendationStatus | None:
    """The record's status: parsed again unless among the `RECENT` last parsed."""
    key = (record.metadata.namespace or "", record.metadata.name)
    with _recent_lock:
        found = _recent.get(key)
    if found is not None and found[0] is record:
        return found[1]
    raw = record.__pydantic_private__["_status_packed"]  # type: ignore[index]
    status = None if raw is None else RecommendationStatus.model_validate_json(zlib.decompress(raw))
    with _recent_lock:
        _recent.pop(key, None)
        _recent[key] = (record, status)
        while len(_recent) > RECENT:
            del _recent[next(iter(_recent))]
    return status
