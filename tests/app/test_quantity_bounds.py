"""Unbounded policy quantities: zero or negative values and absurd weights are refused by
the model (as by the CRD schema); a value no node's allocatable can hold is blocked
`Infeasible`, never applied."""

from __future__ import annotations

from typing import Any

import pytest

from app.model.crd import InvalidObject
from tests.app import builders as b


def policy_with_limits(limits: dict[str, Any]) -> Any:
    return b.static(containers={"app": {"limits": limits}})


@pytest.mark.parametrize("value", [0, "0", "0Mi", "0.000", "-1Gi", "0e3"])
def test_a_zero_or_negative_policy_value_is_refused(value: Any) -> None:
    with pytest.raises(InvalidObject, match=r"limits.memory: invalid quantity") as caught:
        policy_with_limits({"memory": value})
    assert "StaticPolicy shop/web-static" in str(caught.value)


@pytest.mark.parametrize("weight", [1e30, 1_000_001, -1])
def test_a_weight_beyond_its_bounds_is_refused(weight: Any) -> None:
    with pytest.raises(InvalidObject, match="spec.weight"):
        b.static(weight=weight)


def test_a_large_weight_within_bounds_is_kept() -> None:
    assert b.static(weight=1_000_000).spec.weight == 1_000_000  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("limits", "words"),
    [
        ({"cpu": 200000}, "app.limits.cpu 200000 is more than any node's allocatable"),
        ({"memory": "9999Ei"}, "app.limits.memory"),
    ],
)
@pytest.mark.parametrize("path", ["running", "admission"])
def test_a_value_no_node_can_hold_is_infeasible(limits: dict, words: str, path: str) -> None:
    v = b.view(*b.base_objects(), b.node("a"), b.node("b", cpu="64"), policy_with_limits(limits))
    d = b.decide(v, b.pod(node="a"), path)
    assert (d.outcome, d.reason) == ("blocked", "Infeasible")
    assert words in d.message and "the largest: cpu 64" in d.message
    assert b.final(d) == b.APP_RES


def test_a_value_the_largest_node_holds_is_not_infeasible() -> None:
    v = b.view(
        *b.base_objects(),
        b.node("a"),
        b.node("b", cpu="64", memory="256Gi"),
        policy_with_limits({"cpu": "48", "memory": "200Gi"}),
    )
    assert b.decide(v, b.pod(node="b"), "admission").outcome == "apply"


def test_a_new_node_that_holds_the_value_lifts_infeasible_at_admission_too() -> None:
    v = b.view(*b.base_objects(), b.node("a"), policy_with_limits({"cpu": "48"}))
    assert b.decide(v, b.pod(), "admission").reason == "Infeasible"
    v.apply(b.node("big", cpu="64"))
    assert b.decide(v, b.pod(), "admission").outcome == "apply"
    v.delete("Node", "", "big")
    assert b.decide(v, b.pod(), "admission").reason == "Infeasible"


def test_without_nodes_the_rule_is_not_judged() -> None:
    v = b.view(*b.base_objects(), policy_with_limits({"cpu": "48"}))
    assert b.decide(v, b.pod(), "admission").outcome == "apply"
