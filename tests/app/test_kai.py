"""A KAI pod's `gpu-fraction` as a value: read from the pod as its first container's
request, written back as the pod's annotation with the queue label the strategy says."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.model.crd import AutomationStrategySpec
from app.model.quantities import GPU_FRACTION, format_resource, parse_resource
from app.model.workloads import pod_resources, target_containers
from app.policy.kai import KAI_QUEUE_LABEL, KaiChange, kai_change
from app.policy.rollback_health import runs_values

RESOURCES = {"app": {"requests": {"cpu": "1", GPU_FRACTION: "0.46"}, "limits": {"memory": "1Gi"}}}


def spec(**kai: object) -> AutomationStrategySpec:
    return AutomationStrategySpec.model_validate({"kai": kai})


def test_the_fraction_leaves_the_resources_for_the_annotation() -> None:
    assert kai_change(RESOURCES, "0.3", spec()) == KaiChange(
        {"app": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}},
        {GPU_FRACTION: "0.46"},
    )


def test_the_queue_is_set_only_when_the_strategy_says_so() -> None:
    assert kai_change(RESOURCES, "0.3", spec(queue="research")).labels == {}
    assert kai_change(RESOURCES, "0.3", None).labels == {}
    told = spec(setQueueWhenSpecified=True, queue="research")
    assert kai_change(RESOURCES, "0.3", told).labels == {KAI_QUEUE_LABEL: "research"}
    # Kubex's built-in queue is the default
    default = kai_change(RESOURCES, None, spec(setQueueWhenSpecified=True))
    assert default.labels == {KAI_QUEUE_LABEL: "kubex-unlimited-gpu-queue"}


def test_a_fraction_the_pod_has_is_no_change() -> None:
    told = spec(setQueueWhenSpecified=True)
    assert kai_change(RESOURCES, "0.460", told) == KaiChange(
        {"app": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}}
    )


def test_resources_without_a_fraction_pass_unchanged() -> None:
    plain = {"app": {"requests": {"cpu": "1"}}}
    assert kai_change(plain, "0.3", spec(setQueueWhenSpecified=True)) == KaiChange(plain)


def test_a_kai_pod_holds_its_fraction_on_its_first_container() -> None:
    pod = {
        "metadata": {"annotations": {GPU_FRACTION: "0.3"}},
        "spec": {
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": "500m"}}},
                {"name": "sidecar"},
            ]
        },
    }
    found = pod_resources(pod, target_containers(pod))
    assert found["app"]["requests"] == {"cpu": 500, GPU_FRACTION: 300}
    assert found["sidecar"]["requests"] == {}


def test_a_fraction_that_is_no_number_is_absent() -> None:
    pod = {
        "metadata": {"annotations": {GPU_FRACTION: "half"}},
        "spec": {"containers": [{"name": "app"}]},
    }
    assert pod_resources(pod, target_containers(pod))["app"]["requests"] == {}


@given(st.integers(min_value=1, max_value=100_000))
def test_fractions_round_trip_as_decimals(thousandths: int) -> None:
    text = format_resource(GPU_FRACTION, thousandths)
    assert "m" not in text
    assert parse_resource(GPU_FRACTION, text) == thousandths


def test_fraction_spellings() -> None:
    assert [format_resource(GPU_FRACTION, v) for v in (460, 500, 1000, 1250, 5)] == [
        "0.46",
        "0.5",
        "1",
        "1.25",
        "0.005",
    ]


def test_a_kai_pod_runs_its_fraction() -> None:
    pod = {
        "metadata": {"annotations": {GPU_FRACTION: "0.60"}},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]},
    }
    assert runs_values(pod, {"app": {"requests": {GPU_FRACTION: "0.6"}}})
    assert not runs_values(pod, {"app": {"requests": {GPU_FRACTION: "0.3"}}})
    pod["metadata"]["annotations"][GPU_FRACTION] = "half"
    assert not runs_values(pod, {"app": {"requests": {GPU_FRACTION: "0.6"}}})
