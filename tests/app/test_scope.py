from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.model.crd import LabelSelector, NamespaceSelector, Scope
from app.store.scope import (
    DEFAULT_WORKLOAD_TYPES,
    container_in_scope,
    match_label_selector,
    match_namespace,
    scope_matches,
)


def selector(**data: Any) -> LabelSelector:
    return LabelSelector.model_validate(data)


def ns(operator: str, *values: str) -> NamespaceSelector:
    return NamespaceSelector.model_validate({"operator": operator, "values": list(values)})


LABELS = {"app": "web", "tier": "frontend", "env": "prod"}


def test_default_workload_types() -> None:
    assert DEFAULT_WORKLOAD_TYPES == (
        "Deployment",
        "StatefulSet",
        "CronJob",
        "Rollout",
        "Job",
        "AnalysisRun",
        "DaemonSet",
        "Model",
    )
    assert tuple(Scope().workload_types) == DEFAULT_WORKLOAD_TYPES


def test_none_and_empty_selector_match_everything() -> None:
    assert match_label_selector(None, {})
    assert match_label_selector(None, LABELS)
    assert match_label_selector(selector(), {})
    assert match_label_selector(selector(), LABELS)


def test_match_labels() -> None:
    assert match_label_selector(selector(matchLabels={"app": "web"}), LABELS)
    assert match_label_selector(selector(matchLabels={"app": "web", "env": "prod"}), LABELS)
    assert not match_label_selector(selector(matchLabels={"app": "api"}), LABELS)
    assert not match_label_selector(selector(matchLabels={"missing": "x"}), LABELS)
    assert not match_label_selector(selector(matchLabels={"app": "web"}), {})


@pytest.mark.parametrize(
    ("key", "operator", "values", "expected"),
    [
        ("app", "In", ["web", "api"], True),
        ("app", "In", ["api"], False),
        ("missing", "In", ["web"], False),
        ("app", "NotIn", ["api"], True),
        ("app", "NotIn", ["web"], False),
        ("missing", "NotIn", ["web"], True),  # NotIn holds when the key is absent
        ("app", "Exists", [], True),
        ("missing", "Exists", [], False),
        ("app", "DoesNotExist", [], False),
        ("missing", "DoesNotExist", [], True),
    ],
)
def test_each_operator(key: str, operator: str, values: list[str], expected: bool) -> None:
    expr = {"key": key, "operator": operator, "values": values}
    assert match_label_selector(selector(matchExpressions=[expr]), LABELS) is expected


def test_all_requirements_must_hold() -> None:
    sel = selector(
        matchLabels={"app": "web"},
        matchExpressions=[
            {"key": "tier", "operator": "In", "values": ["frontend"]},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    )
    assert match_label_selector(sel, LABELS)
    assert not match_label_selector(sel, {**LABELS, "canary": "true"})
    assert not match_label_selector(sel, {**LABELS, "tier": "backend"})
    assert not match_label_selector(sel, {**LABELS, "app": "api"})


def test_label_matching_is_case_sensitive() -> None:
    assert not match_label_selector(selector(matchLabels={"app": "Web"}), LABELS)


@pytest.mark.parametrize(
    ("selector_", "namespace", "expected"),
    [
        (None, "anything", True),
        (ns("In", "prod"), "prod", True),
        (ns("In", "prod"), "prod-eu", False),
        (ns("In", "prod-*"), "prod-eu", True),
        (ns("In", "prod-*"), "prod-", True),
        (ns("In", "prod-*"), "prod", False),
        (ns("In", "prod-*"), "staging-prod-eu", False),
        (ns("In", "*-prod"), "eu-prod", True),
        (ns("In", "*"), "default", True),
        (ns("In", "a*b*c"), "axxbyyc", True),
        (ns("In", "a*b*c"), "axxcyyb", False),
        (ns("In", "dev", "prod-*"), "dev", True),
        (ns("In", "dev", "prod-*"), "prod-us", True),
        (ns("In", "dev", "prod-*"), "qa", False),
        (ns("In", "Prod-*"), "prod-eu", False),  # case-sensitive
        (ns("In", "prod-?"), "prod-a", False),  # only * is a glob
        (ns("In", "prod-?"), "prod-?", True),
        (ns("In", "team.[ab]"), "team.a", False),
        (ns("In", "team.*"), "teamxa", False),  # "." is literal
        (ns("NotIn", "kube-*"), "kube-system", False),
        (ns("NotIn", "kube-*"), "default", True),
        (ns("NotIn", "kube-*", "istio-system"), "istio-system", False),
        (ns("NotIn", "*"), "default", False),
    ],
)
def test_match_namespace(
    selector_: NamespaceSelector | None, namespace: str, expected: bool
) -> None:
    assert match_namespace(selector_, namespace) is expected


def test_scope_matches_defaults() -> None:
    scope = Scope()
    for kind in DEFAULT_WORKLOAD_TYPES:
        assert scope_matches(scope, namespace="a", workload_kind=kind, workload_labels={})
    assert not scope_matches(
        scope, namespace="a", workload_kind="StrimziPodSet", workload_labels={}
    )
    assert not scope_matches(scope, namespace="a", workload_kind="ReplicaSet", workload_labels={})


def test_scope_matches_combines_all_parts() -> None:
    scope = Scope.model_validate(
        {
            "workloadTypes": ["Deployment", "StrimziPodSet"],
            "labelSelector": {"matchLabels": {"app": "web"}},
            "namespaceSelector": {"operator": "In", "values": ["prod-*"]},
        }
    )
    ok = {"namespace": "prod-eu", "workload_kind": "Deployment", "workload_labels": LABELS}
    assert scope_matches(scope, **ok)
    assert scope_matches(scope, **{**ok, "workload_kind": "StrimziPodSet"})
    assert not scope_matches(scope, **{**ok, "workload_kind": "StatefulSet"})
    assert not scope_matches(scope, **{**ok, "namespace": "dev"})
    assert not scope_matches(scope, **{**ok, "workload_labels": {"app": "api"}})


def test_container_in_scope() -> None:
    assert container_in_scope(Scope(), "anything")
    listed = Scope.model_validate({"containers": ["app", "sidecar"]})
    assert container_in_scope(listed, "app")
    assert container_in_scope(listed, "sidecar")
    assert not container_in_scope(listed, "istio-proxy")
    assert not container_in_scope(listed, "App")
    assert not container_in_scope(Scope.model_validate({"containers": []}), "app")


_KEYS = st.sampled_from(["app", "tier", "env", "team", "a.b/c"])
_VALUES = st.sampled_from(["", "web", "api", "prod", "x"])
_LABELS = st.dictionaries(_KEYS, _VALUES, max_size=5)


@given(_LABELS, _LABELS)
def test_match_labels_is_subset(wanted: dict[str, str], labels: dict[str, str]) -> None:
    expected = wanted.items() <= labels.items()
    assert match_label_selector(selector(matchLabels=wanted), labels) is expected


@given(_KEYS, st.lists(_VALUES, min_size=1, max_size=3), _LABELS)
def test_in_and_not_in_are_complements_when_key_present(
    key: str, values: list[str], labels: dict[str, str]
) -> None:
    def run(op: str) -> bool:
        return match_label_selector(
            selector(matchExpressions=[{"key": key, "operator": op, "values": values}]), labels
        )

    if key in labels:
        assert run("In") is not run("NotIn")
    else:
        assert not run("In")
        assert run("NotIn")


@given(
    st.lists(st.sampled_from(["prod-*", "dev", "*-eu", "kube-*"]), min_size=1, max_size=4),
    st.sampled_from(["prod-eu", "dev", "kube-system", "staging", "dev-eu"]),
)
def test_in_and_not_in_namespaces_are_complements(patterns: list[str], namespace: str) -> None:
    assert match_namespace(ns("In", *patterns), namespace) is not match_namespace(
        ns("NotIn", *patterns), namespace
    )
