"""RollbackPolicy and ClusterRollbackPolicy `status`: how many of the workloads each
governs are monitoring, rolled back (rollingBack or backingOff) and failed permanently."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from app.model.crd import RollbackPolicy
from app.policy.rollback import RollbackState, rollback_state
from app.policy.rollback_monitor import policy_counts, rollback_policy_for
from app.policy.sync import ROLLBACK_KINDS
from app.store.view import ClusterView
from reconciler.api import Writer

PolicyKey = tuple[str, str, str]


def governed_states(view: ClusterView) -> dict[PolicyKey, list[RollbackState]]:
    """The rollback states of the workloads each rollback policy governs."""
    states: dict[PolicyKey, list[RollbackState]] = {}
    for workload in view.workloads():
        policy = rollback_policy_for(workload, view.policies_for_namespace(workload.namespace))
        if policy is None:
            continue
        key = (policy.kind, policy.metadata.namespace or "", policy.metadata.name)
        state = rollback_state(view, workload)
        states.setdefault(key, [])
        if state is not None:
            states[key].append(state)
    return states


def rollback_policies(view: ClusterView) -> Iterator[RollbackPolicy]:
    """Every rollback policy of the view."""
    for kind in ROLLBACK_KINDS:
        yield from (p for p in view.kerf_objects(kind) if isinstance(p, RollbackPolicy))


async def write_policy_status(
    view: ClusterView, writer: Writer, *, owns: Callable[[str | None], bool] = lambda ns: True
) -> int:
    """Write the counters of every rollback policy whose status differs and whose
    namespace this replica `owns` (None: a cluster policy); returns the number of writes
    (0 in a steady cluster)."""
    states = governed_states(view)
    writes = 0
    for policy in rollback_policies(view):
        key = (policy.kind, policy.metadata.namespace or "", policy.metadata.name)
        if not owns(key[1] or None):
            continue
        counts = policy_counts(states.get(key, ()))
        wanted: dict[str, Any] = {
            "monitoring": counts["monitoring"],
            "rolledBack": counts["rolledBack"],
            "failedPermanent": counts["failedPermanent"],
            "observedGeneration": policy.metadata.generation or 1,
        }
        status = policy.status
        have = (
            {
                "monitoring": status.monitoring,
                "rolledBack": status.rolled_back,
                "failedPermanent": status.failed_permanent,
                "observedGeneration": status.observed_generation,
            }
            if status is not None
            else {}
        )
        if have != wanted:
            await writer.patch_status(key[1], key[2], wanted, kind=policy.kind)
            writes += 1
    return writes
