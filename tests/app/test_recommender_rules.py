"""The recommender's rules (app.recommend.rules) and its input mapping, without Prometheus."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.model.owners import WorkloadRef
from app.model.workloads import Workload
from app.recommend.inputs import Answers, owner_by_name, usage_for
from app.recommend.prometheus_query import AnswerError, Queries, Series, parse_matrix, parse_vector
from app.recommend.rows import changed, merged_rows, row
from app.recommend.rules import (
    MI,
    ContainerResult,
    ContainerUsage,
    Refusal,
    RuleSettings,
    Window,
    coefficient_of_variation,
    confidence,
    quantile,
    recommend_container,
    recommend_workload,
)
from app.store.view import ClusterView

STEP = 300.0
END = 1_800_000_000.0
WINDOW = Window(END - 168 * 3600, END, STEP)
RULES = RuleSettings()


def points(values: list[float], end: float = END) -> tuple[tuple[float, float], ...]:
    """`values` at one point per step, the last at `end`."""
    return tuple((end - (len(values) - 1 - i) * STEP, v) for i, v in enumerate(values))


def usage(cpu: list[float], memory: list[float], **kw: object) -> ContainerUsage:
    return ContainerUsage("app", cpu=points(cpu), memory=points(memory), **kw)  # type: ignore[arg-type]


def test_quantile_interpolates_between_ranks() -> None:
    assert quantile([1, 2, 3, 4, 5], 0.5) == 3
    assert quantile([0, 10], 0.95) == pytest.approx(9.5)
    assert quantile([7], 0.95) == 7


def test_the_default_rules() -> None:
    result = recommend_container(
        usage([0.1] * 95 + [0.5] * 5 + [0.1] * 100, [200 * MI] * 199 + [400 * MI]), WINDOW, RULES
    )
    assert isinstance(result, ContainerResult)
    # p95 of 200 points of which 5 are 0.5: between ranks, towards 0.1.
    assert result.requests == {
        "cpu": f"{math.ceil(quantile([0.1] * 195 + [0.5] * 5, 0.95) * 1000)}m",
        "memory": "460Mi",
    }
    assert result.samples == 200
    assert result.coverage_hours == pytest.approx(200 * STEP / 3600, abs=0.01)


def test_minimums_are_kept() -> None:
    result = recommend_container(usage([0.0] * 20, [MI] * 20), WINDOW, RULES)
    assert isinstance(result, ContainerResult)
    assert result.requests == {"cpu": "10m", "memory": "32Mi"}


def test_an_oom_kill_without_a_limit_bumps_the_peak() -> None:
    result = recommend_container(usage([0.1] * 20, [100 * MI] * 20, oom_killed=True), WINDOW, RULES)
    assert isinstance(result, ContainerResult)
    assert result.requests["memory"] == "120Mi"


def test_limits_follow_the_template_ratio_or_are_left_out() -> None:
    data = usage([0.25] * 20, [100 * MI] * 20, limit_ratios={"cpu": 2.0, "memory": 1.5})
    ratio = recommend_container(data, WINDOW, RULES)
    keep = recommend_container(data, WINDOW, RuleSettings(limits="keep"))
    assert isinstance(ratio, ContainerResult) and isinstance(keep, ContainerResult)
    assert ratio.requests == {"cpu": "250m", "memory": "115Mi"}
    assert ratio.limits == {"cpu": "500m", "memory": "173Mi"}
    assert keep.limits == {}


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (ContainerUsage("app"), "NoSeries"),
        (ContainerUsage("app", cpu=points([0.1] * 5)), "PartialAnswer"),
        (usage([0.1, float("nan"), 0.1], [MI] * 3), "NotANumber"),
        (
            ContainerUsage("app", cpu=points([0.1] * 3, END - 3600), memory=points([MI] * 3)),
            "DataGap",
        ),
    ],
)
def test_bad_data_is_refused(data: ContainerUsage, reason: str) -> None:
    outcome = recommend_container(data, WINDOW, RULES)
    assert isinstance(outcome, Refusal) and outcome.reason == reason


def test_one_bad_container_refuses_the_workload() -> None:
    good = usage([0.1] * 5, [MI] * 5)
    bad = ContainerUsage("sidecar")
    outcome = recommend_workload([good, bad], WINDOW, RULES)
    assert isinstance(outcome, Refusal) and "sidecar" in outcome.message


cpu_values = st.lists(st.floats(0, 8, allow_nan=False), min_size=1, max_size=60)
mem_values = st.lists(st.floats(0, 8 * 1024 * MI, allow_nan=False), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(
    cpu=cpu_values,
    current=st.floats(0.001, 16),
    throttled=st.floats(0, 1),
)
def test_a_throttled_container_never_gets_a_lower_cpu_request(
    cpu: list[float], current: float, throttled: float
) -> None:
    data = usage(
        cpu,
        [MI] * len(cpu),
        current_cpu_request=current,
        throttled_periods=throttled * 1000,
        periods=1000.0,
    )
    result = recommend_container(data, WINDOW, RULES)
    assert isinstance(result, ContainerResult)
    if throttled >= RULES.throttling_ratio:
        assert int(result.requests["cpu"].removesuffix("m")) >= math.floor(current * 1000)


@settings(max_examples=200, deadline=None)
@given(
    coverage=st.floats(0, 1000),
    more_coverage=st.floats(0, 1000),
    samples=st.integers(0, 5000),
    more_samples=st.integers(0, 5000),
    cv=st.floats(0, 50),
)
def test_confidence_is_in_0_1_and_rises_with_coverage_and_samples(
    coverage: float, more_coverage: float, samples: int, more_samples: int, cv: float
) -> None:
    base = confidence(coverage, samples, cv, RULES)
    assert 0 <= base <= 1
    assert confidence(coverage + more_coverage, samples, cv, RULES) >= base
    assert confidence(coverage, samples + more_samples, cv, RULES) >= base
    assert confidence(coverage, samples, cv + 1, RULES) <= base


def _view(replicas: int) -> ClusterView:
    view = ClusterView()
    view.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "app"}]}}},
        }
    )
    for index in range(replicas):
        view.apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"web-7d4b9-pod{index:02d}",
                    "namespace": "shop",
                    "creationTimestamp": "2026-01-01T00:00:00Z",
                    "labels": {"pod-template-hash": "7d4b9"},
                    "ownerReferences": [
                        {"kind": "ReplicaSet", "name": "web-7d4b9", "controller": True}
                    ],
                },
                "spec": {"containers": [{"name": "app"}]},
                "status": {"phase": "Running"},
            }
        )
    return view


def _series(pod: int, values: list[float]) -> Series:
    labels = {"namespace": "shop", "pod": f"web-7d4b9-pod{pod:02d}", "container": "app"}
    return Series(labels, points(values))


def _requests(outcome: list[ContainerResult] | Refusal) -> tuple[int, int] | None:
    if isinstance(outcome, Refusal):
        return None
    [result] = outcome
    return (
        int(result.requests["cpu"].removesuffix("m")),
        int(result.requests["memory"].removesuffix("Mi")),
    )


@settings(max_examples=150, deadline=None)
@given(
    cpu=st.lists(cpu_values, min_size=1, max_size=3),
    memory=st.lists(mem_values, min_size=3, max_size=3),
    missing=st.sampled_from(["cpu", "memory", "both"]),
    which=st.integers(0, 2),
)
def test_a_partial_answer_never_gives_a_smaller_recommendation(
    cpu: list[list[float]], memory: list[list[float]], missing: str, which: int
) -> None:
    """An answer without some replica's series gives no row, or a row no smaller than the
    whole answer's."""
    replicas = len(cpu)
    which %= replicas
    view = _view(replicas)
    whole = Answers(
        cpu=[_series(i, values) for i, values in enumerate(cpu)],
        memory=[_series(i, memory[i]) for i in range(replicas)],
    )
    part = Answers(
        cpu=[s for i, s in enumerate(whole.cpu) if not (i == which and missing != "memory")],
        memory=[s for i, s in enumerate(whole.memory) if not (i == which and missing != "cpu")],
    )
    ref = WorkloadRef("Deployment", "shop", "web")

    def outcome(answers: Answers) -> tuple[int, int] | None:
        usage = usage_for(view, answers, WINDOW, settle_s=900)[ref]
        return _requests(
            usage if isinstance(usage, Refusal) else recommend_workload(usage, WINDOW, RULES)
        )

    full = outcome(whole)
    assert full is not None
    partial = outcome(part)
    if partial is not None:
        assert partial[0] >= full[0] and partial[1] >= full[1]


def test_pods_that_are_gone_map_by_their_generated_names() -> None:
    workloads = [
        Workload("Deployment", "shop", "web"),
        Workload("Deployment", "shop", "web-api"),
        Workload("StatefulSet", "shop", "db"),
    ]
    assert owner_by_name("shop", "web-7d4b9-abcde", workloads) == WorkloadRef(
        "Deployment", "shop", "web"
    )
    assert owner_by_name("shop", "web-api-7d4b9-abcde", workloads) == WorkloadRef(
        "Deployment", "shop", "web-api"
    )
    assert owner_by_name("shop", "db-3", workloads) == WorkloadRef("StatefulSet", "shop", "db")
    assert owner_by_name("other", "db-3", workloads) is None
    assert owner_by_name("shop", "cache-0", workloads) is None


def test_prometheus_answers_parse_and_errors_say_why() -> None:
    matrix = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": {"pod": "p"}, "values": [[1, "0.5"], [2, "NaN"]]}],
        },
    }
    [series] = parse_matrix(orjson.dumps(matrix))
    assert series.points[0] == (1.0, 0.5) and math.isnan(series.points[1][1])
    vector = {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "3"]}]},
    }
    assert parse_vector(orjson.dumps(vector))[0].value == 3
    with pytest.raises(AnswerError, match="bad_data: parse error"):
        parse_matrix(
            orjson.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"})
        )
    with pytest.raises(AnswerError, match="expected a vector"):
        parse_vector(orjson.dumps(matrix))
    assert (
        Queries().render("x[{window}] y[{rate}]", window_s=3600, rate_s=300) == "x[3600s] y[300s]"
    )


def test_rows_are_stored_only_when_they_change() -> None:
    ref = WorkloadRef("Deployment", "shop", "web")
    other = WorkloadRef("Deployment", "shop", "gone")
    at = datetime(2026, 11, 28, 10, tzinfo=UTC)
    result = ContainerResult("app", {"cpu": "200m", "memory": "345Mi"}, {}, 168, 4000, 0.9, None)
    old = [row(ref, result, at), row(other, result, at)]
    # A later analysis with the same values is no change; a workload gone loses its row.
    new = merged_rows(old, [row(ref, result, at + timedelta(hours=1))], kept=[])
    assert [r["ownerName"] for r in new] == ["web"]
    assert changed(old, new, refresh_before=at - timedelta(days=1))
    same = [row(ref, result, at + timedelta(hours=1))]
    assert not changed([old[0]], same, refresh_before=at - timedelta(days=1))
    # ... until the stored analysis is a day old: then it is refreshed.
    assert changed([old[0]], same, refresh_before=at + timedelta(minutes=1))
    # A workload refused this run keeps its stored row.
    kept = merged_rows(old, [], kept=[ref])
    assert kept == [old[0]]


@pytest.mark.parametrize(
    ("coverage", "samples", "cv", "expected"),
    [
        (168, 4034, 0.05, 0.95),
        (48, 576, 0.05, 0.15),
        (168, 2017, 0.65, 0.60),
        (168, 2017, 0.1, 0.90),
    ],
)
def test_the_worked_examples_of_docs_recommender(
    coverage: float, samples: int, cv: float, expected: float
) -> None:
    assert confidence(coverage, samples, cv, RULES) == expected


def test_an_idle_containers_noise_is_not_instability() -> None:
    assert coefficient_of_variation([0.001, 0.003], RULES.min_cpu_cores) == pytest.approx(0.1)
