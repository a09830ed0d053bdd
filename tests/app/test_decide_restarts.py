"""Whether an in-place resize restarts a container is decided once, in `app.decide`, for
app containers and native sidecars alike (init containers with `restartPolicy: Always`):
the method, SingleReplicaUnsafe and the reconciler's `PodDecision.restarts` read it."""

from __future__ import annotations

from typing import Any

import pytest

from app.decide import PodDecision
from app.decide.method import restarts_container
from app.model.workloads import target_containers
from tests.app import builders as b

#: every check here only reads the decision (tests/app/conftest.py)
pytestmark = pytest.mark.usefixtures("checks_only_read")

RESTART_MEMORY = [
    {"resourceName": "cpu", "restartPolicy": "NotRequired"},
    {"resourceName": "memory", "restartPolicy": "RestartContainer"},
]
PROXY_RES = {"requests": {"cpu": "200m", "memory": "256Mi"}}


def pod_with_sidecar() -> dict[str, Any]:
    """A pod whose sidecar `proxy` restarts on a memory resize; its app container never."""
    pod = b.pod(node="node-a")
    pod["spec"]["initContainers"] = [
        {
            "name": "proxy",
            "image": "img/proxy",
            "restartPolicy": "Always",
            "resources": PROXY_RES,
            "resizePolicy": RESTART_MEMORY,
        }
    ]
    return pod


def decide(proxy: dict[str, Any], *, replicas: int = 3, **strategy: Any) -> PodDecision:
    objects = [
        o
        for o in b.base_objects(replicas=replicas)
        if getattr(o, "kind", None) != "AutomationStrategy"
    ]
    objects += [b.strategy(**strategy), b.static(containers={"proxy": proxy}), b.node()]
    return b.decide(b.view(*objects), pod_with_sidecar())


def test_a_sidecar_memory_resize_that_restarts_it_is_evicted_when_restarts_are_forbidden() -> None:
    d = decide({"requests": {"memory": "128Mi"}}, inPlaceResize={"enabled": True})
    assert (d.outcome, d.method, d.changed) == ("apply", "evict", ("proxy",))


def test_a_sidecar_memory_resize_that_restarts_it_is_a_disruption_when_restarts_are_allowed() -> (
    None
):
    d = decide(
        {"requests": {"memory": "128Mi"}},
        inPlaceResize={"enabled": True, "containerRestart": True},
    )
    assert (d.outcome, d.method, d.changed) == ("apply", "inPlace", ("proxy",))
    # The reconciler reads this to treat the resize as a disruption, like an eviction.
    assert d.restarts


def test_a_sidecar_cpu_resize_does_not_restart_it() -> None:
    d = decide({"requests": {"cpu": "100m"}}, inPlaceResize={"enabled": True})
    assert (d.outcome, d.method, d.restarts) == ("apply", "inPlace", False)


def test_a_lone_replica_whose_sidecar_would_restart_is_not_disrupted() -> None:
    d = decide(
        {"requests": {"memory": "128Mi"}},
        replicas=1,
        inPlaceResize={"enabled": True, "containerRestart": True},
    )
    assert (d.outcome, d.reason) == ("blocked", "SingleReplicaUnsafe")


def test_restarts_container_reads_the_resize_policy_of_the_changed_resource() -> None:
    containers = target_containers(pod_with_sidecar())
    assert restarts_container(containers, [("proxy", "memory")])
    assert not restarts_container(containers, [("proxy", "cpu"), ("app", "memory")])
    assert not restarts_container(containers, [])
