"""The cluster of the recommender's tests: workloads and pods as YAML-ready objects, and the
history each replica left in Prometheus."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tests.recommender.history import MI, Replica, constant, daily_peak, spiky

DAY = 86400.0
NAMESPACE = "shop"
#: How far back the history goes (each 2 h of it is one TSDB block to backfill).
HISTORY_DAYS = 3


def stamp(unix: float) -> str:
    """RFC3339 of a unix time."""
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def deployment(
    name: str, replicas: int, requests: dict[str, str], limits: dict[str, str]
) -> dict[str, Any]:
    """A Deployment of one container `app`."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": f"shop/{name}:1",
                            "resources": {"requests": requests, "limits": limits},
                        }
                    ]
                },
            },
        },
    }


def statefulset(name: str, requests: dict[str, str], limits: dict[str, str]) -> dict[str, Any]:
    """A StatefulSet of one replica and one container `app`."""
    obj = deployment(name, 1, requests, limits)
    obj["kind"] = "StatefulSet"
    obj["spec"]["serviceName"] = name
    return obj


def pod(workload: dict[str, Any], name: str, started: float) -> dict[str, Any]:
    """A running pod of `workload`, started at `started` (unix)."""
    template = workload["spec"]["template"]
    kind = workload["kind"]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NAMESPACE,
        "labels": dict(template["metadata"]["labels"]),
        "creationTimestamp": stamp(started),
    }
    if kind == "Deployment":
        replicaset = name.rsplit("-", 1)[0]
        meta["labels"]["pod-template-hash"] = replicaset.rsplit("-", 1)[1]
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replicaset, "controller": True}
        ]
    else:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": kind,
                "name": workload["metadata"]["name"],
                "controller": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": "node-a", "containers": template["spec"]["containers"]},
        "status": {"phase": "Running", "startTime": stamp(started)},
    }


@dataclass(frozen=True)
class Scene:
    """Objects for the state dir and the replicas' history, all ending at `end`."""

    end: float
    objects: list[dict[str, Any]]
    replicas: list[Replica]


def scene(end: float) -> Scene:
    """The workloads of the tests (each name says what its history is like)."""
    start = end - HISTORY_DAYS * DAY
    objects: list[dict[str, Any]] = []
    replicas: list[Replica] = []
    big = ({"cpu": "500m", "memory": "512Mi"}, {"cpu": "1", "memory": "1Gi"})

    def add(
        workload: dict[str, Any], pods: list[tuple[str, float]], histories: list[Replica]
    ) -> None:
        objects.append(workload)
        objects.extend(pod(workload, name, since) for name, since in pods)
        replicas.extend(histories)

    def replica(pod_name: str, since: float = start, **kw: Any) -> Replica:
        kw.setdefault("cpu", constant(0.2))
        kw.setdefault("memory", constant(300 * MI))
        kw.setdefault("end", end)
        return Replica(NAMESPACE, pod_name, "app", start=since, **kw)

    steady = deployment("steady", 2, *big)
    add(
        steady,
        [("steady-5f7c9-aaaaa", start), ("steady-5f7c9-bbbbb", start)],
        [replica("steady-5f7c9-aaaaa"), replica("steady-5f7c9-bbbbb")],
    )
    # An earlier replica, gone from the cluster, still counts through its name.
    replicas.append(replica("steady-4c8d2-zzzzz", end=start + DAY))
    peaky = deployment("peaky", 1, *big)
    add(
        peaky,
        [("peaky-6b8d4-aaaaa", start)],
        [replica("peaky-6b8d4-aaaaa", cpu=daily_peak(0.1, 0.5, 2))],
    )
    spiked = deployment("spiky", 1, *big)
    add(
        spiked,
        [("spiky-7c9e5-aaaaa", start)],
        [replica("spiky-7c9e5-aaaaa", cpu=spiky(0.2, seed=1))],
    )
    young_start = end - DAY
    young = deployment("young", 1, *big)
    add(
        young,
        [("young-8d1f6-aaaaa", young_start)],
        [replica("young-8d1f6-aaaaa", since=young_start)],
    )
    oomer = deployment("oomer", 1, {"cpu": "200m", "memory": "256Mi"}, {"memory": "256Mi"})
    add(
        oomer,
        [("oomer-9e2a7-aaaaa", start)],
        [replica("oomer-9e2a7-aaaaa", memory=constant(250 * MI), oom_killed_at=end - DAY / 2)],
    )
    db = statefulset("db", {"cpu": "500m", "memory": "256Mi"}, {"cpu": "1", "memory": "512Mi"})
    add(
        db,
        [("db-0", start)],
        [
            replica(
                "db-0", cpu=constant(0.1), memory=constant(100 * MI), cpu_limit=1.0, throttled=0.4
            )
        ],
    )
    gappy = deployment("gappy", 1, *big)
    add(
        gappy,
        [("gappy-1a3b8-aaaaa", start)],
        [replica("gappy-1a3b8-aaaaa", outages=((end - 2 * DAY, end - 2 * DAY + 7200),))],
    )
    nan = deployment("nan", 1, *big)
    add(
        nan,
        [("nan-2b4c9-aaaaa", start)],
        [replica("nan-2b4c9-aaaaa", memory=lambda t: float("nan") if t > 2.5 * DAY else 300 * MI)],
    )
    ghost = deployment("ghost", 1, *big)
    add(ghost, [("ghost-3c5d1-aaaaa", start)], [])
    partial = deployment("partial", 2, *big)
    add(
        partial,
        [("partial-4d6e2-aaaaa", start), ("partial-4d6e2-bbbbb", start)],
        [replica("partial-4d6e2-aaaaa")],
    )
    return Scene(end=end, objects=objects, replicas=replicas)
