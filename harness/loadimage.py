"""Manifests written for the simulators, run on a real node: every container that names a
made-up image runs kerf-load instead (docs/devcluster.md), and what it reports of its
cgroup is read back through `kubectl exec`."""

from __future__ import annotations

import json
from typing import Any

from devcluster.images import LOAD_IMAGE
from kubesim.usage import USAGE


def runnable(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` (a Pod, or a workload with a pod template) with every container that names a
    made-up image running kerf-load instead: `run --cpu C --memory M`, the amounts of the
    pod's `kubesim.kerf.dev/usage` annotation for that container (what kubesim's usage
    model and the node agent's metrics play), else none at all (an idle process of a few
    MiB). A container already running kerf-load is left as it is."""
    obj = json.loads(json.dumps(obj))
    if obj.get("kind") == "Pod":
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    else:
        template = (obj.get("spec") or {}).get("template") or {}
        meta, spec = template.get("metadata") or {}, template.get("spec") or {}
    usage = json.loads((meta.get("annotations") or {}).get(USAGE) or "{}")
    for entry in (*spec.get("containers", ()), *spec.get("initContainers", ())):
        if entry.get("image") == LOAD_IMAGE:
            continue
        uses = usage.get(entry["name"]) or {}
        entry["image"] = LOAD_IMAGE
        entry["imagePullPolicy"] = "Never"
        entry["args"] = ["run", "--cpu", uses.get("cpu", "0"), "--memory", uses.get("memory", "0")]
    return obj


def cgroup_values(text: str) -> dict[str, int]:
    """`kerf-load cgroup`'s output: the container's cgroup limits and counters by name."""
    return {key: int(value) for key, value in (line.split("=", 1) for line in text.split())}
