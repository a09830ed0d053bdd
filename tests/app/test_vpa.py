"""VPACoupled: Kubex's `enableVpaFilter` and `blockResizeOnVpaControlledResources`
(Automation-Strategies.md, "VPA Filter Behavior", densify-dev/helm-charts). A value a
VerticalPodAutoscaler sets is left to it, on both paths; the rest of the change goes on."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import app.store.view
from app.decide.pod_facts import vpa_held_targets
from app.store import slim
from tests.app import builders as b

#: every check here only reads the decision (tests/app/conftest.py)
pytestmark = pytest.mark.usefixtures("checks_only_read")

WIDE = {"maxChangePercent": 100}
#: app's requests and limits both change (the default pod: 400m/256Mi, limits 1/1Gi)
CHANGE = {
    "app": {
        "requests": {"cpu": "300m", "memory": "200Mi"},
        "limits": {"cpu": "800m", "memory": "800Mi"},
    }
}


def view(*extra: Any, checks: dict[str, Any] | None = None) -> Any:
    objects = [o for o in b.base_objects() if getattr(o, "kind", None) != "AutomationStrategy"]
    return b.view(
        *objects,
        b.strategy(safetyChecks=checks or {}),
        b.static(containers=CHANGE, guardrails=WIDE),
        *extra,
    )


def held(*vpas: dict[str, Any], declared: bool = False) -> set[str]:
    found = vpa_held_targets(vpas, ["app", "side"], declared=declared)
    return {f"{c}.{f}.{r}" for c, f, r in found}


# ------------------------------------------------------------------ the rule


def test_a_vpa_in_every_mode_but_off_holds_what_it_recommends() -> None:
    every = {f"app.{f}.{r}" for f in ("requests", "limits") for r in ("cpu", "memory")}
    for mode in ("Auto", "Recreate", "Initial", "InPlaceOrRecreate", None):
        assert held(b.vpa(mode=mode)) == every, mode
    assert held(b.vpa(mode="Off")) == set()


def test_no_recommendation_yet_holds_nothing_without_the_declared_switch() -> None:
    assert held(b.vpa(recommends={})) == set()
    assert held(b.vpa(recommends={"app": ["cpu"]})) == {"app.requests.cpu", "app.limits.cpu"}


def test_requests_only_leaves_the_limits() -> None:
    policy = {"containerName": "*", "controlledValues": "RequestsOnly"}
    assert held(b.vpa(policies=[policy])) == {"app.requests.cpu", "app.requests.memory"}


def test_a_container_policy_in_mode_off_leaves_the_container() -> None:
    off = {"containerName": "app", "mode": "Off"}
    assert held(b.vpa(policies=[off])) == set()
    # The policy naming the container wins over the `*` one, as in the VPA.
    star = {"containerName": "*", "mode": "Off"}
    named = {"containerName": "app", "mode": "Auto"}
    assert len(held(b.vpa(policies=[star, named]))) == 4


def test_declared_holds_the_listed_resources_whatever_the_mode() -> None:
    policy = {"containerName": "side", "controlledResources": ["memory"]}
    vpa = b.vpa(mode="Off", recommends={}, policies=[policy])
    assert held(vpa) == set()
    assert held(vpa, declared=True) == {"side.requests.memory", "side.limits.memory"}


def test_the_first_vpa_is_named() -> None:
    found = vpa_held_targets([b.vpa(name="one"), b.vpa(name="two")], ["app"], declared=False)
    assert set(found.values()) == {"one"}


MODES = st.sampled_from(["Off", "Auto", "Initial", "Recreate", "InPlaceOrRecreate", None])
RESOURCES = st.lists(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), unique=True)
POLICIES = st.lists(
    st.fixed_dictionaries(
        {
            "containerName": st.sampled_from(["app", "side", "*"]),
            "mode": st.sampled_from(["Auto", "Off"]),
            "controlledResources": RESOURCES,
            "controlledValues": st.sampled_from(["RequestsAndLimits", "RequestsOnly"]),
        }
    ),
    max_size=3,
)
VPAS = st.builds(
    lambda mode, recommends, policies: b.vpa(mode=mode, recommends=recommends, policies=policies),
    MODES,
    st.dictionaries(st.sampled_from(["app", "side"]), RESOURCES, max_size=2),
    POLICIES,
)


@given(st.lists(VPAS, max_size=3))
def test_the_declared_switch_only_ever_holds_more(vpas: list[dict[str, Any]]) -> None:
    """blockResizeOnVpaControlledResources is the more defensive filter: it never frees a
    value enableVpaFilter holds; a VPA in Off holds nothing without it; only cpu and
    memory are held, and a limit only with its request."""
    loose, strict = held(*vpas), held(*vpas, declared=True)
    assert loose <= strict
    if all((v["spec"].get("updatePolicy") or {}).get("updateMode") == "Off" for v in vpas):
        assert loose == set()
    for value in strict:
        container, field, resource = value.split(".")
        assert resource in ("cpu", "memory")
        assert f"{container}.requests.{resource}" in strict


# ------------------------------------------------------------------ the decision


def test_an_active_vpa_blocks_on_both_paths_and_is_named() -> None:
    v = view(b.vpa())
    for path in ("running", "admission"):
        d = b.decide(v, b.pod(node="node-a"), path)
        assert (d.outcome, d.reason) == ("blocked", "VPACoupled"), path
        assert "VerticalPodAutoscaler web-vpa sets app cpu limits" in d.message


def test_only_the_held_resource_is_dropped() -> None:
    d = b.decide(view(b.vpa(recommends={"app": ["cpu"]})), b.pod(node="node-a"))
    assert d.outcome == "apply"
    assert b.reasons(d) == {"app.requests.cpu": "VPACoupled", "app.limits.cpu": "VPACoupled"}
    assert d.values["app"]["requests"] == {"cpu": "400m", "memory": "200Mi"}  # cpu kept


def test_a_vpa_in_off_or_of_another_workload_holds_nothing() -> None:
    for vpa in (b.vpa(mode="Off"), b.vpa("db")):
        assert b.decide(view(vpa), b.pod(node="node-a")).outcome == "apply"


def test_the_switches() -> None:
    vpa = b.vpa()
    assert b.decide(view(vpa, checks={"enableVpaFilter": False}), b.pod()).outcome == "apply"
    declared = b.vpa(mode="Off", recommends={}, policies=[{"controlledResources": ["cpu"]}])
    declared["spec"]["resourcePolicy"]["containerPolicies"][0]["containerName"] = "app"
    assert b.decide(view(declared), b.pod()).outcome == "apply"
    on = {"blockResizeOnVpaControlledResources": True}
    d = b.decide(view(declared, checks=on), b.pod())
    assert d.outcome == "apply" and set(b.reasons(d).values()) == {"VPACoupled"}
    assert set(b.reasons(d)) == {"app.requests.cpu", "app.limits.cpu"}
    # Ignored unless enableVpaFilter is on (Kubex's note).
    off = {**on, "enableVpaFilter": False}
    assert b.reasons(b.decide(view(declared, checks=off), b.pod())) == {}


def test_a_vpa_is_an_input_of_the_remembered_admission_decision() -> None:
    v = view()
    pod = b.pod()
    assert b.decide(v, pod, "admission").outcome == "apply"
    v.apply(b.vpa())
    assert b.decide(v, pod, "admission").reason == "VPACoupled"
    v.apply(b.vpa(mode="Off"))
    assert b.decide(v, pod, "admission").outcome == "apply"
    v.apply(b.vpa())
    assert b.decide(v, pod, "admission").reason == "VPACoupled"
    v.delete("VerticalPodAutoscaler", b.NS, "web-vpa")
    assert b.decide(v, pod, "admission").outcome == "apply"


def test_the_projection_of_a_vpa_decides_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the view keeps of a VPA (app/store/slim.py) is all the decision reads of it."""
    full_vpa = b.vpa(
        policies=[
            {
                "containerName": "app",
                "controlledResources": ["cpu"],
                "controlledValues": "RequestsOnly",
                "minAllowed": {"cpu": "50m"},
                "maxAllowed": {"cpu": "2"},
            }
        ],
        recommends={"app": ["cpu", "memory"]},
    )
    full_vpa["metadata"]["managedFields"] = [{"manager": "vpa-recommender"}]
    full_vpa["status"]["conditions"].append({"type": "LowConfidence", "status": "False"})
    full_vpa["status"]["recommendation"]["containerRecommendations"][0] |= {
        "lowerBound": {"cpu": "50m"},
        "upperBound": {"cpu": "1"},
    }
    kept = slim.project(full_vpa)
    assert "managedFields" not in kept["metadata"]
    assert kept["status"]["conditions"] == [{"type": "RecommendationProvided", "status": "True"}]
    for checks in ({}, {"blockResizeOnVpaControlledResources": True}):
        for vpa in (
            full_vpa,
            b.vpa(mode="Off", policies=full_vpa["spec"]["resourcePolicy"]["containerPolicies"]),
        ):
            whole = view(checks=checks)
            with monkeypatch.context() as patch:
                patch.setattr(app.store.view, "project", lambda obj: obj)
                whole.apply(copy.deepcopy(vpa))
            projected = view(vpa, checks=checks)
            for path in ("running", "admission"):
                one, other = b.decide(whole, b.pod(), path), b.decide(projected, b.pod(), path)
                assert (one.outcome, one.reason, one.message, one.values, one.dropped) == (
                    other.outcome,
                    other.reason,
                    other.message,
                    other.values,
                    other.dropped,
                )


def test_a_switch_is_off_only_when_every_strategy_behind_the_change_turns_it_off() -> None:
    def two(cpu_checks: dict[str, Any], memory_checks: dict[str, Any], *extra: Any) -> Any:
        objects = [o for o in b.base_objects() if getattr(o, "kind", None) != "AutomationStrategy"]
        return b.view(
            *objects,
            b.global_config(multiPolicyContainerRightsizingEnabled=True),
            b.strategy("cpu", safetyChecks=cpu_checks),
            b.strategy("memory", safetyChecks=memory_checks),
            b.static("cpu-pol", {"app": {"requests": {"cpu": "300m"}}}, strategy="cpu"),
            b.static("mem-pol", {"app": {"requests": {"memory": "200Mi"}}}, strategy="memory"),
            *extra,
        )

    off = {"enableVpaFilter": False}
    active = b.vpa()
    assert b.decide(two(off, {}, active), b.pod()).reason == "VPACoupled"
    assert b.decide(two(off, off, active), b.pod()).outcome == "apply"
    # The declared switch: on when any strategy that keeps the filter on turns it on.
    declared = b.vpa(
        mode="Off",
        recommends={},
        policies=[{"containerName": "app", "controlledResources": ["cpu"]}],
    )
    on = {"blockResizeOnVpaControlledResources": True}
    d = b.decide(two({}, on, declared), b.pod())
    assert b.reasons(d) == {"app.requests.cpu": "VPACoupled"}
    d = b.decide(two({}, {**on, **off}, declared), b.pod())
    assert b.reasons(d) == {}
