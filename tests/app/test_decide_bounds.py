"""A change past the namespace's LimitRange or ResourceQuota is dropped on both paths: the
API server would refuse the pod (every pod of the workload, at admission) or the resize."""

from __future__ import annotations

from typing import Any

import pytest

from app.decide import PodDecision
from app.decide.admission import admit_pod
from tests.app import builders as b

#: every check here only reads the decision (tests/app/conftest.py)
pytestmark = pytest.mark.usefixtures("checks_only_read")

NS = b.NS
WIDE = {"maxChangePercent": 100}


def limit_range(name: str = "bounds", **items: dict[str, Any]) -> dict[str, Any]:
    """A LimitRange with a Container item (min, max, maxLimitRequestRatio, default …) and,
    with `pod=`, a Pod item."""
    limits = []
    if "container" in items:
        limits.append({"type": "Container", **items["container"]})
    if "pod" in items:
        limits.append({"type": "Pod", **items["pod"]})
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"limits": limits},
    }


def quota(
    name: str = "team",
    hard: dict[str, str] | None = None,
    used: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    hard = hard or {}
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"hard": hard, **spec},
        "status": {"hard": hard, "used": used or {}},
    }


def decide(
    change: dict[str, Any],
    *bounds: dict[str, Any],
    path: str = "running",
    strategy: dict[str, Any] | None = None,
    pod: dict[str, Any] | None = None,
) -> PodDecision:
    objects = [o for o in b.base_objects() if getattr(o, "kind", None) != "AutomationStrategy"]
    objects += [
        b.strategy(**(strategy or {})),
        b.static(containers=change, guardrails=WIDE),
        b.node(),
        *bounds,
    ]
    return b.decide(b.view(*objects), pod or b.pod(node="node-a"), path)


# The pod's app container: requests 400m/512Mi, limits 1/1Gi (builders.APP_RES).

MEMORY_2GI = {"app": {"limits": {"memory": "2Gi"}}}
CPU_DOWN = {"app": {"requests": {"cpu": "200m"}}}


@pytest.mark.parametrize("path", ["admission", "running"])
def test_a_limit_over_a_container_max_is_dropped_and_named(path: str) -> None:
    lr = limit_range(container={"max": {"memory": "1Gi"}})
    d = decide({"app": {"limits": {"memory": "2Gi"}, "requests": {"cpu": "300m"}}}, lr, path=path)
    assert d.outcome == "apply"
    assert b.final(d)["limits"]["memory"] == "1Gi"
    assert b.final(d)["requests"]["cpu"] == "300m"
    assert "app.limits.memory: LimitRangeViolation" in d.message
    assert f"LimitRange {NS}/bounds: maximum memory per Container is 1Gi" in d.message


@pytest.mark.parametrize("path", ["admission", "running"])
def test_every_value_past_the_bounds_blocks_the_change_with_the_bound(path: str) -> None:
    lr = limit_range(container={"min": {"cpu": "250m"}, "max": {"memory": "1Gi"}})
    d = decide({"app": {"requests": {"cpu": "200m"}, "limits": {"memory": "2Gi"}}}, lr, path=path)
    assert (d.outcome, d.reason) == ("blocked", "LimitRangeViolation")
    assert "minimum cpu per Container is 250m" in d.message
    assert "maximum memory per Container is 1Gi" in d.message
    assert b.final(d)["requests"]["cpu"] == "400m"


def test_a_request_below_a_container_min_is_dropped() -> None:
    lr = limit_range(container={"min": {"cpu": "300m"}})
    d = decide(CPU_DOWN, lr)
    assert (d.outcome, d.reason) == ("blocked", "LimitRangeViolation")


def test_a_limit_to_request_ratio_past_the_bound_is_dropped() -> None:
    lr = limit_range(container={"maxLimitRequestRatio": {"cpu": "4"}})
    # 1 / 200m = 5 > 4
    d = decide(CPU_DOWN, lr)
    assert (d.outcome, d.reason) == ("blocked", "LimitRangeViolation")
    assert "limit to request ratio per Container is 4" in d.message
    # 1 / 250m = 4 is within
    assert decide({"app": {"requests": {"cpu": "250m"}}}, lr).outcome == "apply"


def test_a_pod_max_drops_the_increases_that_take_the_pod_past_it() -> None:
    lr = limit_range(pod={"max": {"memory": "1536Mi"}})
    d = decide({"app": {"limits": {"memory": "2Gi"}, "requests": {"cpu": "300m"}}}, lr)
    assert d.outcome == "apply"
    assert b.final(d)["limits"]["memory"] == "1Gi"
    assert "maximum memory per Pod is 1536Mi" in d.message


def test_a_bound_the_pod_already_goes_past_is_not_kerfs_to_mend() -> None:
    # The pod's own limit (1Gi) is past the max already: kerf's CPU change still goes.
    lr = limit_range(container={"max": {"memory": "512Mi"}})
    d = decide(CPU_DOWN, lr)
    assert (d.outcome, b.final(d)["requests"]["cpu"]) == ("apply", "200m")


def test_a_sidecar_counts_for_the_pod_and_a_plain_init_container_as_its_peak() -> None:
    pod = b.pod(node="node-a")
    pod["spec"]["initContainers"] = [
        {
            "name": "proxy",
            "image": "img/proxy",
            "restartPolicy": "Always",
            "resources": {"requests": {"memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        }
    ]
    lr = limit_range(pod={"max": {"memory": "2Gi"}})
    # app 1Gi + proxy 512Mi = 1.5Gi; app at 1.5Gi makes 2Gi: within; at 2Gi: past.
    assert decide({"app": {"limits": {"memory": "1536Mi"}}}, lr, pod=pod).outcome == "apply"
    d = decide(MEMORY_2GI, lr, pod=pod)
    assert (d.outcome, d.reason) == ("blocked", "LimitRangeViolation")


def test_a_quota_that_a_request_increase_exceeds_drops_it_counting_what_is_used() -> None:
    q = quota(hard={"requests.cpu": "1"}, used={"requests.cpu": "800m"})
    # running: used counts the pod's 400m already; +200m = 1000m is within, +300m is not
    assert decide({"app": {"requests": {"cpu": "600m"}}}, q).outcome == "apply"
    d = decide({"app": {"requests": {"cpu": "700m"}, "limits": {"memory": "512Mi"}}}, q)
    assert d.outcome == "apply"
    assert b.final(d)["requests"]["cpu"] == "400m"
    assert "app.requests.cpu: ResourceQuotaExceeded" in d.message
    assert f"ResourceQuota {NS}/team: requests.cpu would be 1100m of 1" in d.message


def test_at_admission_the_new_pod_is_not_counted_in_used_yet() -> None:
    q = quota(hard={"limits.memory": "2Gi"}, used={"limits.memory": "512Mi"})
    assert decide({"app": {"limits": {"memory": "1536Mi"}}}, q, path="admission").outcome == "apply"
    d = decide(MEMORY_2GI, q, path="admission")
    assert (d.outcome, d.reason) == ("blocked", "ResourceQuotaExceeded")


def test_a_quota_whose_scope_does_not_hold_for_the_pod_is_left_out() -> None:
    q = quota(hard={"requests.cpu": "100m"}, used={"requests.cpu": "100m"}, scopes=["Terminating"])
    assert decide({"app": {"requests": {"cpu": "600m"}}}, q).outcome == "apply"
    q = quota(
        hard={"requests.cpu": "100m"},
        scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]},
    )
    assert decide({"app": {"requests": {"cpu": "600m"}}}, q).outcome == "apply"


def test_a_decrease_is_never_held_by_a_quota() -> None:
    q = quota(hard={"requests.cpu": "100m"}, used={"requests.cpu": "5"})
    assert decide(CPU_DOWN, q).outcome == "apply"


@pytest.mark.parametrize(
    ("switch", "bound"),
    [
        ("enableLimitRangeFilter", limit_range(container={"max": {"memory": "1Gi"}})),
        ("enablePodLimitRangeFilter", limit_range(pod={"max": {"memory": "1Gi"}})),
        (
            "enableResourceQuotaFilter",
            quota(hard={"limits.memory": "1Gi"}, used={"limits.memory": "1Gi"}),
        ),
    ],
)
def test_each_filter_is_switched_off_by_the_strategys_safety_checks(
    switch: str, bound: dict[str, Any]
) -> None:
    assert decide(MEMORY_2GI, bound).outcome == "blocked"
    off = {"safetyChecks": {switch: False}}
    assert decide(MEMORY_2GI, bound, strategy=off).outcome == "apply"


def test_a_blocked_new_pod_does_not_get_a_baseline_past_the_bounds() -> None:
    """A new pod of a blocked change gets the last applied values unless they go past a
    LimitRange made since: then it keeps its manifest's."""
    record = b.recommendation(
        last_applied={"app": {"limits": {"memory": "2Gi"}}},
    )
    lr = limit_range(container={"max": {"memory": "1Gi"}})
    objects = [o for o in b.base_objects() if getattr(o, "kind", None) != "AutomationStrategy"]
    objects += [b.strategy(), b.static(containers=MEMORY_2GI, guardrails=WIDE), b.node(), lr]
    v = b.view(*objects, record)
    d = b.decide(v, b.pod(), "admission")
    assert d.outcome == "blocked"
    assert b.final(d)["limits"]["memory"] == "1Gi"


def test_a_limit_range_made_later_re_decides_the_next_new_pod() -> None:
    """LimitRanges and quotas are inputs of the admission memo: a pod of the same template
    admitted after one appears is decided again."""
    objects = [*b.base_objects(), b.static(containers=MEMORY_2GI, guardrails=WIDE), b.node()]
    v = b.view(*objects)
    first = admit_pod(v, b.pod(name="web-7d4b9-aaaaa"), NS, b.NOW)
    assert first.resources["app"]["limits"]["memory"] == "2Gi"
    v.apply(limit_range(container={"max": {"memory": "1Gi"}}))
    second = admit_pod(v, b.pod(name="web-7d4b9-bbbbb"), NS, b.NOW)
    assert (second.outcome, second.reason) == ("blocked", "LimitRangeViolation")
    v.delete("LimitRange", NS, "bounds")
    third = admit_pod(v, b.pod(name="web-7d4b9-ccccc"), NS, b.NOW)
    assert third.resources["app"]["limits"]["memory"] == "2Gi"
