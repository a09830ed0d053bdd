"""What decisions keep between pods (per plan, per pod, per node, per namespace) follows
the view: each test decides once, so the caches are filled, then changes one input and
decides again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from app.model.annotations import PAUSE_UNTIL
from app.model.owners import WorkloadRef
from app.model.workloads import Workload
from app.policy.plans import MAX_NAME_SETS, plan_for, policies_for, protected_by_pattern
from app.store import decision_cache
from tests.app import builders as b

NOW = b.NOW


def proactive_objects(*rows: dict[str, Any], **base: Any) -> list[Any]:
    return [*b.base_objects(**base), b.proactive(), b.configmap(*(rows or (b.row(),)))]


def static_objects(values: dict | None = None, **base: Any) -> list[Any]:
    """A StaticPolicy publishing `values` (by container) and the base objects."""
    return [*b.base_objects(**base), b.static(containers=values)]


def outcome(v: Any, pod: Any = None, path: str = "running", **kw: Any) -> tuple[str, str | None]:
    d = b.decide(v, pod or b.pod(), path, **kw)
    return (d.outcome, d.reason)


# ------------------------------------------------------------------ the workload plan


def test_a_recommendation_record_arriving_or_going_changes_the_cooldown() -> None:
    v = b.view(*static_objects())
    assert outcome(v) == ("apply", None)
    v.apply(b.recommendation(applied_at=NOW - timedelta(hours=1)))
    assert outcome(v) == ("blocked", "Cooldown")
    v.delete("RightsizingRecommendation", b.NS, "deployment-web")
    assert outcome(v) == ("apply", None)


def test_a_rollback_recorded_later_refuses_that_resource() -> None:
    v = b.view(*static_objects({"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}}))
    assert b.reasons(b.decide(v, b.pod())) == {}
    v.apply(
        b.recommendation(
            applied_at=NOW - timedelta(days=5),
            rollback_at=NOW - timedelta(hours=2),
            rollback_resources=["cpu"],
        )
    )
    assert b.reasons(b.decide(v, b.pod())) == {"app.requests.cpu": "Cooldown"}


def test_new_rows_change_throttling_staleness_learning_and_confidence() -> None:
    v = b.view(*proactive_objects())
    assert outcome(v) == ("apply", None)
    v.apply(b.configmap(b.row(throttling=0.3)))
    assert b.reasons(b.decide(v, b.pod())) == {"app.requests.cpu": "Throttled"}
    v.apply(b.configmap(b.row(analyzed_at=NOW - timedelta(days=6))))
    assert outcome(v) == ("blocked", "StaleRecommendation")
    v.apply(b.configmap(b.row(coverage_hours=100)))
    assert outcome(v) == ("blocked", "LearningPeriod")
    v.apply(b.configmap(b.row(confidence=0.5)))
    assert outcome(v) == ("blocked", "LowConfidence")
    v.apply(b.configmap(b.row()))
    assert outcome(v) == ("apply", None)


def test_a_policy_with_another_age_limit_or_guardrails_replaces_the_plan() -> None:
    v = b.view(*proactive_objects(b.row(analyzed_at=NOW - timedelta(days=6))))
    assert outcome(v) == ("blocked", "StaleRecommendation")
    v.apply(b.proactive(max_age_days=10))
    assert outcome(v) == ("apply", None)
    v.apply(b.proactive(max_age_days=10, guardrails={"learningPeriod": "500h"}))
    assert outcome(v) == ("blocked", "LearningPeriod")


def test_global_guardrail_defaults_reach_a_kept_plan() -> None:
    v = b.view(*proactive_objects())
    assert outcome(v) == ("apply", None)
    v.apply(b.global_config(guardrailDefaults={"minConfidence": "0.95"}))
    assert outcome(v) == ("blocked", "LowConfidence")


def test_a_changed_strategy_changes_windows_and_method() -> None:
    v = b.view(*static_objects())
    assert b.decide(v, b.pod()).method == "inPlace"
    v.apply(b.strategy(inPlaceResize={"enabled": False}))
    assert b.decide(v, b.pod()).method == "evict"
    v.apply(
        b.strategy(
            scheduling={"exclusionWindows": [{"name": "lunch", "start": "11:00", "end": "13:00"}]}
        )
    )
    assert outcome(v) == ("blocked", "FreezeWindow")
    v.delete("AutomationStrategy", b.NS, "default")
    assert outcome(v) == ("blocked", "StrategyNotFound")


def test_skip_containers_selects_another_kept_container_set() -> None:
    two = {"app": b.APP_RES, "side": b.APP_RES}
    v = b.view(*static_objects({"*": {"requests": {"cpu": "250m"}}}, containers=two))
    assert b.decide(v, b.pod(containers=two)).changed == ("app", "side")
    skipping = b.pod(containers=two, annotations={"rightsizing.kubex.ai/skip-containers": "side"})
    assert b.decide(v, skipping).changed == ("app",)
    assert b.decide(v, b.pod(containers=two)).changed == ("app", "side")


# ------------------------------------------------------------------ pods, nodes, namespaces


def test_a_replaced_pod_is_decided_from_its_new_resources() -> None:
    p = b.pod()
    v = b.view(*static_objects({"app": {"requests": {"cpu": "250m"}}}), p)
    assert b.decide(v, p).values["app"]["requests"]["cpu"] == "250m"
    resized = b.pod(containers={"app": {"requests": {"cpu": "255m"}, "limits": {}}})
    v.apply(resized)
    assert outcome(v, resized) == ("skipped", "NoSignificantChange")


def test_a_node_change_changes_the_room_for_an_increase() -> None:
    p = b.pod(node="node-a")
    v = b.view(*static_objects({"app": {"requests": {"cpu": "800m"}}}), b.node(cpu="4"), p)
    assert outcome(v, p) == ("apply", None)
    v.apply(b.node(cpu="1"))  # 900m usable, 400m used: +400m still fits
    assert outcome(v, p) == ("apply", None)
    v.apply(b.pod("web-7d4b9-other", node="node-a"))  # another 400m used: no room
    assert outcome(v, p) == ("blocked", "InsufficientNodeCapacity")
    v.delete("Pod", b.NS, "web-7d4b9-other")
    assert outcome(v, p) == ("apply", None)
    v.delete("Node", "", "node-a")  # an unknown node is not checked
    assert outcome(v, p) == ("apply", None)


def test_an_hpa_arriving_later_couples_its_resource() -> None:
    v = b.view(*static_objects())
    assert b.reasons(b.decide(v, b.pod())) == {}
    v.apply(b.hpa("web", "cpu"))
    assert b.reasons(b.decide(v, b.pod())) == {"app.requests.cpu": "HPACoupled"}


def test_namespace_pause_and_protection_follow_the_view() -> None:
    v = b.view(*static_objects())
    assert outcome(v) == ("apply", None)
    v.apply(b.namespace(annotations={PAUSE_UNTIL: "infinite"}))
    assert outcome(v) == ("blocked", "Paused")
    v.apply(b.namespace())
    assert outcome(v) == ("apply", None)
    v.apply(b.global_config(protectedNamespacePatterns=["sh*"]))
    assert outcome(v) == ("skipped", "ProtectedNamespace")
    v.delete("GlobalConfiguration", "", "global-config")
    assert outcome(v) == ("apply", None)


# ------------------------------------------------------------------ request-named keys


def test_pods_naming_many_container_sets_do_not_grow_the_plan() -> None:
    """Container names come from the pod (an admission request names them anything):
    the plan keeps selections and facts for a few name sets, and decides the rest the
    same way without keeping them."""
    v = b.view(*static_objects())
    first = b.decide(v, b.pod(), "admission")
    for index in range(200):
        names = {"app": b.APP_RES, f"sidecar-{index}": None}
        b.decide(v, b.pod(containers=names), "admission")
    plan = first.plan
    assert plan is not None
    assert len(plan.selections) <= MAX_NAME_SETS
    assert len([k for k in plan.memo if k[0] == "facts"]) <= MAX_NAME_SETS
    late = b.decide(v, b.pod(containers={"app": b.APP_RES, "sidecar-x": None}), "admission")
    assert (late.outcome, late.reason, late.values) == (first.outcome, first.reason, first.values)


def test_unknown_namespaces_are_not_kept() -> None:
    """A request names any namespace it likes: only namespaces of workloads the view
    holds key the per-namespace caches."""
    v = b.view(*static_objects())
    for index in range(100):
        stand_in = Workload.from_object(b.deployment(namespace=f"made-up-{index}"))
        protected_by_pattern(v, stand_in)
        policies_for(v, stand_in)
    for key in ("protected", "cluster-policies"):
        assert not any(v.caches.setting((key, f"made-up-{i}")) is not None for i in range(100))
    held = next(iter(v.workloads()))
    protected_by_pattern(v, held)
    policies_for(v, held)
    assert v.caches.setting(("protected", b.NS)) is not None
    assert v.caches.setting(("cluster-policies", b.NS)) is not None


# ------------------------------------------------------------------ what a change drops


def test_a_record_change_drops_only_its_workloads_plan() -> None:
    """A RightsizingRecommendation is read by the plan of the workload it is named after
    only: the reconciler writes one per change, and each write used to drop every plan."""
    other = b.deployment(name="api")
    v = b.view(*static_objects(), other)
    web = v.workload(WorkloadRef("Deployment", b.NS, "web"))
    api = v.workload(WorkloadRef("Deployment", b.NS, "api"))
    assert web is not None and api is not None
    web_plan, api_plan = plan_for(v, web), plan_for(v, api)
    v.apply(b.recommendation(applied_at=NOW - timedelta(hours=1)))  # deployment-web
    assert plan_for(v, api) is api_plan
    assert plan_for(v, web) is not web_plan
    assert outcome(v) == ("blocked", "Cooldown")
    web_plan = plan_for(v, web)
    v.delete("RightsizingRecommendation", b.NS, "deployment-web")
    assert plan_for(v, api) is api_plan and plan_for(v, web) is not web_plan
    v.apply(b.static(containers={"app": {"requests": {"cpu": "300m"}}}))  # a policy: all
    assert plan_for(v, api) is not api_plan


def test_only_the_most_recently_used_plans_keep_their_caches(monkeypatch: Any) -> None:
    """Past `MAX_CACHED_PLANS`, the least recently used plan's decision caches are emptied;
    the plan itself stays (the reconciler compares it by identity), and deciding with it
    again builds them anew, to the same decision."""
    monkeypatch.setattr(decision_cache, "MAX_CACHED_PLANS", 1)
    v = b.view(*static_objects(), b.deployment(name="api"))
    first = b.decide(v, b.pod())
    plan = first.plan
    assert plan is not None and plan.memo and plan.selections
    other = b.decide(v, b.pod("api-7d4b9-aaaaa", workload="api"))
    assert other.plan is not None and other.plan is not plan and other.plan.memo
    assert not plan.memo and not plan.selections  # emptied, not dropped
    again = b.decide(v, b.pod())
    assert again.plan is plan and plan.memo
    assert (again.outcome, again.reason, again.values) == (
        first.outcome,
        first.reason,
        first.values,
    )


def test_only_the_most_recently_decided_pods_keep_their_parsed_containers(
    monkeypatch: Any,
) -> None:
    """Finding a pod's owner parses nothing; deciding keeps the parsed containers of the
    last `MAX_PARSED_PODS` pods only, and a pod parsed again decides the same."""
    monkeypatch.setattr(decision_cache, "MAX_PARSED_PODS", 2)
    names = [f"web-7d4b9-{index}" for index in range(4)]
    v = b.view(*static_objects(), *(b.pod(name) for name in names))
    kept = [v.get("Pod", b.NS, name) for name in names]
    assert all(v.owner_of(pod) == WorkloadRef("Deployment", b.NS, "web") for pod in kept)
    assert not v.caches.parsed_keys()
    first = [b.decide(v, pod) for pod in kept]
    assert v.caches.parsed_keys() == [(b.NS, name) for name in names[-2:]]
    again = [b.decide(v, pod) for pod in kept]
    assert [(d.outcome, d.reason, d.values) for d in again] == [
        (d.outcome, d.reason, d.values) for d in first
    ]


def test_a_dropped_plan_keeps_no_caches() -> None:
    """A plan the view drops (its inputs changed) may still be held by a pass in flight or
    the reconciler's steady-pass bookkeeping: its caches are emptied, not left to hold
    ~4 KB each until that lets go."""
    v = b.view(*static_objects())
    plan = b.decide(v, b.pod()).plan
    assert plan is not None and plan.memo
    v.apply(b.recommendation(applied_at=NOW - timedelta(hours=1)))  # its record: this plan
    assert not plan.memo and not plan.selections
    plan = b.decide(v, b.pod()).plan
    assert plan is not None and plan.memo
    v.apply(b.static(containers={"app": {"requests": {"cpu": "300m"}}}))  # a policy: all
    assert not plan.memo and not plan.selections
