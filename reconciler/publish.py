"""Policy sync publishing (SPEC §1, §3, §7): the merge patch that makes a workload's kerf
annotations equal the in-memory sync result."""

from __future__ import annotations

from collections.abc import Mapping

from app.model.annotations import is_recommendation_key


def annotation_patch(
    current: Mapping[str, str], desired: Mapping[str, str]
) -> dict[str, str | None] | None:
    """The `metadata.annotations` merge patch from `current` to `desired`, touching only
    keys kerf owns (recommendation keys and the args hook): changed or new keys set, stale
    ones removed (null). None when nothing differs, so a steady cluster writes nothing."""
    patch: dict[str, str | None] = {
        key: value for key, value in desired.items() if current.get(key) != value
    }
    for key in current:
        if key not in desired and is_recommendation_key(key):
            patch[key] = None
    return patch or None
