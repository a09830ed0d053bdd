"""Whether kerf is being uninstalled: one of its CRDs is being deleted.

Deleting the CRDs deletes every kerf object, kind by kind and in no set order: for a while a
policy can outlive its AutomationStrategy, and a decision would then block the workload
`StrategyNotFound` and tell it in a Warning Event on a workload kerf is about to leave. A
CRD being deleted carries a deletionTimestamp from the start of that, so the reconciler
watches kerf's CRDs (by their label) and stands down while any of them is terminating.
"""

from __future__ import annotations

from app.model.crd import CRD_KIND, CRD_NAMES
from app.store.view import ClusterView


def crds_being_deleted(view: ClusterView) -> list[str]:
    """kerf's CRDs that carry a deletionTimestamp, by name."""
    return [
        name
        for name in CRD_NAMES
        if ((view.get(CRD_KIND, "", name) or {}).get("metadata") or {}).get("deletionTimestamp")
    ]


def stand_down(view: ClusterView) -> str | None:
    """Why the reconciler must make no change now (None: it may): kerf's CRDs are being
    deleted, and the decisions would read a half-deleted configuration."""
    deleting = crds_being_deleted(view)
    if not deleting:
        return None
    shown = ", ".join(deleting[:3]) + (
        f" and {len(deleting) - 3} more" if len(deleting) > 3 else ""
    )
    return f"kerf's CRDs are being deleted ({shown}): making no change until they are gone"
