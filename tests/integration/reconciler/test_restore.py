"""Which Pending pod a rollback restore replaces (app.policy.restore)."""

from __future__ import annotations

from typing import Any

from app.model.annotations import fixed_key
from app.policy.restore import unschedulable_to_replace

RESTORE = {"app": {"requests": {"cpu": "100m"}}}
PUBLISHED = {
    fixed_key("RollbackPolicy", "requests"): '{"app": {"cpu": "100m"}}',
    fixed_key("StaticPolicy", "requests"): '{"app": {"cpu": "64"}}',
}


def pod(name: str, cpu: str, *, node: str | None = None, unschedulable: bool = True) -> Any:
    conditions = (
        [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
        if unschedulable
        else []
    )
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}}}]
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {"name": name},
        "spec": spec,
        "status": {"phase": "Pending", "conditions": conditions},
    }


def test_an_unschedulable_pod_without_the_restored_values_is_replaced() -> None:
    pods = [pod("b", "64"), pod("a", "100m")]
    chosen = unschedulable_to_replace(pods, RESTORE, PUBLISHED, PUBLISHED)
    assert chosen is not None and chosen["metadata"]["name"] == "b"


def test_nothing_is_replaced_before_the_restore_is_published() -> None:
    unpublished = {k: v for k, v in PUBLISHED.items() if k.startswith("staticpolicy")}
    assert unschedulable_to_replace([pod("b", "64")], RESTORE, unpublished, PUBLISHED) is None
    assert unschedulable_to_replace([pod("b", "64")], None, PUBLISHED, PUBLISHED) is None


def test_only_unbound_unschedulable_pods_are_replaced() -> None:
    waiting = pod("b", "64", unschedulable=False)  # not judged by the scheduler yet
    bound = pod("c", "64", node="node-a")  # on a node: the running path resizes it
    assert unschedulable_to_replace([waiting, bound], RESTORE, PUBLISHED, PUBLISHED) is None
