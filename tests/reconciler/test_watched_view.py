"""Which workloads a watched change queues: a LimitRange or ResourceQuota bounds the
pods of its own namespace only, so it queues that namespace's workloads, not all."""

from __future__ import annotations

from app.owners import WorkloadRef
from reconciler.service import WatchedView
from tests.app import builders as b


def deployment(name: str, namespace: str) -> dict:
    d = b.deployment(name)
    d["metadata"]["namespace"] = namespace
    return d


def test_a_limit_range_or_quota_queues_the_workloads_of_its_namespace() -> None:
    queued: list[WorkloadRef | None] = []
    view = WatchedView(queued.append)
    for name, namespace in (("web", "shop"), ("api", "shop"), ("db", "other")):
        view.apply(deployment(name, namespace))
    for kind in ("LimitRange", "ResourceQuota"):
        queued.clear()
        view.apply(
            {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x", "namespace": "shop"}}
        )
        assert sorted(r.name for r in queued if r is not None) == ["api", "web"]
        assert None not in queued
        queued.clear()
        view.delete(kind, "shop", "x")
        assert sorted(r.name for r in queued if r is not None) == ["api", "web"]
