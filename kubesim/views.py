"""Resources served at one version and stored at another, with their conversions.

`events.k8s.io/v1` Events are stored as `v1` Events, `autoscaling/v1` HPAs as
`autoscaling/v2`, as on a real server; both versions show the same objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubesim import events, hpa
from kubesim.resources import ResourceType

Obj = dict[str, Any]
Convert = Callable[[Obj], Obj]

# (group, version, plural) of the view -> (view to storage, storage to view).
_VIEWS: dict[tuple[str, str, str], tuple[Convert, Convert]] = {
    ("events.k8s.io", "v1", "events"): (events.to_core, events.from_core),
    ("autoscaling", "v1", "horizontalpodautoscalers"): (hpa.to_v2, hpa.from_v2),
}


def _pair(rt: ResourceType) -> tuple[Convert, Convert] | None:
    return _VIEWS.get((rt.group, rt.version, rt.plural)) if rt.storage else None


def to_storage(rt: ResourceType, obj: Obj) -> Obj:
    """`obj`, written at `rt`'s version, in its storage form (unchanged when not a view
    or already in storage form)."""
    pair = _pair(rt)
    if pair is None or obj.get("apiVersion") != rt.api_version:
        return obj
    return pair[0](obj)


def present(rt: ResourceType, obj: Obj) -> Obj | None:
    """A stored object as served at `rt`'s version, or None when `rt` is not a view."""
    pair = _pair(rt)
    return None if pair is None else pair[1](obj)
