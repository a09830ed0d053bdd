"""`DecisionCaches`: one test per invariant of its docstring (what each cache keys on and
what drops each entry), first on the object alone, then through the view's changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from app.decide import read_pod_facts
from app.model.owners import WorkloadRef
from app.policy.plans import guardrails, plan_for, protected_by_pattern
from app.store import decision_cache
from app.store.decision_cache import ADMISSIONS, NEVER, DecisionCaches
from app.store.inputs import admission_versions
from tests.app import builders as b

WEB = ("Deployment", "shop", "web")
API = ("Deployment", "shop", "api")


@dataclass
class FakePlan:
    memo: dict[Any, Any] = field(default_factory=dict)
    selections: dict[Any, Any] = field(default_factory=dict)


def filled(plan: FakePlan) -> FakePlan:
    plan.memo["facts"] = "derived"
    plan.selections[("app",)] = "selected"
    return plan


def emptied(plan: FakePlan) -> bool:
    return not plan.memo and not plan.selections


# ------------------------------------------------------------------ plans


def test_a_plan_is_kept_by_its_workload_until_dropped() -> None:
    caches: DecisionCaches[FakePlan] = DecisionCaches()
    web, api = filled(FakePlan()), filled(FakePlan())
    caches.keep_plan(WEB, web)
    caches.keep_plan(API, api)
    assert caches.plan(WEB) is web and caches.owns(WEB, web) and not caches.owns(API, web)
    caches.drop_plan(WEB)
    assert caches.plan(WEB) is None and emptied(web)
    assert caches.plan(API) is api and not emptied(api)


def test_dropping_every_plan_empties_them_all_and_the_memo() -> None:
    caches: DecisionCaches[FakePlan] = DecisionCaches()
    web, api = FakePlan(), FakePlan()
    caches.keep_plan(WEB, web)
    caches.keep_plan(API, api)
    caches.remember(WEB, web, "template", "answer")
    caches.drop_plans()
    assert caches.plan(WEB) is None and caches.plan(API) is None
    assert emptied(web) and emptied(api)
    assert caches.recall(web, "template") is None


def test_a_replaced_plan_loses_its_caches() -> None:
    caches: DecisionCaches[FakePlan] = DecisionCaches()
    old, new = filled(FakePlan()), FakePlan()
    caches.keep_plan(WEB, old)
    caches.keep_plan(WEB, new)
    assert caches.plan(WEB) is new and emptied(old)


# ------------------------------------------------------------------ plan caches


def test_plans_past_the_bound_keep_the_plan_and_lose_their_caches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(decision_cache, "MAX_CACHED_PLANS", 2)
    caches: DecisionCaches[FakePlan] = DecisionCaches()
    plans = {key: filled(FakePlan()) for key in (WEB, API)}
    for key, plan in plans.items():
        caches.keep_plan(key, plan)
    caches.use_plan(WEB, plans[WEB])  # most recently used: API is the oldest now
    third = ("Deployment", "shop", "db")
    caches.keep_plan(third, filled(FakePlan()))
    assert emptied(plans[API]) and not emptied(plans[WEB])
    assert caches.plan(API) is plans[API]  # emptied, not dropped


def test_a_set_bound_overrides_the_default() -> None:
    caches: DecisionCaches[FakePlan] = DecisionCaches(max_plans=1, max_parsed=1)
    first, second = filled(FakePlan()), filled(FakePlan())
    caches.keep_plan(WEB, first)
    caches.keep_plan(API, second)
    assert emptied(first) and not emptied(second)
    caches.keep_parsed(("shop", "a"), "a")
    caches.keep_parsed(("shop", "b"), "b")
    assert caches.parsed_keys() == [("shop", "b")]


# ------------------------------------------------------------------ admission memo


def test_the_memo_keeps_answers_of_kept_plans_only() -> None:
    caches: DecisionCaches[FakePlan] = DecisionCaches()
    kept, stand_in = FakePlan(), FakePlan()
    caches.keep_plan(WEB, kept)
    caches.remember(WEB, kept, "template", "answer")
    caches.remember(WEB, stand_in, "template", "answer")
    assert caches.recall(kept, "template") == "answer"
    assert caches.recall(stand_in, "template") is None and ADMISSIONS not in stand_in.memo


def test_the_memo_is_bounded_per_plan_and_overall(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decision_cache, "MEMO_PER_PLAN", 2)
    monkeypatch.setattr(decision_cache, "MEMO_TOTAL", 3)
    caches: DecisionCaches[FakePlan] = DecisionCaches()
    web, api = FakePlan(), FakePlan()
    caches.keep_plan(WEB, web)
    caches.keep_plan(API, api)
    for template in ("a", "b", "c"):
        caches.remember(WEB, web, template, template.upper())
    assert [caches.recall(web, t) for t in "abc"] == [None, "B", "C"]  # per plan
    caches.remember(API, api, "d", "D")
    caches.remember(API, api, "e", "E")
    # Five remembered, three kept in all: the oldest went first.
    assert [caches.recall(web, t) for t in "bc"] == [None, "C"]
    assert [caches.recall(api, t) for t in "de"] == ["D", "E"]
    caches.remember(API, api, "f", "F")
    assert caches.recall(web, "c") is None


def test_the_memo_goes_with_its_plan() -> None:
    caches: DecisionCaches[FakePlan] = DecisionCaches()
    web = FakePlan()
    caches.keep_plan(WEB, web)
    caches.remember(WEB, web, "template", "answer")
    caches.drop_plan(WEB)
    assert caches.recall(web, "template") is None


# ------------------------------------------------------------------ input stamps


def test_a_touched_input_never_repeats_a_version() -> None:
    caches: DecisionCaches[FakePlan] = DecisionCaches()
    key = ("oom", WEB)
    assert caches.stamp(key) is NEVER
    caches.touch(key)
    first = caches.stamp(key)
    caches.touch(("ns", "shop"))
    caches.forget_stamp(key)
    assert caches.stamp(key) is NEVER
    caches.touch(key)
    assert caches.stamp(key) is not NEVER and caches.stamp(key) is not first


# ------------------------------------------------------------------ parsed pods


def test_parsed_pods_are_bounded_and_dropped_with_their_pod(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(decision_cache, "MAX_PARSED_PODS", 2)
    caches: DecisionCaches[FakePlan] = DecisionCaches()
    for name in ("a", "b"):
        caches.keep_parsed(("shop", name), name)
    assert caches.parsed(("shop", "a")) == "a"  # now the most recently used
    caches.keep_parsed(("shop", "c"), "c")
    assert caches.parsed_keys() == [("shop", "a"), ("shop", "c")]
    caches.drop_parsed(("shop", "a"))
    assert caches.parsed(("shop", "a")) is None


# ------------------------------------------------------------------ through the view


def web_view() -> Any:
    return b.view(*b.base_objects(), b.static(), b.pod())


def web_plan(v: Any) -> Any:
    workload = v.workload(WorkloadRef(*WEB))
    return plan_for(v, workload)


def test_the_view_drops_a_workloads_plan_when_the_workload_changes() -> None:
    v = web_view()
    plan = web_plan(v)
    assert web_plan(v) is plan
    v.apply(b.deployment(annotations={"note": "changed"}))
    assert web_plan(v) is not plan


def test_the_view_drops_every_plan_when_a_policy_changes() -> None:
    v = web_view()
    plan = web_plan(v)
    v.apply(b.static(containers={"app": {"requests": {"cpu": "300m"}}}))
    assert web_plan(v) is not plan


def test_the_view_moves_the_admission_versions_when_the_namespace_or_an_hpa_changes() -> None:
    v = web_view()
    workload = v.workload(WorkloadRef(*WEB))
    before = admission_versions(v.caches, workload.ref)
    v.apply(b.namespace(annotations={"note": "changed"}))
    after_namespace = admission_versions(v.caches, workload.ref)
    v.apply(b.hpa())
    after_hpa = admission_versions(v.caches, workload.ref)
    assert before != after_namespace != after_hpa != before
    assert admission_versions(v.caches, workload.ref) == after_hpa


def test_the_view_drops_a_pods_parse_when_the_pod_changes() -> None:
    v = web_view()
    pod = v.get("Pod", b.NS, "web-7d4b9-aaaaa")
    read_pod_facts(v, pod)
    assert v.caches.parsed_keys() == [(b.NS, "web-7d4b9-aaaaa")]
    v.apply(b.pod(phase="Pending"))
    assert v.caches.parsed_keys() == []


# ------------------------------------------------------------------ kerf settings


def test_kerf_settings_are_kept_until_dropped() -> None:
    caches: DecisionCaches[FakePlan] = DecisionCaches()
    caches.keep_setting(("protected", "shop"), False)
    assert caches.setting(("protected", "shop")) is False
    caches.drop_settings()
    assert caches.setting(("protected", "shop")) is None


def test_the_view_drops_the_kerf_settings_when_a_kerf_object_changes_not_a_record() -> None:
    v = web_view()
    protected_by_pattern(v, next(iter(v.workloads())))
    guardrails(v, None)
    v.apply(b.recommendation())
    assert v.caches.setting(("protected", b.NS)) is not None
    assert v.caches.setting(("guardrails", None)) is not None
    v.apply(b.global_config(protectedNamespacePatterns=["sh*"]))
    assert v.caches.setting(("protected", b.NS)) is None
    assert v.caches.setting(("guardrails", None)) is None
    assert protected_by_pattern(v, next(iter(v.workloads())))
