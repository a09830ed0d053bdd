"""Which pod a rollback restore must replace because it cannot be resized (SPEC §8).

A restore is applied to running pods like any plan (in place or by eviction). A pod the
scheduler cannot place never runs, so it is never resized: with a change that asked more
than any node has (a scale-up or an eviction during the window admitted it with those
values) it would stay Pending for good. The reconciler replaces such a pod instead: the
ReplicaSet's (or StatefulSet's) new pod is admitted by the webhook with the restored values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.model.annotations import parse_key
from app.model.kube_types import PodDict, node_name
from app.model.workloads import ContainerResources
from app.policy.rollback_health import is_live, is_unschedulable, pod_name, runs_values


def restore_keys(annotations: Mapping[str, str]) -> dict[str, str]:
    """The rollback restore keys (`rollbackpolicy.rightsizing.kubex.ai/...`) of a map."""
    return {
        k: v
        for k, v in annotations.items()
        if (info := parse_key(k)) is not None and info.kind == "RollbackPolicy"
    }


def unschedulable_to_replace(
    pods: Sequence[PodDict],
    restore: Mapping[str, ContainerResources] | None,
    published: Mapping[str, str],
    planned: Mapping[str, str],
) -> PodDict | None:
    """The first live, unbound, Unschedulable pod that does not carry the restore values,
    once the restore is published on the workload (`published`, the workload's annotations,
    hold the restore keys of `planned`, the plan's): before that the webhook would admit its
    replacement with the same values again. None when there is nothing to replace."""
    if not restore:
        return None
    wanted = restore_keys(planned)
    if not wanted or restore_keys(published) != wanted:
        return None
    for pod in sorted(pods, key=pod_name):
        if (
            is_live(pod)
            and not node_name(pod)
            and is_unschedulable(pod)
            and not runs_values(pod, restore)
        ):
            return pod
    return None
