"""A ProactivePolicy's `recommender` block on the API server: its CRD schema's bounds
refuse an out-of-range value with a 422 naming the field, and a valid block is stored as
written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conformance.conftest import NamespacedKubectl, kerf_object

pytestmark = pytest.mark.usefixtures("kerf_crds")


def _policy(name: str, block: dict[str, Any]) -> str:
    spec = {"automationStrategyRef": {"name": "default"}, "recommender": block}
    return kerf_object("ProactivePolicy", name, spec)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            {"cpuPercentile": 0},
            "spec.recommender.cpuPercentile: Invalid value: 0: "
            "spec.recommender.cpuPercentile in body should be greater than or equal to 1",
        ),
        (
            {"oomBumpFactor": 12.5},
            "spec.recommender.oomBumpFactor: Invalid value: 12.5: "
            "spec.recommender.oomBumpFactor in body should be less than or equal to 10",
        ),
        (
            {"limits": "drop"},
            'spec.recommender.limits: Unsupported value: "drop": supported values: "ratio", "keep"',
        ),
    ],
)
def test_an_out_of_range_block_is_refused_naming_the_field(
    kubectl: NamespacedKubectl, block: dict[str, Any], message: str
) -> None:
    answer = kubectl("create", "-f", "-", stdin=_policy("bad", block), check=False)
    assert answer.startswith('The ProactivePolicy "bad" is invalid: '), answer
    assert message in answer, answer


def test_a_valid_block_is_stored_as_written(kubectl: NamespacedKubectl) -> None:
    block = {
        "cpuPercentile": 99.5,
        "memoryHeadroomPercent": 20,
        "oomBumpFactor": 1.5,
        "limits": "keep",
        "learningPeriod": "36h",
    }
    kubectl("create", "-f", "-", stdin=_policy("good", block))
    stored = json.loads(kubectl("get", "proactivepolicy", "good", "-o", "json"))
    assert stored["spec"]["recommender"] == block
