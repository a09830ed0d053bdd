"""`kerf cleanup`: the commands that remove what kerf wrote on workloads, after uninstall.

kerf publishes recommendation keys, the ContainerArgsPolicy hook and the rollback state as
annotations on workloads (SPEC §3). Uninstalling kerf leaves them there, harmless but
stale. This reads a kubectl List (`kubectl get deployments,... -A -o json`) and prints
one `kubectl annotate` command per object that carries any, so a person can read them
before piping them to `sh`. Keys people write (pause-until, pause-reason,
skip-containers) are theirs and stay.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from app.model.annotations import ROLLBACK_STATE, is_recommendation_key

#: kubectl resource names of the workload kinds kerf annotates.
RESOURCE_BY_KIND = {
    "Deployment": "deployment",
    "StatefulSet": "statefulset",
    "DaemonSet": "daemonset",
    "Job": "job",
    "CronJob": "cronjob",
    "Rollout": "rollouts.argoproj.io",
}


class CleanupInputError(ValueError):
    """Input that is not a kubectl List of objects."""


def written_by_kerf(key: str) -> bool:
    """True for the workload annotations kerf writes (and may remove)."""
    return key == ROLLBACK_STATE or is_recommendation_key(key)


def annotate_commands(listing: Mapping[str, Any]) -> Iterator[str]:
    """`kubectl annotate` commands removing kerf's annotations from the listed objects."""
    items = listing.get("items") if listing.get("kind") == "List" else [listing]
    if not isinstance(items, list):
        raise CleanupInputError("expected a kubectl List (kubectl get ... -o json)")
    for item in items:
        if not isinstance(item, Mapping):
            raise CleanupInputError("a List item is not an object")
        metadata = item.get("metadata") or {}
        keys = sorted(k for k in metadata.get("annotations") or {} if written_by_kerf(k))
        resource = RESOURCE_BY_KIND.get(item.get("kind", ""))
        if not keys or resource is None:
            continue
        target = f"{resource}/{metadata['name']}"
        args = ["kubectl", "annotate", "-n", metadata.get("namespace", "default"), target]
        yield shlex.join([*args, *(f"{key}-" for key in keys)])
