"""A memory change of a container in an OOM loop is made by eviction where eviction is
allowed: kubelet 1.35.4 resizes such a container's cgroup in place but leaves the pod's at
the old limit, and the kills go on (kubernetes/kubernetes#138760; SPEC "Restoring an
OOM-looping pod")."""

from __future__ import annotations

from typing import Any

import pytest

from app.decide import PodDecision
from app.model.workloads import oom_looping
from tests.app import builders as b

#: every check here only reads the decision (tests/app/conftest.py)
pytestmark = pytest.mark.usefixtures("checks_only_read")

MORE_MEMORY = {"requests": {"memory": "768Mi"}, "limits": {"memory": "1536Mi"}}


def looping(container: str = "app") -> dict[str, Any]:
    """A container status waiting in CrashLoopBackOff after an OOM kill."""
    return {
        **b.oom_status(container),
        "restartCount": 4,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
    }


def decide(status: dict[str, Any], change: dict[str, Any], **strategy: Any) -> PodDecision:
    objects = [o for o in b.base_objects() if getattr(o, "kind", None) != "AutomationStrategy"]
    objects += [b.strategy(**strategy), b.static(containers={"app": change}), b.node()]
    return b.decide(b.view(*objects), b.pod(node="node-a", statuses=[status]))


BOTH = {"inPlaceResize": {"enabled": True}, "podEviction": {"enabled": True}}


def test_more_memory_for_an_oom_looping_container_evicts_the_pod() -> None:
    d = decide(looping(), MORE_MEMORY, **BOTH)
    assert (d.outcome, d.method) == ("apply", "evict")


def test_more_memory_after_one_oom_kill_that_restarted_is_made_in_place() -> None:
    running = {**b.oom_status(), "state": {"running": {}}}
    d = decide(running, MORE_MEMORY, **BOTH)
    assert (d.outcome, d.method) == ("apply", "inPlace")


def test_a_cpu_change_of_an_oom_looping_container_stays_in_place() -> None:
    d = decide(looping(), {"requests": {"cpu": "300m"}}, **BOTH)
    assert (d.outcome, d.method) == ("apply", "inPlace")


def test_without_eviction_the_change_is_still_tried_in_place() -> None:
    d = decide(
        looping(), MORE_MEMORY, inPlaceResize={"enabled": True}, podEviction={"enabled": False}
    )
    assert (d.outcome, d.method) == ("apply", "inPlace")


def test_a_container_killed_again_counts_as_looping_while_it_runs_between_back_offs() -> None:
    between = {**b.oom_status(), "restartCount": 3, "state": {"running": {}}}
    d = decide(between, MORE_MEMORY, **BOTH)
    assert (d.outcome, d.method) == ("apply", "evict")


def test_oom_looping_reads_app_containers_and_sidecars() -> None:
    pod = b.pod(statuses=[looping("app")])
    pod["spec"]["initContainers"] = [
        {"name": "proxy", "image": "img/proxy", "restartPolicy": "Always"}
    ]
    pod["status"]["initContainerStatuses"] = [looping("proxy")]
    assert oom_looping(pod) == {"app", "proxy"}
    assert oom_looping(b.pod(statuses=[b.oom_status()])) == set()
    # A plain init container runs once: kerf does not size it.
    del pod["spec"]["initContainers"][0]["restartPolicy"]
    assert oom_looping(pod) == {"app"}
