"""Kubex's `safetyChecks` on a strategy: each field applies unchanged, with Kubex's
defaults but `retainGuaranteedQOS` (kerf keeps Guaranteed QoS), and kerf carries out the
ones it has the behaviour for; the others are named for a Warning Event."""

from __future__ import annotations

from typing import Any

import pytest

from app.decide import PodDecision
from app.model.annotations import PAUSE_UNTIL
from app.model.crd import AutomationStrategySpec, parse_object
from app.model.strategy_fields import unhonoured_fields
from tests.app import builders as b

#: every check here only reads the decision (tests/app/conftest.py)
pytestmark = pytest.mark.usefixtures("checks_only_read")

WIDE = {"maxChangePercent": 100}

#: Kubex's own example strategy (Automation-Strategies.md, "Example: Namespaced Strategy",
#: densify-dev/helm-charts), its safetyChecks and podEviction as published.
KUBEX_EXAMPLE: dict[str, Any] = {
    "inPlaceResize": {"enabled": True, "containerRestart": False},
    "podEviction": {"enabled": True, "retryPodDisruptionBudget": True},
    "safetyChecks": {
        "enablePauseUntilAnnotationCheck": True,
        "enableResourceQuotaFilter": True,
        "enableHpaFilter": True,
        "enableVpaFilter": True,
        "enableLimitRangeFilter": True,
        "enablePodLimitRangeFilter": True,
        "minCpuChangePercent": 10,
        "minMemoryChangePercent": 10,
        "minReadyDuration": "30s",
        "requireOwnerPodsReady": True,
        "respectWorkloadMaxUnavailable": True,
        "resizeRetryInterval": "1m",
        "requireNodeAllocatable": True,
        "nodeCpuHeadroom": "10%",
        "nodeMemoryHeadroom": "256Mi",
    },
}


def decide(
    change: dict[str, Any],
    checks: dict[str, Any] | None = None,
    *extra: Any,
    pod: dict[str, Any] | None = None,
    path: str = "running",
) -> PodDecision:
    objects = [o for o in b.base_objects() if getattr(o, "kind", None) != "AutomationStrategy"]
    objects += [
        b.strategy(safetyChecks=checks or {}),
        b.static(containers={"app": change}, guardrails=WIDE),
        *extra,
    ]
    return b.decide(b.view(*objects), pod or b.pod(node="node-a"), path)


def test_kubexs_example_strategy_applies_and_reads_back_with_every_default() -> None:
    strategy = parse_object(
        {
            "apiVersion": b.API,
            "kind": "AutomationStrategy",
            "metadata": {"name": "team-a-balanced", "namespace": b.NS},
            "spec": KUBEX_EXAMPLE,
        }
    )
    spec = strategy.spec
    assert isinstance(spec, AutomationStrategySpec)
    assert spec.safety_checks.min_ready_duration == "30s"
    dumped = AutomationStrategySpec().model_dump(by_alias=True)["safetyChecks"]
    assert dumped["retainGuaranteedQOS"] is True
    assert dumped["blockResizeOnVpaControlledResources"] is False
    assert dumped["nodeCpuHeadroom"] == "10%" and dumped["minReadyDuration"] == "10s"


@pytest.mark.parametrize("bad", [{"nodeCpuHeadroom": "120%"}, {"minCpuChangePercent": 101}])
def test_a_bad_safety_check_value_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        AutomationStrategySpec.model_validate({"safetyChecks": bad})


def test_the_pause_check_can_be_switched_off() -> None:
    pod = b.pod(node="node-a", annotations={PAUSE_UNTIL: "infinite"})
    change = {"requests": {"cpu": "300m"}}
    assert decide(change, None, pod=pod).reason == "Paused"
    off = decide(change, {"enablePauseUntilAnnotationCheck": False}, pod=pod)
    assert off.outcome == "apply"


def test_the_hpa_filter_can_be_switched_off() -> None:
    change = {"requests": {"cpu": "300m"}}
    assert decide(change, None, b.hpa()).reason == "HPACoupled"
    assert decide(change, {"enableHpaFilter": False}, b.hpa()).outcome == "apply"


def test_the_minimum_change_percent_is_the_larger_of_the_strategys_and_the_tolerance() -> None:
    # 400m -> 360m is 10 %: a change by kerf's 5 % tolerance, none at Kubex's 15 %.
    change = {"requests": {"cpu": "360m"}}
    assert decide(change).outcome == "apply"
    held = decide(change, {"minCpuChangePercent": 15})
    assert (held.outcome, held.reason) == ("skipped", "NoSignificantChange")
    # The memory threshold leaves CPU alone.
    assert decide(change, {"minMemoryChangePercent": 15}).outcome == "apply"


def test_node_headroom_and_the_node_allocatable_filter() -> None:
    # node-a: 4 CPUs, 16Gi; another pod holds 2900m (the decided pod is not in the view).
    other = b.pod(
        "other", workload="db", node="node-a", containers={"db": {"requests": {"cpu": "2900m"}}}
    )
    change = {"requests": {"cpu": "700m"}}  # +300m
    node = b.node()
    # 10 % headroom leaves 3600m: it fits; 1 CPU of headroom does not.
    assert decide(change, None, node, other).outcome == "apply"
    held = decide(change, {"nodeCpuHeadroom": "1"}, node, other)
    assert held.reason == "InsufficientNodeCapacity"
    unchecked = decide(
        change, {"nodeCpuHeadroom": "1", "requireNodeAllocatable": False}, node, other
    )
    assert unchecked.outcome == "apply"
    memory = {"requests": {"memory": "1Gi"}}
    assert decide(memory, {"nodeMemoryHeadroom": "16000Mi"}, node, other).reason == (
        "InsufficientNodeCapacity"
    )


def test_retain_guaranteed_qos_at_kubexs_path_turns_it_off() -> None:
    guaranteed = {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    pod = b.pod(node="node-a", containers={"app": guaranteed})
    change = {"requests": {"cpu": "500m"}}
    kept = decide(change, None, pod=pod)
    assert b.final(kept)["limits"]["cpu"] == "500m"
    off = decide(change, {"retainGuaranteedQOS": False}, pod=pod)
    assert b.final(off)["requests"]["cpu"] == "500m"
    assert b.final(off)["limits"]["cpu"] == "1"


def test_only_values_kerf_does_not_carry_out_are_named() -> None:
    assert unhonoured_fields(AutomationStrategySpec()) == []
    spec = AutomationStrategySpec.model_validate(KUBEX_EXAMPLE)
    named = unhonoured_fields(spec)
    assert [n.split(":")[0] for n in named] == [
        "safetyChecks.minReadyDuration",
        "safetyChecks.requireOwnerPodsReady",
        "safetyChecks.resizeRetryInterval",
    ]
    off = AutomationStrategySpec.model_validate(
        {"podEviction": {"retryPodDisruptionBudget": False}}
    )
    assert unhonoured_fields(off)[0].startswith("podEviction.retryPodDisruptionBudget: false")


def test_kai_conversion_and_vllm_tuning_are_named() -> None:
    spec = AutomationStrategySpec.model_validate(
        {
            "experimental": {"gpuKaiContract": "v1alpha1-2026-07"},
            "enablement": {"overrideScheduler": "kai"},
            "kai": {
                "setQueueWhenSpecified": True,
                "vllm": {"gpuMemoryUtilizationBufferPercent": 10},
            },
        }
    )
    assert [n.split(":")[0] for n in unhonoured_fields(spec)] == [
        "enablement.overrideScheduler",
        "kai.vllm.gpuMemoryUtilizationBufferPercent",
    ]
    # carried out (app/policy/kai.py), so not named; nor is kerf's default (the label kept)
    assert unhonoured_fields(AutomationStrategySpec.model_validate({"kai": {"queue": "q"}})) == []
