"""The view is a store: its public surface is listed here, so it cannot grow unnoticed.

A new query belongs on the view only when it answers from the objects and indexes the
view keeps; planning, parsing and caching go to their own module over the view
(`app/policy/plans.py`, `app/store/allocatable.py`, `app/decide/bounds.py`).
"""

from __future__ import annotations

import inspect

from app.store.view import ClusterView

SURFACE = {
    # updates
    "apply",
    "delete",
    "mark_synced",
    # objects by key, or every one of a kind
    "get",
    "objects",
    "kerf_object",
    "kerf_objects",
    "global_config",
    "workload",
    "workloads",
    # indexes
    "pods",
    "owner_of",
    "policies",
    "autoscalers",
    "node_requests",
    # the recommendation sources and records, as asked
    "recommendations",
}


def test_the_views_public_surface_is_the_listed_one() -> None:
    public = {name for name, _ in inspect.getmembers(ClusterView) if not name.startswith("_")}
    assert public == SURFACE, (
        f"added: {sorted(public - SURFACE)}, gone: {sorted(SURFACE - public)}; a query that "
        "plans, parses or caches belongs in its own module over the view"
    )
