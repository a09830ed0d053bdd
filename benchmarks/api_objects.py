"""The generated cluster of the benches (`benchmarks.explain.documents`) as a client creates it
through a real API server, for `--cluster real`.

What the controllers and the node agent make is left to them: no Nodes (the node agent
registers them), no ReplicaSets and no Pods (the controller manager makes them from the
Deployments, the scheduler binds them). The rest differs from the generated objects only
where a real server would refuse them or its controllers would act otherwise:

- each Deployment has as many replicas as the generated cluster has pods for it (35,000
  pods over 25,000 workloads: 10,000 workloads of two pods, 15,000 of one), and a label of
  its own in its template and selector (the generated ones select on `tier` alone, and
  real ReplicaSets whose selectors overlap fight over each other's pods);
- the recommendation ConfigMaps are created as generated: each holds at most
  `benchmarks.explain.CONFIGMAP_BYTES` of rows, under the API server's 1 MiB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

#: The label each Deployment gets in its selector, its value the Deployment's name.
WORKLOAD_LABEL = "bench.kerf.dev/workload"
KERF_NAMESPACE = "kerf-system"


@dataclass
class ApiObjects:
    """What to create, in order: the namespaces, then everything else (any order)."""

    namespaces: list[dict[str, Any]] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)
    #: The pods the controllers will make from the Deployments.
    pods: int = 0


def replicas(index: int, *, workloads: int, pods: int) -> int:
    """How many of the generated cluster's pods belong to workload `index` (pod `p` is
    workload `p % workloads`'s)."""
    return pods // workloads + (1 if index < pods % workloads else 0)


def _deployment(obj: dict[str, Any], count: int) -> dict[str, Any]:
    name = obj["metadata"]["name"]
    template = orjson.loads(orjson.dumps(obj["spec"]["template"]))
    labels = {**template["metadata"]["labels"], WORKLOAD_LABEL: name}
    template["metadata"]["labels"] = labels
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": obj["metadata"],
        "spec": {"replicas": count, "selector": {"matchLabels": labels}, "template": template},
    }


def api_objects(
    *, workloads: int, pods: int, nodes: int, policies: int, namespaces: int
) -> ApiObjects:
    """The generated cluster of this size as objects to create through the API."""
    from benchmarks.explain import wall_clock_documents

    result = ApiObjects(
        namespaces=[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KERF_NAMESPACE}}]
    )
    index = 0
    for obj in wall_clock_documents(
        workloads=workloads, pods=pods, nodes=nodes, policies=policies, namespaces=namespaces
    ):
        kind = obj["kind"]
        if kind in ("Node", "Pod"):
            continue
        if kind == "Namespace":
            result.namespaces.append(obj)
        elif kind == "Deployment":
            count = replicas(index, workloads=workloads, pods=pods)
            result.objects.append(_deployment(obj, count))
            result.pods += count
            index += 1
        else:
            result.objects.append(obj)
    return result
