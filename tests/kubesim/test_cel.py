"""kubesim's CEL subset for webhook matchConditions."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.cel import (
    CelEvalError,
    CelSyntaxError,
    compile_expression,
    evaluate_condition,
    evaluate_rule,
)

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


@pytest.mark.parametrize(
    "source",
    [
        "object.metadata.(",
        "a + b",
        "",
        "has(a)",
        "foo(object)",
        "object.exists(x, x)",
        "a.all(1, a)",
    ],
)
def test_what_the_subset_does_not_cover_does_not_compile(source: str) -> None:
    with pytest.raises(CelSyntaxError):
        compile_expression(source)


def rule(expression: str, value: Any) -> bool:
    return evaluate_rule(compile_expression(expression), value)


def test_all_ranges_over_map_keys_and_list_items() -> None:
    assert rule("self.all(k, self[k] > 1)", {"a": 2, "b": 3}) is True
    assert rule("self.all(k, self[k] > 1)", {"a": 2, "b": 1}) is False
    assert rule("self.all(x, x in ['a', 'b'])", ["a", "b"]) is True
    assert rule("self.all(x, x != 'b')", ["a", "b"]) is False


def test_all_is_decided_by_a_false_item_despite_an_error_in_another() -> None:
    assert rule("self.all(x, x.n == 1)", [{}, {"n": 2}]) is False
    with pytest.raises(CelEvalError, match="no such key: n"):
        rule("self.all(x, x.n == 1)", [{}, {"n": 1}])


def test_has_after_an_index() -> None:
    assert rule("has(self.m['a'].f)", {"m": {"a": {"f": 1}}}) is True
    assert rule("has(self.m['a'].f)", {"m": {"a": {}}}) is False


def test_quantities_compare_by_value_whatever_their_suffix() -> None:
    compare = "quantity(string(self.a)).compareTo(quantity(string(self.b)))"
    assert rule(f"{compare} == 0", {"a": "1Gi", "b": "1024Mi"}) is True
    assert rule(f"{compare} < 0", {"a": "999m", "b": 1}) is True
    assert rule(f"{compare} > 0", {"a": "1.5", "b": "1500m"}) is False
    with pytest.raises(CelEvalError, match="quantities must match"):
        rule(f"{compare} == 0", {"a": "lots", "b": "1"})


def test_string_size_and_orderings() -> None:
    assert rule("string(self.a) == '2' && string(self.b) == 'x'", {"a": 2, "b": "x"}) is True
    assert rule("size(self.a) == 2 && size(self.b) == 1", {"a": "ab", "b": [1]}) is True
    assert rule("self.a <= 2 && self.a >= 2 && 'a' < 'b'", {"a": 2}) is True
    with pytest.raises(CelEvalError, match="no such overload"):
        rule("self.a < 1", {"a": "x"})


def test_a_bool_never_equals_a_number() -> None:
    assert rule("self.a == 1", {"a": True}) is False


@pytest.mark.parametrize(
    ("text", "positive"),
    [("1h30m", True), ("0.5s", True), ("90ms", True), ("0s", False), ("0", False), ("-1m", False)],
)
def test_durations(text: str, positive: bool) -> None:
    assert rule("duration(self) > duration('0s')", text) is positive


def test_an_invalid_duration_is_an_error() -> None:
    with pytest.raises(CelEvalError, match='time: invalid duration "1x"'):
        rule("duration(self) > duration('0s')", "1x")
