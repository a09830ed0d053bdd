"""The content types of a PATCH request, named once (lightkube's `PatchType` as the model)."""

from __future__ import annotations

from enum import StrEnum


class PatchType(StrEnum):
    """How the API server reads a PATCH body."""

    MERGE = "application/merge-patch+json"
    STRATEGIC_MERGE = "application/strategic-merge-patch+json"
