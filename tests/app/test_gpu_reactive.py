"""The GpuReactivePolicy decision (app/recommend/gpu_reactive.py): every rule of docs/gpu.md on its
own, and the two bounds as properties."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.model.crd import GpuReactivePolicy, GpuReactivePolicySpec, parse_object
from app.recommend.gpu_reactive import (
    AT_BASELINE,
    KEPT,
    LOWER_REFUSED,
    NO_ELIGIBLE_PODS,
    SCALE_BACK,
    SERIES_MISSING,
    UPSIZE,
    PodGpu,
    Previous,
    SignalSamples,
    Usage,
    choose,
    eligible_pods,
    evaluate,
    kai_fraction,
    redistribute,
    whole_gpus,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OLD = NOW - timedelta(hours=1)
PROM = {"namespaceLabel": "namespace", "podLabel": "pod", "containerLabel": "container"}


def spec(
    compute: dict[str, Any] | None = None,
    memory: dict[str, Any] | None = None,
    **extra: Any,
) -> GpuReactivePolicySpec:
    """Kubex's documented example policy, with overrides per signal."""
    signal = {
        "upsize": {
            "thresholdPercent": 125,
            "metricsWindow": "10m",
            "headroomPercent": 20,
            "maxPercent": 200,
        },
        "scaleBack": {"thresholdPercent": 60, "metricsWindow": "10m", "headroomPercent": 20},
    }
    metrics = {}
    for name, metric, interpretation, override in (
        ("compute", "kubex_gpu_container_sm_utilization_percent", "fullGPU", compute),
        ("memory", "kubex_gpu_container_memory_footprint_percent", "currentAllocation", memory),
    ):
        body = copy.deepcopy(signal)
        for part, values in (override or {}).items():
            body[part] = {**body.get(part, {}), **values}
        body["prometheus"] = {**PROM, "metric": metric, "interpretation": interpretation}
        metrics[name] = body
    doc = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "GpuReactivePolicy",
        "metadata": {"name": "gpu", "namespace": "ml"},
        "spec": {"automationStrategyRef": {"name": "s"}, "metrics": metrics, **extra},
    }
    policy = parse_object(doc)
    assert isinstance(policy, GpuReactivePolicy)
    return policy.spec


def pod(name: str = "p1", start: datetime | None = OLD, **allocation: float) -> PodGpu:
    return PodGpu(name, start, allocation or {"app": 1.0})


def flat(values: dict[tuple[str, str], float]) -> SignalSamples:
    """Usage that held one value for both windows."""
    usage = {k: Usage(v, v) for k, v in values.items()}
    return SignalSamples(usage, usage)


def samples(
    compute: dict[tuple[str, str], float], memory: dict[tuple[str, str], float] | None = None
) -> dict[str, SignalSamples]:
    quiet = {k: 50.0 for k in compute} if memory is None else memory
    return {"compute": flat(compute), "memory": flat(quiet)}


# --------------------------------------------------------------------- eligible pods


def test_a_pod_counts_once_it_is_old_enough_and_has_started() -> None:
    pods = [
        pod("old"),
        pod("young", NOW - timedelta(minutes=14)),
        pod("unstarted", None),
        PodGpu("cpu-only", OLD, {"app": 0.0}),
    ]
    assert [p.name for p in eligible_pods(pods, "15m", NOW)] == ["old"]
    assert [p.name for p in eligible_pods(pods, "0s", NOW)] == ["old", "young"]


def test_no_eligible_pod_changes_nothing() -> None:
    out = evaluate(spec(), [pod(start=NOW)], samples({}), None, None, NOW)
    assert (out.reason, dict(out.containers)) == (NO_ELIGIBLE_PODS, {})


def test_a_container_without_a_gpu_is_left_out_of_sums_and_values() -> None:
    pods = [PodGpu("p1", OLD, {"app": 1.0, "sidecar": 0.0})]
    out = evaluate(spec(), pods, samples({("p1", "app"): 250.0}), None, None, NOW)
    assert dict(out.containers) == {"app": pytest.approx(2.0)}


# --------------------------------------------------------------------- upsize


@pytest.mark.parametrize(("max_percent", "total", "gpus"), [(400, 3.0, 3), (200, 2.0, 2)])
def test_upsize_is_the_hottest_pod_plus_headroom_capped_at_max_percent(
    max_percent: int, total: float, gpus: int
) -> None:
    policy = spec(compute={"upsize": {"maxPercent": max_percent}})
    out = evaluate(policy, [pod()], samples({("p1", "app"): 250.0}), None, None, NOW)
    assert (out.reason, out.driver, out.direction) == (UPSIZE, "compute", "upsize")
    assert out.total == pytest.approx(total)
    assert whole_gpus(out.containers["app"], cap=1.0 * max_percent / 100) == gpus


def test_upsize_is_judged_per_pod_and_takes_the_hottest() -> None:
    pods = [pod("cool"), pod("hot"), pod("warm")]
    usage = {("cool", "app"): 40.0, ("hot", "app"): 160.0, ("warm", "app"): 130.0}
    out = evaluate(spec(), pods, samples(usage), None, None, NOW)
    assert out.total == pytest.approx(1.6 * 1.2)
    assert out.candidates[0].pod == "hot"


def test_upsize_needs_the_whole_window_above_the_threshold() -> None:
    spike = {"compute": SignalSamples({("p1", "app"): Usage(90.0, 400.0)}, {})}
    spike["memory"] = flat({("p1", "app"): 50.0})
    out = evaluate(spec(), [pod()], spike, None, None, NOW)
    assert out.reason != UPSIZE


def test_the_threshold_is_a_percent_of_the_pod_s_allocation() -> None:
    # 250 % of one GPU on a 2-GPU pod is 125 % of its allocation: not above 125.
    out = evaluate(spec(), [pod(app=2.0)], samples({("p1", "app"): 250.0}), None, None, NOW)
    assert out.reason != UPSIZE


def test_current_allocation_interpretation_scales_by_the_container_s_allocation() -> None:
    # KAI's memory: 150 % of a 0.3 share is 0.45 of a GPU.
    usage = {("p1", "app"): 150.0}
    out = evaluate(
        spec(memory={"upsize": {"maxPercent": 400}}),
        [pod(app=0.3)],
        samples({("p1", "app"): 10.0}, usage),
        None,
        None,
        NOW,
    )
    assert (out.driver, out.total) == ("memory", pytest.approx(0.45 * 1.2))
    assert kai_fraction(out.containers["app"]) == "0.54"


# --------------------------------------------------------------------- sums per pod


def test_a_pod_s_containers_are_summed_and_the_total_split_back_by_allocation() -> None:
    pods = [PodGpu("p1", OLD, {"a": 1.0, "b": 3.0})]
    # 300 % + 250 % of one GPU = 5.5 GPUs on 4: 137.5 % of the allocation
    usage = {("p1", "a"): 300.0, ("p1", "b"): 250.0}
    out = evaluate(spec(), pods, samples(usage), None, None, NOW)
    assert out.total == pytest.approx(5.5 * 1.2)
    assert dict(out.containers) == {"a": pytest.approx(1.65), "b": pytest.approx(4.95)}


def test_redistribute_keeps_the_proportions() -> None:
    assert redistribute(6.0, {"a": 1.0, "b": 2.0}) == {"a": 2.0, "b": 4.0}


# --------------------------------------------------------------------- scale-back


def test_scale_back_is_the_hottest_pod_plus_headroom_never_below_baseline() -> None:
    pods = [pod("p1", app=3.0), pod("p2", app=3.0)]
    usage = {("p1", "app"): 20.0, ("p2", "app"): 150.0}
    previous = Previous(3.0, "compute", {"app": 3.0})
    out = evaluate(
        spec(), pods, samples(usage, {k: 5.0 for k in usage}), {"app": 1.0}, previous, NOW
    )
    assert (out.reason, out.direction) == (SCALE_BACK, "scaleBack")
    assert out.total == pytest.approx(1.5 * 1.2)
    low = evaluate(
        spec(),
        pods,
        samples({k: 20.0 for k in usage}, {k: 5.0 for k in usage}),
        {"app": 1.0},
        previous,
        NOW,
    )
    assert low.total == pytest.approx(1.0)  # 0.24 GPU, floored to the baseline


def test_scale_back_needs_every_pod_below_the_threshold() -> None:
    pods = [pod("p1", app=3.0), pod("p2", app=3.0)]
    # 60 % of 3 GPUs is 1.8 GPUs: p2 at 190 % of one GPU is above it
    usage = {("p1", "app"): 20.0, ("p2", "app"): 190.0}
    previous = Previous(3.0, "compute", {"app": 3.0})
    out = evaluate(
        spec(), pods, samples(usage, {k: 5.0 for k in usage}), {"app": 1.0}, previous, NOW
    )
    assert out.reason == KEPT
    assert dict(out.containers) == {"app": 3.0}


def test_scale_back_needs_samples_for_every_container() -> None:
    pods = [PodGpu("p1", OLD, {"a": 2.0, "b": 2.0})]
    previous = Previous(4.0, "compute", {"a": 2.0, "b": 2.0})
    only_a = {("p1", "a"): 10.0}
    out = evaluate(
        spec(), pods, samples(only_a, {("p1", "a"): 5.0}), {"a": 1.0, "b": 1.0}, previous, NOW
    )
    assert out.reason == KEPT


# --------------------------------------------------------------------- compute vs memory


def test_the_higher_total_wins() -> None:
    out = evaluate(
        spec(memory={"upsize": {"maxPercent": 400}}, compute={"upsize": {"maxPercent": 400}}),
        [pod()],
        samples({("p1", "app"): 200.0}, {("p1", "app"): 300.0}),
        None,
        None,
        NOW,
    )
    assert (out.driver, out.total) == ("memory", pytest.approx(3.6))
    assert [c.signal for c in out.candidates] == ["compute", "memory"]


def _cand(signal: str, total: float) -> Any:
    from app.recommend.gpu_reactive import Candidate

    return Candidate(signal, "scaleBack", total, "p1", total, 1.0)  # type: ignore[arg-type]


def test_a_tie_keeps_the_driving_metric() -> None:
    both = {"compute": _cand("compute", 2.0), "memory": _cand("memory", 2.0)}
    assert choose(both, Previous(3.0, "memory", {}))[1] == "memory"
    assert choose(both, Previous(3.0, "compute", {}))[1] == "compute"


def test_a_lower_total_from_the_driving_metric_is_accepted() -> None:
    chosen, driver, _ = choose({"compute": _cand("compute", 1.0)}, Previous(3.0, "compute", {}))
    assert chosen is not None and driver == "compute"


def test_a_lower_total_from_the_other_metric_needs_the_driver_to_propose_too() -> None:
    alone = {"memory": _cand("memory", 1.5)}
    chosen, _, why = choose(alone, Previous(3.0, "compute", {}))
    assert chosen is None and "compute" in why
    with_driver = {"memory": _cand("memory", 1.5), "compute": _cand("compute", 1.2)}
    chosen, driver, _ = choose(with_driver, Previous(3.0, "compute", {}))
    assert chosen is not None and (driver, chosen.total) == ("memory", 1.5)


def test_a_recommendation_without_a_driver_is_not_lowered_until_one_is_set() -> None:
    lower = {"compute": _cand("compute", 1.0)}
    assert choose(lower, Previous(3.0, None, {}))[0] is None
    higher = {"compute": _cand("compute", 3.5)}
    assert choose(higher, Previous(3.0, None, {}))[1] == "compute"


# --------------------------------------------------------------------- fallback


def test_no_proposal_keeps_the_previous_while_off_baseline() -> None:
    steady = samples({("p1", "app"): 150.0}, {("p1", "app"): 70.0})  # between thresholds of 2
    previous = Previous(2.0, "compute", {"app": 2.0})
    out = evaluate(spec(), [pod(app=2.0)], steady, {"app": 1.0}, previous, NOW)
    assert (out.reason, dict(out.containers), out.driver) == (KEPT, {"app": 2.0}, "compute")


def test_no_proposal_at_baseline_emits_nothing() -> None:
    steady = samples({("p1", "app"): 100.0}, {("p1", "app"): 70.0})
    out = evaluate(spec(), [pod()], steady, None, None, NOW)
    assert (out.reason, dict(out.containers)) == (AT_BASELINE, {})


def test_a_refused_lower_total_at_baseline_says_why() -> None:
    # The pods run at baseline but the recommendation in force names no driver.
    low = samples({("p1", "app"): 10.0}, {("p1", "app"): 10.0})
    out = evaluate(spec(), [pod(app=3.0)], low, {"app": 3.0}, Previous(4.0, None, {}), NOW)
    assert out.reason == LOWER_REFUSED


def test_the_baseline_is_the_allocation_before_the_first_upsize_and_is_kept() -> None:
    first = evaluate(spec(), [pod()], samples({("p1", "app"): 250.0}), None, None, NOW)
    assert dict(first.baseline) == {"app": 1.0}
    later = evaluate(
        spec(), [pod(app=2.0)], samples({("p1", "app"): 300.0}), first.baseline, None, NOW
    )
    assert dict(later.baseline) == {"app": 1.0}
    assert later.total == pytest.approx(2.0)  # capped at 200 % of the baseline, not of 2


# --------------------------------------------------------------------- bad input


def test_a_signal_without_series_changes_nothing_and_names_the_metric() -> None:
    no_memory = {"compute": flat({("p1", "app"): 250.0}), "memory": flat({("other", "x"): 5.0})}
    out = evaluate(spec(), [pod()], no_memory, None, None, NOW)
    assert (out.reason, dict(out.containers)) == (SERIES_MISSING, {})
    assert "kubex_gpu_container_memory_footprint_percent" in out.message


# --------------------------------------------------------------------- output


@pytest.mark.parametrize(
    ("value", "cap", "count"),
    [(2.7, None, 3), (3.0, None, 3), (0.2, None, 1), (1.8, 1.5, 1), (2.4, 2.0, 2)],
)
def test_whole_gpus_round_up_within_the_cap(value: float, cap: float | None, count: int) -> None:
    assert whole_gpus(value, cap) == count


@pytest.mark.parametrize(
    ("value", "text"), [(0.451, "0.46"), (0.5, "0.5"), (1.7, "1"), (0.001, "0.01")]
)
def test_kai_fractions_round_up_to_hundredths_within_one(value: float, text: str) -> None:
    assert kai_fraction(value) == text


# --------------------------------------------------------------------- properties

percent = st.floats(min_value=0, max_value=2000, allow_nan=False)
allocation = st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0])


@given(
    usage=st.lists(st.tuples(percent, percent), min_size=1, max_size=4),
    memory=st.lists(st.tuples(percent, percent), min_size=1, max_size=4),
    current=allocation,
    base=allocation,
    max_percent=st.integers(min_value=1, max_value=800),
    threshold=st.integers(min_value=1, max_value=300),
    driver=st.sampled_from(["compute", "memory", None]),
)
def test_scale_back_never_goes_below_baseline_and_upsize_never_past_the_cap(
    usage: list[tuple[float, float]],
    memory: list[tuple[float, float]],
    current: float,
    base: float,
    max_percent: int,
    threshold: int,
    driver: Any,
) -> None:
    policy = spec(
        compute={"upsize": {"maxPercent": max_percent, "thresholdPercent": threshold}},
        memory={"upsize": {"maxPercent": max_percent}},
    )
    names = [f"p{i}" for i in range(max(len(usage), len(memory)))]
    pods = [pod(n, app=current) for n in names]

    def window(values: list[tuple[float, float]]) -> SignalSamples:
        got = {(names[i], "app"): Usage(min(a, b), max(a, b)) for i, (a, b) in enumerate(values)}
        return SignalSamples(got, got)

    previous = Previous(current, driver, {"app": current})
    out = evaluate(
        policy,
        pods,
        {"compute": window(usage), "memory": window(memory)},
        {"app": base},
        previous,
        NOW,
    )
    for candidate in out.candidates:
        if candidate.direction == "scaleBack":
            assert candidate.total >= base - 1e-9
        else:
            assert candidate.total <= base * max_percent / 100 + 1e-9
    if out.direction == "scaleBack":
        assert out.total is not None and out.total >= base - 1e-9
    if out.direction == "upsize":
        assert out.total is not None and out.total <= base * max_percent / 100 + 1e-9
        assert (
            whole_gpus(out.total, base * max_percent / 100)
            <= max(1, base * max_percent / 100 + 1e-9)
            or base * max_percent / 100 < 1
        )
