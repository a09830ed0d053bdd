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
- the recommendation rows are split into ConfigMaps of at most `CONFIGMAP_BYTES`: a real
  API server refuses a ConfigMap whose data is over 1 MiB (33,334 rows are ~7 MB).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.model.recommendations import SOURCE_LABEL

#: Room under the API server's 1 MiB (1,048,576 bytes) for a ConfigMap's data.
CONFIGMAP_BYTES = 900_000
#: The label each Deployment gets in its selector, its value the Deployment's name.
WORKLOAD_LABEL = "bench.kerf.dev/workload"
KERF_NAMESPACE = "kerf-system"
_RECOMMENDATIONS_KEY = "recommendations.json"


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


def split_rows(rows: list[dict[str, Any]], limit: int = CONFIGMAP_BYTES) -> list[bytes]:
    """The rows as `recommendations.json` payloads of at most `limit` bytes each (a row
    larger than `limit` alone is one payload)."""
    payloads: list[bytes] = []
    chunk: list[bytes] = []
    size = len(b'{"recommendations":[]}')
    for row in rows:
        encoded = orjson.dumps(row)
        if chunk and size + len(encoded) + 1 > limit:
            payloads.append(b'{"recommendations":[' + b",".join(chunk) + b"]}")
            chunk, size = [], len(b'{"recommendations":[]}')
        chunk.append(encoded)
        size += len(encoded) + 1
    if chunk:
        payloads.append(b'{"recommendations":[' + b",".join(chunk) + b"]}")
    return payloads


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


def _configmaps(source: dict[str, Any]) -> Iterator[dict[str, Any]]:
    rows = orjson.loads(source["data"][_RECOMMENDATIONS_KEY])["recommendations"]
    meta = source["metadata"]
    for n, payload in enumerate(split_rows(rows)):
        yield {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{meta['name']}-{n}",
                "namespace": meta["namespace"],
                "labels": {SOURCE_LABEL: "true"},
            },
            "data": {_RECOMMENDATIONS_KEY: payload.decode()},
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
        elif kind == "ConfigMap":
            result.objects.extend(_configmaps(obj))
        else:
            result.objects.append(obj)
    return result
