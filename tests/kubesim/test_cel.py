"""kubesim's CEL subset for webhook matchConditions."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.cel import CelEvalError, CelSyntaxError, compile_expression, evaluate_condition

MIRROR = (
    "!has(object.metadata.annotations) || "
    "!('kubernetes.io/config.mirror' in object.metadata.annotations)"
)


def run(expression: str, obj: Any) -> bool:
    return evaluate_condition(compile_expression(expression), {"object": obj})


@pytest.mark.parametrize(
    ("metadata", "called"),
    [
        ({}, True),
        ({"annotations": {"team": "web"}}, True),
        ({"annotations": {"kubernetes.io/config.mirror": "x"}}, False),
    ],
)
def test_kerf_condition_skips_only_mirror_pods(metadata: dict[str, Any], called: bool) -> None:
    assert run(MIRROR, {"metadata": metadata}) is called


def test_or_and_and_are_decided_by_either_side_despite_an_error() -> None:
    assert run("object.missing == 1 || true", {}) is True
    assert run("object.missing == 1 && false", {}) is False
    with pytest.raises(CelEvalError, match="no such key: missing"):
        run("object.missing == 1 || false", {})


def test_indexing_equality_and_lists() -> None:
    obj = {"metadata": {"labels": {"tier": "web"}}, "items": ["a", "b"]}
    assert run("object.metadata.labels['tier'] == 'web'", obj) is True
    assert run('"b" in object.items && object.items[0] != "b"', obj) is True


def test_a_non_boolean_result_is_an_error() -> None:
    with pytest.raises(CelEvalError):
        run("object.metadata", {"metadata": {}})


@pytest.mark.parametrize("source", ["object.metadata.(", "size(object) > 0", "a + b", "", "has(a)"])
def test_what_the_subset_does_not_cover_does_not_compile(source: str) -> None:
    with pytest.raises(CelSyntaxError):
        compile_expression(source)
