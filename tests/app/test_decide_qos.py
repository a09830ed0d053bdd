"""retainGuaranteedQoS (SPEC §2, §6): a container whose CPU and memory requests equal its
limits keeps them equal, through enablement, the per-value rules and node capacity."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.app import builders as b

#: every check here only reads the decision (tests/app/conftest.py)
pytestmark = pytest.mark.usefixtures("checks_only_read")

NOW = b.NOW
GUARANTEED = {
    "requests": {"cpu": "1", "memory": "1Gi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}


def objects(values: dict[str, Any], *, strategy: dict[str, Any] | None = None, **kw: Any) -> list:
    return [
        b.namespace(),
        b.strategy(**(strategy or {})),
        b.deployment(containers={"app": GUARANTEED}),
        b.static(containers={"app": values}, **kw),
    ]


def decide(objs: list, path: str = "running", res: dict | None = None, **kw: Any) -> Any:
    return b.decide(b.view(*objs), b.pod(containers={"app": res or GUARANTEED}, **kw), path)


def test_a_request_change_sets_the_limit_too() -> None:
    d = decide(objects({"requests": {"cpu": "750m", "memory": "768Mi"}}))
    assert (d.outcome, d.method) == ("apply", "inPlace")
    assert d.values == {
        "app": {
            "requests": {"cpu": "750m", "memory": "768Mi"},
            "limits": {"cpu": "750m", "memory": "768Mi"},
        }
    }


def test_both_selected_take_the_limit() -> None:
    d = decide(objects({"requests": {"cpu": "600m"}, "limits": {"cpu": "800m"}}))
    assert d.values["app"]["requests"]["cpu"] == d.values["app"]["limits"]["cpu"] == "800m"


def test_the_pair_takes_the_step_limit_and_the_admission_path_alike() -> None:
    for path in ("running", "admission"):
        d = decide(objects({"requests": {"cpu": "100m", "memory": "64Mi"}}), path)
        assert d.values["app"] == {
            "requests": {"cpu": "500m", "memory": "512Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        }


def test_the_minimum_of_the_request_raises_the_limit() -> None:
    res = {"requests": {"cpu": "16m", "memory": "40Mi"}, "limits": {"cpu": "16m", "memory": "40Mi"}}
    objs = objects({"requests": {"cpu": "5m", "memory": "20Mi"}})
    objs[2] = b.deployment(containers={"app": res})
    d = decide(objs, res=res)
    # cpu: the step would allow 8m, minCPU 10m wins for the pair; memory: the step allows
    # 20Mi, minMemory 32Mi wins.
    assert d.values["app"] == {
        "requests": {"cpu": "10m", "memory": "32Mi"},
        "limits": {"cpu": "10m", "memory": "32Mi"},
    }


def test_cpu_limit_is_set_although_set_from_unspecified_is_off() -> None:
    # cpu.limits.setFromUnspecified (false) concerns a container without a CPU limit; a
    # Guaranteed container has one.
    d = decide(objects({"requests": {"cpu": "800m"}}))
    assert d.values["app"]["limits"]["cpu"] == "800m"


def test_a_partner_that_may_not_move_drops_the_pair() -> None:
    no_limit_downsize = {"enablement": {"cpu": {"limits": {"downsize": False}}}}
    d = decide(
        objects({"requests": {"cpu": "800m", "memory": "768Mi"}}, strategy=no_limit_downsize)
    )
    assert d.outcome == "apply"
    assert b.reasons(d) == {
        "app.limits.cpu": "DownsizeDisabled",
        "app.requests.cpu": "GuaranteedQoS",
    }
    assert d.values["app"] == {
        "requests": {"cpu": "1", "memory": "768Mi"},
        "limits": {"cpu": "1", "memory": "768Mi"},
    }
    only_cpu = decide(objects({"requests": {"cpu": "800m"}}, strategy=no_limit_downsize))
    assert (only_cpu.outcome, only_cpu.reason) == ("skipped", "GuaranteedQoS")
    assert "app.limits.cpu: DownsizeDisabled" in only_cpu.message
    assert b.final(only_cpu) == GUARANTEED


def test_bounds_of_both_fields_apply_to_the_pair() -> None:
    floors = {"enablement": {"cpu": {"limits": {"floor": "900m"}}}}
    d = decide(objects({"requests": {"cpu": "600m"}}, strategy=floors))
    # The limit's floor holds the pair at 900m (the request's own bounds allow 600m).
    assert d.values["app"]["requests"]["cpu"] == d.values["app"]["limits"]["cpu"] == "900m"
    apart = {"enablement": {"cpu": {"requests": {"ceiling": "500m"}, "limits": {"floor": "700m"}}}}
    d = decide(objects({"requests": {"cpu": "600m"}}, strategy=apart))
    assert (d.outcome, d.reason) == ("skipped", "GuaranteedQoS")
    assert b.reasons(d) == {"app.requests.cpu": "GuaranteedQoS", "app.limits.cpu": "GuaranteedQoS"}


def test_within_tolerance_is_no_change_for_the_pair() -> None:
    d = decide(objects({"requests": {"cpu": "980m", "memory": "1000Mi"}}))
    assert (d.outcome, d.reason) == ("skipped", "NoSignificantChange")


def test_a_refusal_of_one_field_refuses_the_pair() -> None:
    oom = [
        {
            "name": "app",
            "lastState": {"terminated": {"reason": "OOMKilled", "finishedAt": b.ts(NOW)}},
        }
    ]
    d = decide(objects({"requests": {"memory": "768Mi"}}), statuses=oom)
    assert (d.outcome, d.reason) == ("blocked", "OOMKilled")
    assert b.final(d) == GUARANTEED


def test_node_capacity_drops_the_limit_with_its_request() -> None:
    # node-b could hold the values (they are not Infeasible); node-a, the pod's, cannot.
    objs = [
        *objects({"requests": {"cpu": "1500m", "memory": "768Mi"}}),
        b.node(cpu="500m"),
        b.node("node-b", cpu="4"),
    ]
    d = decide(objs, node="node-a")
    assert b.reasons(d) == {
        "app.requests.cpu": "InsufficientNodeCapacity",
        "app.limits.cpu": "GuaranteedQoS",
    }
    assert d.values["app"] == {
        "requests": {"cpu": "1", "memory": "768Mi"},
        "limits": {"cpu": "1", "memory": "768Mi"},
    }


def test_retain_off_changes_the_request_alone() -> None:
    d = decide(objects({"requests": {"cpu": "750m"}}, strategy={"retainGuaranteedQoS": False}))
    assert d.values["app"]["requests"]["cpu"] == "750m"
    assert d.values["app"]["limits"]["cpu"] == "1"


def test_a_burstable_container_is_not_paired() -> None:
    burstable = {
        "requests": {"cpu": "1", "memory": "512Mi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    objs = objects({"requests": {"cpu": "750m"}})
    objs[2] = b.deployment(containers={"app": burstable})
    d = decide(objs, res=burstable)
    assert d.values["app"]["requests"]["cpu"] == "750m"
    assert d.values["app"]["limits"]["cpu"] == "1"


def test_a_new_pod_starts_from_the_last_applied_pair() -> None:
    applied = b.recommendation(
        applied_at=NOW - timedelta(days=3),
        last_applied={"app": {"requests": {"cpu": "600m"}, "limits": {"cpu": "600m"}}},
    )
    d = decide([*objects({"requests": {"cpu": "100m"}}), applied], "admission")
    # The step starts from the last applied 600m (not the manifest's 1): 300m for both.
    assert d.values["app"]["requests"]["cpu"] == d.values["app"]["limits"]["cpu"] == "300m"


def test_a_last_applied_request_alone_is_the_baseline_of_both() -> None:
    # Recorded before the pair was kept: the request alone; the new pod's pair starts there.
    applied = b.recommendation(
        applied_at=NOW - timedelta(days=3), last_applied={"app": {"requests": {"cpu": "600m"}}}
    )
    d = decide([*objects({"requests": {"cpu": "590m"}}), applied], "admission")
    # 590m is within the tolerance of the 600m baseline: both stay at 600m.
    assert d.values["app"]["requests"]["cpu"] == d.values["app"]["limits"]["cpu"] == "600m"
    unequal = b.recommendation(
        applied_at=NOW - timedelta(days=3),
        last_applied={"app": {"requests": {"cpu": "600m"}, "limits": {"cpu": "800m"}}},
    )
    d = decide([*objects({"requests": {"cpu": "990m"}}), unequal], "admission")
    # An unequal recorded pair is no baseline: the pod's own 1 CPU is, and 990m is no change.
    assert b.final(d)["requests"]["cpu"] == b.final(d)["limits"]["cpu"] == "1"
