"""A proactive policy's `recommender` block: validated with bounds (model and CRD), and
laid over the recommender's flags for the workloads the policy covers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from app.model.crd import API_VERSION, InvalidObject, parse_object
from app.model.workloads import Workload
from app.recommend.policy import rules_for, settings_policy
from app.recommend.rules import RuleSettings
from tests.app.builders import NS, T0, deployment, policy_evaluation, proactive, view
from tools.crdgen import validate_against_crd

FLAGS = RuleSettings(cpu_percentile=0.9, memory_headroom=0.1, oom_factor=1.5, limits="ratio")
WEB = Workload.from_object(deployment("web"))


def _policy(block: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ProactivePolicy",
        "metadata": {"name": "p", "namespace": NS},
        "spec": {"automationStrategyRef": {"name": "default"}, "recommender": block},
    }


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"cpuPercentile": 0}, "spec.recommender.cpuPercentile: Input should be greater than"),
        ({"cpuPercentile": 100.5}, "spec.recommender.cpuPercentile: Input should be less than"),
        ({"memoryHeadroomPercent": -1}, "spec.recommender.memoryHeadroomPercent: Input should"),
        ({"oomBumpFactor": 0.9}, "spec.recommender.oomBumpFactor: Input should be greater"),
        ({"oomBumpFactor": 11}, "spec.recommender.oomBumpFactor: Input should be less"),
        ({"limits": "drop"}, "spec.recommender.limits: Input should be 'ratio' or 'keep'"),
        ({"learningPeriod": "a week"}, "spec.recommender.learningPeriod: "),
        ({"learningPeriod": "0s"}, "spec.recommender: learningPeriod 0s must be positive"),
        ({"cpuPercentil": 95}, "spec.recommender.cpuPercentil: unknown field (misspelt?)"),
    ],
)
def test_an_invalid_block_is_refused_naming_the_field(block: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        parse_object(_policy(block))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"cpuPercentile": 0}, "spec.recommender.cpuPercentile"),
        ({"memoryHeadroomPercent": 101}, "spec.recommender.memoryHeadroomPercent"),
        ({"oomBumpFactor": 0.5}, "spec.recommender.oomBumpFactor"),
        ({"limits": "drop"}, "spec.recommender.limits"),
        ({"learningPeriod": "a week"}, "spec.recommender.learningPeriod"),
    ],
)
def test_the_crd_refuses_what_the_model_refuses(block: dict[str, Any], field: str) -> None:
    (problem,) = validate_against_crd(_policy(block))
    assert problem.startswith(field)


def test_a_full_block_fits_the_crd_and_the_model() -> None:
    block = {
        "cpuPercentile": 99.5,
        "memoryHeadroomPercent": 0,
        "oomBumpFactor": 1,
        "limits": "keep",
        "learningPeriod": "36h",
    }
    assert validate_against_crd(_policy(block)) == []
    assert parse_object(_policy(block)).spec.recommender is not None  # type: ignore[attr-defined]


def test_no_policy_or_a_policy_without_a_block_keeps_the_flags() -> None:
    assert rules_for(view(deployment("web")), WEB, FLAGS) == FLAGS
    assert rules_for(view(deployment("web"), proactive()), WEB, FLAGS) == FLAGS


def test_each_field_of_the_block_replaces_its_flag_and_only_that() -> None:
    partial = view(deployment("web"), proactive(recommender={"memoryHeadroomPercent": 40}))
    assert rules_for(partial, WEB, FLAGS) == RuleSettings(
        cpu_percentile=0.9, memory_headroom=0.4, oom_factor=1.5, limits="ratio"
    )
    full = proactive(
        recommender={
            "cpuPercentile": 99,
            "memoryHeadroomPercent": 25,
            "oomBumpFactor": 2,
            "limits": "keep",
            "learningPeriod": "36h",
        }
    )
    rules = rules_for(view(deployment("web"), full), WEB, FLAGS)
    assert (rules.cpu_percentile, rules.memory_headroom, rules.oom_factor) == (0.99, 0.25, 2.0)
    assert (rules.limits, rules.learning_hours) == ("keep", 36.0)
    assert rules.min_memory_bytes == FLAGS.min_memory_bytes


def test_a_policy_whose_scope_misses_the_workload_does_not_apply() -> None:
    other = proactive(
        scope={"labelSelector": {"matchLabels": {"app": "db"}}},
        recommender={"cpuPercentile": 50},
    )
    elsewhere = proactive("elsewhere", namespace="other", recommender={"cpuPercentile": 60})
    assert settings_policy(view(deployment("web"), other, elsewhere), WEB) is None


def test_the_first_policy_in_selection_order_with_a_block_wins() -> None:
    light = proactive("light", weight=1, recommender={"cpuPercentile": 50})
    heavy = proactive("heavy", weight=5, recommender={"cpuPercentile": 80})
    blockless = proactive("blockless", weight=9)
    older = proactive("older", weight=5, created=T0 - timedelta(days=1), recommender={})
    chosen = settings_policy(view(deployment("web"), light, heavy, blockless), WEB)
    assert chosen is not None and chosen.metadata.name == "heavy"
    chosen = settings_policy(view(deployment("web"), light, heavy, older), WEB)
    assert chosen is not None and chosen.metadata.name == "older"


def test_policy_type_priority_ranks_before_weight() -> None:
    cluster = proactive(
        "wide", kind="ClusterProactivePolicy", weight=0, recommender={"cpuPercentile": 70}
    )
    local = proactive("local", weight=9, recommender={"cpuPercentile": 80})
    by_weight = settings_policy(view(deployment("web"), cluster, local), WEB)
    assert by_weight is not None and by_weight.metadata.name == "local"
    ranked = policy_evaluation(ClusterProactivePolicy=80, ProactivePolicy=70)
    by_priority = settings_policy(view(deployment("web"), cluster, local, ranked), WEB)
    assert by_priority is not None and by_priority.metadata.name == "wide"
