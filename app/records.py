"""How the view keeps a RightsizingRecommendation: its status as JSON bytes, parsed when
read.

A record's status is the heaviest kerf object in a cluster of any size (one per workload):
as pydantic models, ~5.7 KB each — conditions, selected values, the proposal, the last
applied change, each a model with its own dict — against ~1.5 KB as compact JSON. The
reconciler reads a status a few times per pass over a workload that is decided, and not
at all over one whose inputs did not change (most passes of a steady cluster), so parsing
it on every read (~5 – 20 µs) costs far less than keeping it parsed for every workload.
"""

from __future__ import annotations

from typing import Any

from pydantic import PrivateAttr

from app.models import RecommendationStatus, RightsizingRecommendation


class StoredRecommendation(RightsizingRecommendation):
    """A RightsizingRecommendation whose `status` is parsed from JSON bytes on each read
    (a new model every time: readers never change it, models are frozen or copied)."""

    _status_json: bytes | None = PrivateAttr(default=None)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names not in the instance dict: `status` was taken out of it.
        if name == "status":
            raw = self.__pydantic_private__["_status_json"]  # type: ignore[index]
            return None if raw is None else RecommendationStatus.model_validate_json(raw)
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
        status.model_dump_json(by_alias=True, exclude_none=True).encode()
        if status is not None
        else None
    )
    kept.__pydantic_private__["_status_json"] = raw  # type: ignore[index]
    return kept
