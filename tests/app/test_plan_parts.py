"""Plans of workloads whose policy syncs are equal share what derives from the sync
alone (app/policy/plans.py `_Parts`): one copy of the annotations, their policies and the
candidates, not one per workload."""

from __future__ import annotations

from app.model.owners import WorkloadRef
from app.model.workloads import Workload
from app.policy.plans import SHARED_PARTS, WorkloadPlan, plan_for
from app.store.view import ClusterView
from tests.app import builders as b

EVERY_DEPLOYMENT = {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}


def _plan(view: ClusterView, name: str) -> WorkloadPlan:
    workload = view.workload(WorkloadRef("Deployment", b.NS, name))
    assert isinstance(workload, Workload)
    return plan_for(view, workload)


def _view(*names: str, policies: int = 1) -> ClusterView:
    return b.view(
        b.namespace(),
        b.strategy(),
        *(b.deployment(n) for n in names),
        *(b.static(f"static-{i}", scope=EVERY_DEPLOYMENT) for i in range(policies)),
    )


def test_workloads_one_static_policy_matches_share_the_plans_parts() -> None:
    view = _view("web", "api")
    web, api = _plan(view, "web"), _plan(view, "api")
    assert web is not api  # each workload's plan is its own (its caches, its identity)
    assert web.sync is api.sync and web.candidates is api.candidates
    assert web.candidates and web.sync.annotations
    assert web.fingerprint == api.fingerprint and web.warnings is api.warnings


def test_shared_parts_equal_the_ones_a_plan_builds_alone() -> None:
    view = _view("web", "api")
    _plan(view, "web")
    shared = _plan(view, "api")
    alone = _plan(_view("api"), "api")
    assert shared.sync == alone.sync and shared.candidates == alone.candidates
    assert (shared.args, shared.fingerprint, shared.warnings) == (
        alone.args,
        alone.fingerprint,
        alone.warnings,
    )


def test_a_kerf_change_builds_new_parts() -> None:
    view = _view("web", "api")
    web = _plan(view, "web")
    view.apply(b.static("other", scope={"labelSelector": {"matchLabels": {"app": "none"}}}))
    api = _plan(view, "api")
    assert api.sync is not web.sync and api.sync == web.sync


def test_workloads_other_policies_match_share_nothing() -> None:
    view = b.view(
        b.namespace(),
        b.strategy(),
        b.deployment("web"),
        b.deployment("api"),
        b.static("for-web", scope={"labelSelector": {"matchLabels": {"app": "web"}}}),
        b.static(
            "for-api",
            {"app": {"requests": {"cpu": "300m", "memory": "256Mi"}}},
            scope={"labelSelector": {"matchLabels": {"app": "api"}}},
        ),
    )
    web, api = _plan(view, "web"), _plan(view, "api")
    assert web.sync is not api.sync and web.candidates != api.candidates


def test_the_parts_kept_are_bounded() -> None:
    names = [f"w{n}" for n in range(SHARED_PARTS + 1)]
    view = b.view(
        b.namespace(),
        b.strategy(),
        *(b.deployment(n) for n in names),
        *(
            b.static(
                f"for-{n}",
                {"app": {"requests": {"cpu": f"{100 + i}m"}}},
                scope={"labelSelector": {"matchLabels": {"app": n}}},
            )
            for i, n in enumerate(names)
        ),
    )
    first = _plan(view, names[0])
    for n in names[1:]:
        _plan(view, n)
    view.caches.drop_plan(("Deployment", b.NS, names[0]))
    assert _plan(view, names[0]).sync is not first.sync  # the oldest was let go


def test_values_from_recommendation_rows_are_not_kept_for_sharing() -> None:
    view = b.view(
        b.namespace(),
        b.strategy(),
        b.deployment("web"),
        b.deployment("api"),
        b.proactive(scope=EVERY_DEPLOYMENT),
        b.configmap(b.row(workload="web"), b.row(workload="api")),
    )
    web, api = _plan(view, "web"), _plan(view, "api")
    assert web.sync.annotations == api.sync.annotations  # equal rows: equal values
    assert web.sync is not api.sync  # each new version of the rows would make new parts
    assert view.caches.setting(("plan-parts",)) is None
