"""The admission memo: a decision made for one pod of a template serves the next ones
only while a fresh decision would be the same (app/admission.py, app/view.py)."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

import pytest

import app.view
from app.admission import AdmissionResult, admit_pod
from app.annotations import PAUSE_UNTIL, SKIP_CONTAINERS
from app.quantities import QuantityError
from app.view import ClusterView
from tests.app import builders as b

NOW = b.NOW
TWO = {"app": b.APP_RES, "side": b.APP_RES}


def new_pod(name: str = "web-7d4b9-aaaaa", **kw: Any) -> dict[str, Any]:
    """A pod as its ReplicaSet sends it for admission (no status yet)."""
    return b.pod(name, phase="Pending", **kw)


def both(v: ClusterView, pod: dict[str, Any], now: datetime = NOW) -> AdmissionResult:
    """The memoised answer, checked against a fresh decision over the same view."""
    memoised = admit_pod(v, pod, b.NS, now)
    fresh = admit_pod(v, copy.deepcopy(pod), b.NS, now, memo=False)
    assert memoised == fresh
    return memoised


def warm(v: ClusterView, now: datetime = NOW, **kw: Any) -> AdmissionResult:
    """Decide one pod of the template, then check that the next one is a memo hit."""
    first = both(v, new_pod("web-7d4b9-first", **kw), now)
    hits = v.memo_hits
    assert both(v, new_pod("web-7d4b9-second", **kw), now) == first
    assert v.memo_hits == hits + 1
    return first


def static_view(*extra: Any, **base: Any) -> ClusterView:
    return b.view(*b.base_objects(**base), b.static(), *extra)


# ------------------------------------------------------------------ hits


def test_pods_of_one_template_share_one_decision() -> None:
    v = static_view()
    first = warm(v)
    assert first.outcome == "apply"
    # Name, uid and labels differ between pods of a template: still the same decision.
    other = new_pod("web-7d4b9-third", labels={"statefulset.kubernetes.io/pod-name": "x"})
    other["metadata"]["uid"] = "another-uid"
    hits = v.memo_hits
    assert both(v, other) == first
    assert v.memo_hits == hits + 1


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(
            lambda p: p["spec"]["containers"][0]["resources"]["requests"].update(cpu="300m"),
            id="request",
        ),
        pytest.param(lambda p: p["spec"]["containers"][0].update(args=["-Xmx2g"]), id="args"),
        pytest.param(
            lambda p: p["metadata"]["annotations"].update({SKIP_CONTAINERS: "app"}), id="skip"
        ),
        pytest.param(
            lambda p: p["metadata"]["annotations"].update({PAUSE_UNTIL: "infinite"}), id="pause"
        ),
        pytest.param(lambda p: p["metadata"].update(namespace="other"), id="namespace"),
    ],
)
def test_what_the_decision_reads_of_the_pod_is_in_the_key(change: Any) -> None:
    v = static_view()
    warm(v)
    p = new_pod("web-7d4b9-changed")
    change(p)
    hits = v.memo_hits
    both(v, p)
    assert v.memo_hits == hits


def test_a_workload_the_view_does_not_hold_is_never_memoised() -> None:
    v = b.view(b.namespace(), b.strategy(), b.static())  # no Deployment: a stand-in
    both(v, new_pod())
    both(v, new_pod("web-7d4b9-other"))
    assert v.memo_hits == 0


def test_a_failing_decision_is_not_memoised() -> None:
    v = static_view()
    bad = new_pod()
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    for _ in range(2):
        with pytest.raises(QuantityError):
            admit_pod(v, copy.deepcopy(bad), b.NS, NOW)
    assert v.memo_hits == 0


# ------------------------------------------------------------------ invalidation


def test_a_plan_change_ends_the_memo() -> None:
    v = static_view()
    assert warm(v).resources["app"]["requests"]["cpu"] == "250m"
    v.apply(b.static(containers={"app": {"requests": {"cpu": "300m"}}}))
    assert both(v, new_pod("web-7d4b9-later")).resources["app"]["requests"]["cpu"] == "300m"


def test_a_workload_change_ends_the_memo() -> None:
    v = static_view()
    warm(v)
    v.apply(b.deployment(annotations={PAUSE_UNTIL: "infinite"}))
    assert both(v, new_pod("web-7d4b9-later")).reason == "Paused"


def test_a_namespace_change_ends_the_memo() -> None:
    v = static_view()
    warm(v)
    v.apply(b.namespace(annotations={PAUSE_UNTIL: "infinite"}))
    assert both(v, new_pod("web-7d4b9-later")).reason == "Paused"
    v.delete("Namespace", "", b.NS)
    assert both(v, new_pod("web-7d4b9-last")).outcome == "apply"


def test_an_hpa_change_ends_the_memo() -> None:
    v = static_view()
    assert "cpu" in warm(v).resources["app"]["requests"]
    v.apply(b.hpa(resource="cpu"))
    coupled = both(v, new_pod("web-7d4b9-later"))
    assert coupled.resources["app"]["requests"]["cpu"] == "400m"  # HPACoupled: cpu left
    v.delete("HorizontalPodAutoscaler", b.NS, "web-hpa")
    assert both(v, new_pod("web-7d4b9-last")).resources["app"]["requests"]["cpu"] == "250m"


def test_oom_evidence_among_the_workloads_pods_ends_the_memo() -> None:
    v = static_view()
    assert warm(v).resources["app"]["requests"]["memory"] == "256Mi"
    v.apply(b.pod("web-7d4b9-old", statuses=[b.oom_status()]))
    refused = both(v, new_pod("web-7d4b9-later"))
    assert refused.resources["app"]["requests"]["memory"] == "512Mi"  # OOMKilled: kept
    v.delete("Pod", b.NS, "web-7d4b9-old")
    assert both(v, new_pod("web-7d4b9-last")).resources["app"]["requests"]["memory"] == "256Mi"


def test_a_pod_without_oom_evidence_keeps_the_memo() -> None:
    v = static_view()
    warm(v)
    v.apply(b.pod("web-7d4b9-running"))
    hits = v.memo_hits
    both(v, new_pod("web-7d4b9-later"))
    assert v.memo_hits == hits + 1


def test_an_unreachable_source_ends_the_memo() -> None:
    v = b.view(*b.base_objects(), b.proactive(), b.configmap(b.row()))
    assert warm(v).outcome == "apply"
    b.break_recommendations(v)
    assert both(v, new_pod("web-7d4b9-later")).reason == "HubUnreachable"


@pytest.mark.parametrize("where", ["pod", "workload", "namespace"])
def test_a_pause_ends_at_its_time(where: str) -> None:
    until = NOW + timedelta(hours=1)
    mark = {PAUSE_UNTIL: b.ts(until)}
    v = static_view(
        workload_annotations=mark if where == "workload" else None,
        ns_annotations=mark if where == "namespace" else None,
    )
    pod_kw: dict[str, Any] = {"annotations": mark} if where == "pod" else {}
    assert warm(v, **pod_kw).reason == "Paused"
    assert both(v, new_pod("web-7d4b9-a", **pod_kw), until - timedelta(microseconds=1)).reason == (
        "Paused"
    )
    assert both(v, new_pod("web-7d4b9-b", **pod_kw), until).outcome == "apply"


def test_a_past_pause_is_not_valid_before_it() -> None:
    until = NOW - timedelta(hours=1)
    pod_kw: dict[str, Any] = {"annotations": {PAUSE_UNTIL: b.ts(until)}}
    v = static_view()
    assert warm(v, **pod_kw).outcome == "apply"
    # A clock that goes back (another replica's, a test's) gets a fresh decision.
    assert both(v, new_pod("web-7d4b9-a", **pod_kw), until - timedelta(minutes=1)).reason == (
        "Paused"
    )


def test_a_recommendation_grows_stale_at_its_time() -> None:
    analyzed = NOW - timedelta(days=4)
    v = b.view(*b.base_objects(), b.proactive(), b.configmap(b.row(analyzed_at=analyzed)))
    assert warm(v).outcome == "apply"
    limit = analyzed + timedelta(days=5)  # maxAnalysisAgeDays 5: stale once strictly older
    assert both(v, new_pod("web-7d4b9-a"), limit).outcome == "apply"
    assert both(v, new_pod("web-7d4b9-b"), limit + timedelta(microseconds=1)).reason == (
        "StaleRecommendation"
    )


# ------------------------------------------------------------------ bounds


def test_the_memo_is_bounded_per_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    v = static_view()
    for cpu in range(1, 3 * app.view.MEMO_PER_PLAN):
        p = new_pod()
        p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{cpu}m"
        both(v, p)
    plan = v.plan_for(v.workload(v.pod_owner(new_pod())))  # type: ignore[arg-type]
    assert len(plan.memo["admissions"]) == app.view.MEMO_PER_PLAN


def test_the_memo_is_bounded_overall(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.view, "MEMO_TOTAL", 5)
    names = [f"w{i}" for i in range(8)]
    v = b.view(
        b.namespace(),
        b.strategy(),
        *(b.deployment(n) for n in names),
        b.static(),
    )
    for n in names:
        for cpu in (100, 200):
            p = new_pod(f"{n}-7d4b9-x", workload=n)
            p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{cpu}m"
            both(v, p)
    kept = sum(
        len(v.plan_for(v.workload(v.pod_owner(new_pod(workload=n)))).memo.get("admissions", {}))  # type: ignore[arg-type]
        for n in names
    )
    assert kept == 5
