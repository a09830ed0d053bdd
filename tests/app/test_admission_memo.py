"""The admission memo: a decision made for one pod of a template serves the next ones
only while a fresh decision would be the same (app/decide/admission.py, app/store/view.py)."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import app.store.decision_cache
from app.decide.admission import AdmissionResult, admit_pod, memo_counts
from app.model.annotations import PAUSE_UNTIL, SKIP_CONTAINERS
from app.model.quantities import QuantityError
from app.policy.plans import plan_for
from app.store.view import ClusterView
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
    """Decide two pods of the template (a template is memoised from its second pod on),
    then check that the third is a memo hit."""
    first = both(v, new_pod("web-7d4b9-first", **kw), now)
    assert both(v, new_pod("web-7d4b9-second", **kw), now) == first
    hits = memo_counts(v)[0]
    assert both(v, new_pod("web-7d4b9-third", **kw), now) == first
    assert memo_counts(v)[0] == hits + 1
    return first


def static_view(*extra: Any, **base: Any) -> ClusterView:
    return b.view(*b.base_objects(**base), b.static(), *extra)


# ------------------------------------------------------------------ hits


def test_pods_of_one_template_share_one_decision() -> None:
    v = static_view()
    first = warm(v)
    assert first.outcome == "apply"
    # Name, uid and labels differ between pods of a template: still the same decision.
    other = new_pod("web-7d4b9-fourth", labels={"statefulset.kubernetes.io/pod-name": "x"})
    other["metadata"]["uid"] = "another-uid"
    hits = memo_counts(v)[0]
    assert both(v, other) == first
    assert memo_counts(v)[0] == hits + 1


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
    hits = memo_counts(v)[0]
    both(v, p)
    assert memo_counts(v)[0] == hits


def test_a_workload_the_view_does_not_hold_is_never_memoised() -> None:
    v = b.view(b.namespace(), b.strategy(), b.static())  # no Deployment: a stand-in
    both(v, new_pod())
    both(v, new_pod("web-7d4b9-other"))
    assert memo_counts(v)[0] == 0


def test_a_failing_decision_is_not_memoised() -> None:
    v = static_view()
    bad = new_pod()
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    for _ in range(2):
        with pytest.raises(QuantityError):
            admit_pod(v, copy.deepcopy(bad), b.NS, NOW)
    assert memo_counts(v)[0] == 0


# ------------------------------------------------------------------ invalidation


def test_a_plan_change_ends_the_memo() -> None:
    v = static_view()
    assert warm(v).resources["app"]["requests"]["cpu"] == "250m"
    v.apply(b.static(containers={"app": {"requests": {"cpu": "260m"}}}))
    assert both(v, new_pod("web-7d4b9-later")).resources["app"]["requests"]["cpu"] == "260m"


def test_a_record_change_ends_the_memo() -> None:
    v = static_view()
    assert warm(v).resources["app"]["requests"]["cpu"] == "250m"
    # A new pod's baseline is the last applied value: 260m is within the tolerance of 250m.
    v.apply(b.recommendation(last_applied={"app": {"requests": {"cpu": "260m"}}}))
    assert both(v, new_pod("web-7d4b9-later")).resources["app"]["requests"]["cpu"] == "260m"


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
    v = static_view(b.pod("web-7d4b9-healthy"))
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
    hits = memo_counts(v)[0]
    both(v, new_pod("web-7d4b9-later"))
    assert memo_counts(v)[0] == hits + 1


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


def test_the_memo_is_bounded_per_plan() -> None:
    v = static_view()
    for cpu in range(1, 3 * app.store.decision_cache.MEMO_PER_PLAN):
        p = new_pod()
        p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{cpu}m"
        both(v, p)
        both(v, copy.deepcopy(p))
    plan = plan_for(v, v.workload(v.owner_of(new_pod())))  # type: ignore[arg-type]
    assert len(plan.memo["admissions"]) == app.store.decision_cache.MEMO_PER_PLAN


def test_the_memo_is_bounded_overall(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.store.decision_cache, "MEMO_TOTAL", 5)
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
            both(v, copy.deepcopy(p))
    kept = sum(
        len(plan_for(v, v.workload(v.owner_of(new_pod(workload=n)))).memo.get("admissions", {}))  # type: ignore[arg-type]
        for n in names
    )
    assert kept == 5


def test_a_template_is_memoised_from_its_second_pod_on() -> None:
    v = static_view()
    plan = plan_for(v, v.workload(v.owner_of(new_pod())))  # type: ignore[arg-type]
    first = both(v, new_pod("web-7d4b9-first"))
    assert first.template is None
    assert not plan.memo.get("admissions")
    second = both(v, new_pod("web-7d4b9-second"))
    assert second.template is not None
    assert len(plan.memo["admissions"]) == 1
    assert (memo_counts(v)[0], memo_counts(v)[1]) == (0, 2)
    assert both(v, new_pod("web-7d4b9-third")) is second
    assert (memo_counts(v)[0], memo_counts(v)[1]) == (1, 2)


def test_a_sighting_is_forgotten_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.store.decision_cache, "MAX_SIGHTINGS", 2)
    v = static_view()
    pods = []
    for cpu in (100, 200, 300):
        p = new_pod()
        p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{cpu}m"
        pods.append(p)
        both(v, p)
    # The first template's sighting went out of the bound: its second pod is a first.
    assert both(v, copy.deepcopy(pods[0])).template is None
    # The third's is still there: its second pod is memoised.
    assert both(v, copy.deepcopy(pods[2])).template is not None


def test_an_answer_no_longer_valid_is_memoised_again_at_once() -> None:
    v = static_view()
    warm(v)
    v.apply(b.namespace(annotations={"kubex.ai/note": "changed"}))
    misses = memo_counts(v)[1]
    again = both(v, new_pod("web-7d4b9-after"))
    assert again.template is not None
    assert memo_counts(v)[1] == misses + 1
    hits = memo_counts(v)[0]
    assert both(v, new_pod("web-7d4b9-next")) is again
    assert memo_counts(v)[0] == hits + 1


# ------------------------------------------------------------------ property

#: decision times on a grid, with the instants either side of each point: pauses end and
#: recommendations grow stale exactly on it
_TICK = timedelta(microseconds=1)
GRID = [NOW + timedelta(minutes=30 * k) for k in range(-3, 4)]
TIMES = [t + d for t in GRID for d in (-_TICK, timedelta(0), _TICK)]
#: mostly none: a pause decides before most other checks
PAUSES = st.sampled_from([None] * 10 + ["infinite", *(b.ts(t) for t in GRID[::2])])
QUANTITY = {"cpu": ["100m", "250m", "400m", "1"], "memory": ["128Mi", "256Mi", "512Mi"]}


@st.composite
def templates(draw: st.DrawFn) -> dict[str, Any]:
    """A pod template: what differs between templates is what the decision reads."""
    containers = draw(st.sampled_from([{"app": None}, {"app": None, "side": None}]))
    resources = {
        c: {
            "requests": {r: draw(st.sampled_from(q)) for r, q in QUANTITY.items()},
            "limits": {"memory": "1Gi"},
        }
        for c in containers
    }
    annotations: dict[str, str] = {}
    if (pause := draw(PAUSES)) is not None:
        annotations[PAUSE_UNTIL] = pause
    if draw(st.booleans()):
        annotations[SKIP_CONTAINERS] = "side"
    return {"containers": resources, "annotations": annotations}


def _static(cpu: str) -> Any:
    return b.static(
        containers={"*": {"requests": {"cpu": cpu, "memory": "256Mi"}}},
        guardrails={"maxChangePercent": 100},
    )


#: view changes a step may make, each an input of the decision
CHANGES = [
    "namespace_pause",
    "namespace_gone",
    "workload_pause",
    "hpa_on",
    "hpa_off",
    "oom_pod",
    "oom_pod_gone",
    "healthy_pod",
    "policy",
    "source_broken",
    "source_fixed",
    "last_applied",
]


def _change(v: ClusterView, change: str, draw: st.DrawFn, rows: list[dict[str, Any]]) -> None:
    if change == "namespace_pause":
        pause = draw(PAUSES)
        v.apply(b.namespace(annotations={PAUSE_UNTIL: pause} if pause else None))
    elif change == "namespace_gone":
        v.delete("Namespace", "", b.NS)
    elif change == "workload_pause":
        pause = draw(PAUSES)
        v.apply(b.deployment(containers=TWO, annotations={PAUSE_UNTIL: pause} if pause else None))
    elif change == "hpa_on":
        v.apply(b.hpa(resource=draw(st.sampled_from(["cpu", "memory"]))))
    elif change == "hpa_off":
        v.delete("HorizontalPodAutoscaler", b.NS, "web-hpa")
    elif change == "oom_pod":
        finished = draw(st.sampled_from(GRID)) - timedelta(days=1)
        v.apply(b.pod("web-7d4b9-oom", statuses=[b.oom_status(finished=finished)]))
    elif change == "oom_pod_gone":
        v.delete("Pod", b.NS, "web-7d4b9-oom")
    elif change == "healthy_pod":
        v.apply(b.pod(f"web-7d4b9-ok{draw(st.integers(0, 3))}"))
    elif change == "policy":
        v.apply(_static(draw(st.sampled_from(QUANTITY["cpu"]))))
    elif change == "source_broken":
        b.break_recommendations(v)
    elif change == "source_fixed":
        v.apply(b.configmap(*rows))
    elif change == "last_applied":
        cpu = draw(st.sampled_from(QUANTITY["cpu"]))
        v.apply(
            b.recommendation(
                last_applied={"app": {"requests": {"cpu": cpu}}},
                applied_at=draw(st.sampled_from(GRID)) - timedelta(days=2),
            )
        )


@st.composite
def scenarios(draw: st.DrawFn) -> None:
    """A view, then steps: a pod of one of a few templates admitted at one of the grid's
    times, or a change to the view. Every memoised answer must equal a fresh decision."""
    rows = [
        b.row(
            c,
            analyzed_at=draw(st.sampled_from(GRID)) - timedelta(days=5),
            coverage_hours=draw(st.sampled_from([100.0, 240.0])),
            throttling=draw(st.sampled_from([None, 0.02, 0.5])),
        )
        for c in TWO
    ]
    objs: list[Any] = [*b.base_objects(containers=TWO), b.configmap(*rows)]
    if draw(st.booleans()):
        objs.append(b.proactive())
    if draw(st.booleans()) or len(objs) == 4:
        objs.append(_static(draw(st.sampled_from(QUANTITY["cpu"]))))
    v = b.view(*objs)
    pool = draw(st.lists(templates(), min_size=1, max_size=3))
    for step in range(draw(st.integers(1, 25))):
        if draw(st.integers(0, 3)) == 0:
            _change(v, draw(st.sampled_from(CHANGES)), draw, rows)
            continue
        template = draw(st.sampled_from(pool))
        p = new_pod(
            f"web-7d4b9-p{step}",
            containers=template["containers"],
            annotations=template["annotations"],
        )
        both(v, p, draw(st.sampled_from(TIMES)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_a_memoised_decision_is_always_a_fresh_one(_: None) -> None:
    """Checked inside the scenario, after every admission (`both`)."""
