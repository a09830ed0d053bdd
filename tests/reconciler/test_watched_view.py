"""Which workloads a watched change queues: a LimitRange or ResourceQuota bounds the
pods of its own namespace only, so it queues that namespace's workloads, not all."""

from __future__ import annotations

from app.model.crd import parse_object
from app.model.owners import WorkloadRef
from app.store.decision_cache import (
    MAX_CACHED_PLANS,
    MAX_PARSED_PODS,
    RECONCILER_CACHED_PLANS,
    RECONCILER_PARSED_PODS,
)
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


def test_a_stored_kubex_kind_queues_no_workload_and_makes_the_reports_due() -> None:
    queued: list[WorkloadRef | None] = []
    inputs: list[None] = []
    view = WatchedView(queued.append, lambda: inputs.append(None))
    view.apply(deployment("web", "shop"))
    queued.clear()
    patch = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "ObjectPatch",
        "metadata": {"name": "p", "namespace": "shop"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "patch": {"metadata": {"labels": {"a": "b"}}},
        },
    }
    view.apply(parse_object(patch))
    view.delete("ObjectPatch", "shop", "p")
    assert queued == [] and inputs == [None, None]


def test_a_change_queues_only_the_workloads_whose_declared_inputs_it_touches() -> None:
    """Derived from `app.store.inputs`: a Namespace queues its own workloads, an HPA the one it
    targets, a node status update that keeps the allocatable and a ConfigMap that is no
    recommendation source queue none; a node's new allocatable queues every workload."""
    queued: list[WorkloadRef | None] = []
    view = WatchedView(queued.append)
    for name, namespace in (("web", "shop"), ("api", "shop"), ("db", "other")):
        view.apply(deployment(name, namespace))
    view.apply(b.node())
    changes: list[tuple[dict, list[str] | None]] = [
        (b.namespace("shop", annotations={"a": "b"}), ["api", "web"]),
        (b.hpa("web", namespace="shop"), ["web"]),
        (b.node() | {"metadata": {"name": "node-a", "labels": {"ready": "yes"}}}, []),
        (
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "shop"},
            },
            [],
        ),
        (b.node(cpu="2"), None),
    ]
    for obj, expected in changes:
        queued.clear()
        view.apply(obj)
        if expected is None:
            assert queued == [None]
        else:
            assert sorted(r.name for r in queued if r is not None) == expected
            assert None not in queued


def test_the_reconciler_keeps_fewer_plan_caches_and_parsed_pods_than_the_webhook() -> None:
    caches = WatchedView(lambda ref: None).caches
    assert caches.max_plans == RECONCILER_CACHED_PLANS < MAX_CACHED_PLANS
    assert caches.max_parsed == RECONCILER_PARSED_PODS < MAX_PARSED_PODS
