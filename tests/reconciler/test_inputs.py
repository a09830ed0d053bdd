"""What a decision reads is declared once (`app/store/inputs.py`): a change to any declared
input makes both the webhook (its admission memo) and the reconciler (its quiet-pass
check, its requeue routing) decide again; a stage that reads an input it does not
declare fails."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import app.decide.checks as checks
from app.decide import decide_pod
from app.decide.admission import admit_pod, memo_counts
from app.decide.checks import CHECKS, Check
from app.decide.context import PASS, Context, Result
from app.model.annotations import APPROVE, APPROVE_TARGET, PAUSE_UNTIL
from app.model.crd import KerfResource, parse_object
from app.model.owners import WorkloadRef
from app.policy.plans import plan_for
from app.store import inputs
from app.store.inputs import (
    INPUTS,
    OWNER_READS,
    PLAN_READS,
    RECORD_FIELDS,
    Input,
    UndeclaredInput,
)
from app.store.view import ClusterView
from reconciler.service import WatchedView
from tests.app import builders as b

WEB = WorkloadRef("Deployment", b.NS, "web")
Change = Callable[[ClusterView], Any]


def _bound(kind: str) -> dict[str, Any]:
    """A LimitRange or ResourceQuota that refuses the policy's memory."""
    spec: dict[str, Any] = (
        {"limits": [{"type": "Container", "min": {"memory": "300Mi"}}]}
        if kind == "LimitRange"
        else {"hard": {"requests.memory": "1Mi"}}
    )
    return {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": b.NS},
        "spec": spec,
    }


#: (input, label, the change): at least one per watched input, and one per kind of the
#: inputs whose kinds the view keeps apart
CHANGES: list[tuple[Input, str, Change]] = [
    (
        inputs.WORKLOAD,
        "Deployment paused",
        lambda v: v.apply(b.deployment(annotations={PAUSE_UNTIL: "infinite"})),
    ),
    (
        inputs.RECORD,
        "RightsizingRecommendation records a change applied",
        lambda v: v.apply(b.recommendation(applied_at=b.NOW - timedelta(hours=1))),
    ),
    (
        inputs.KERF,
        "GlobalConfiguration turns automation off",
        lambda v: v.apply(b.global_config(automationEnabled=False)),
    ),
    (
        inputs.SOURCES,
        "recommendation ConfigMap arrives",
        lambda v: v.apply(b.configmap(b.row())),
    ),
    (
        inputs.NAMESPACE,
        "Namespace paused",
        lambda v: v.apply(b.namespace(annotations={PAUSE_UNTIL: "infinite"})),
    ),
    (inputs.BOUNDS, "LimitRange arrives", lambda v: v.apply(_bound("LimitRange"))),
    (inputs.BOUNDS, "ResourceQuota arrives", lambda v: v.apply(_bound("ResourceQuota"))),
    (
        inputs.AUTOSCALERS,
        "HorizontalPodAutoscaler deleted",
        lambda v: v.delete("HorizontalPodAutoscaler", b.NS, "web-hpa"),
    ),
    (
        inputs.AUTOSCALERS,
        "HorizontalPodAutoscaler retargeted",
        lambda v: v.apply(
            b.hpa("api", "cpu") | {"metadata": {"name": "web-hpa", "namespace": b.NS}}
        ),
    ),
    (inputs.AUTOSCALERS, "VerticalPodAutoscaler arrives", lambda v: v.apply(b.vpa())),
    (
        inputs.OOM_EVIDENCE,
        "a sibling is OOM-killed",
        lambda v: v.apply(b.pod("web-7d4b9-old", statuses=[b.oom_status()])),
    ),
    (inputs.PODS, "the pod changes", lambda v: v.apply(b.pod(statuses=[b.oom_status()]))),
    (inputs.NODES, "a node's allocatable changes", lambda v: v.apply(b.node(cpu="100m"))),
]


def _view(queued: list[WorkloadRef | None]) -> WatchedView:
    v = WatchedView(queued.append)
    v.check_reads = True
    for obj in (
        *b.base_objects(),
        b.static(),
        b.hpa(resource="cpu"),
        b.node(),
        b.pod(node="node-a"),
    ):
        v.apply(obj)
    v.synced = True
    return v


def _admit(v: ClusterView, name: str) -> Any:
    pod = b.pod(name, phase="Pending")
    memoised = admit_pod(v, pod, b.NS, b.NOW)
    assert memoised == admit_pod(v, copy.deepcopy(pod), b.NS, b.NOW, memo=False)
    return memoised


def _running_inputs(v: ClusterView) -> tuple[object, ...]:
    workload = v.workload(WEB)
    assert workload is not None
    return inputs.running_inputs(v, WEB, plan_for(v, workload))


def test_every_watched_input_has_a_change_below() -> None:
    watched = {i for i in INPUTS if i.unwatched is None}
    assert {i for i, _, _ in CHANGES} == watched
    for declared in (inputs.BOUNDS, inputs.AUTOSCALERS):
        kinds = {label.split()[0] for i, label, _ in CHANGES if i is declared}
        assert kinds == declared.kinds


@pytest.mark.parametrize(
    ("declared", "change"),
    [(i, c) for i, _, c in CHANGES],
    ids=[label for _, label, _ in CHANGES],
)
def test_a_change_to_a_declared_input_makes_both_paths_decide_again(
    declared: Input, change: Change
) -> None:
    queued: list[WorkloadRef | None] = []
    v = _view(queued)
    for name in ("web-7d4b9-first", "web-7d4b9-second"):
        _admit(v, name)  # a template is memoised from its second pod on
    hits = memo_counts(v)[0]
    _admit(v, "web-7d4b9-third")
    assert memo_counts(v)[0] == hits + 1
    quiet = _running_inputs(v)
    assert inputs.same_inputs(quiet, _running_inputs(v))
    queued.clear()

    change(v)

    if "admission" in declared.paths:
        misses = memo_counts(v)[1]
        _admit(v, "web-7d4b9-later")
        assert memo_counts(v)[1] == misses + 1, "the webhook answered from its memo"
    if "running" in declared.paths:
        assert not inputs.same_inputs(quiet, _running_inputs(v)), "the pass would be quiet"
        assert WEB in queued or None in queued, "the workload was not queued"


def test_an_hpa_deleted_frees_a_blocked_workload_at_once() -> None:
    """Blocked HPACoupled, then the HPA goes: the webhook and the reconciler both see it."""
    queued: list[WorkloadRef | None] = []
    v = _view(queued)
    v.apply(b.hpa("web", "memory") | {"metadata": {"name": "web-hpa-mem", "namespace": b.NS}})
    pod = v.get("Pod", b.NS, "web-7d4b9-aaaaa")
    assert pod is not None
    assert decide_pod(v, pod, now=b.NOW, path="running").reason == "HPACoupled"
    quiet = _running_inputs(v)
    queued.clear()
    v.delete("HorizontalPodAutoscaler", b.NS, "web-hpa-mem")
    v.delete("HorizontalPodAutoscaler", b.NS, "web-hpa")
    assert queued == [WEB, WEB]
    assert not inputs.same_inputs(quiet, _running_inputs(v))
    assert decide_pod(v, pod, now=b.NOW, path="running").outcome == "apply"


def test_every_input_is_read_by_a_stage() -> None:
    declared = {i for c in CHECKS for i in c.reads} | set(PLAN_READS) | set(OWNER_READS)
    assert declared == set(INPUTS)


def _reads_hpas_undeclared(ctx: Context) -> Result:
    ctx.view.autoscalers("HorizontalPodAutoscaler", ctx.workload)
    return PASS


def test_a_stage_that_reads_an_undeclared_input_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    v = _view([])
    pod = v.get("Pod", b.NS, "web-7d4b9-aaaaa")
    assert pod is not None
    assert decide_pod(v, pod, now=b.NOW, path="running").outcome == "apply"
    stage = Check(("NewGuardrail",), _reads_hpas_undeclared, (inputs.NODES,))
    monkeypatch.setitem(checks._BY_PATH, "running", (*checks._BY_PATH["running"], stage))
    with pytest.raises(UndeclaredInput, match="NewGuardrail reads autoscalers"):
        decide_pod(v, pod, now=b.NOW, path="running")
    declared = Check(("NewGuardrail",), _reads_hpas_undeclared, (inputs.AUTOSCALERS,))
    monkeypatch.setitem(checks._BY_PATH, "running", (*checks._BY_PATH["running"][:-1], declared))
    assert decide_pod(v, pod, now=b.NOW, path="running").outcome == "apply"


# ----------------------------------------------------------------- the record's fields


def _record_doc() -> dict[str, Any]:
    """A record as the reconciler leaves it after a change it applied ten days ago."""
    doc = b.recommendation(applied_at=b.NOW - timedelta(days=10)).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )
    doc["metadata"]["resourceVersion"] = "1"
    doc["status"] |= {
        "phase": "Applied",
        "reason": None,
        "conditions": [{"type": "Blocked", "status": "False", "reason": "NotBlocked"}],
    }
    return doc


def _set(doc: dict[str, Any], place: str, key: str, value: Any) -> None:
    doc["metadata"]["resourceVersion"] = "2"
    doc[place] = {**(doc.get(place) or {}), key: value}


#: a change of each field `RECORD_FIELDS` declares, alone
FIELD_CHANGES: dict[tuple[str, ...], Callable[[dict[str, Any]], None]] = {
    ("metadata", "annotations", APPROVE): lambda d: d["metadata"].update(
        resourceVersion="2", annotations={APPROVE: "p-1"}
    ),
    ("metadata", "annotations", APPROVE_TARGET): lambda d: d["metadata"].update(
        resourceVersion="2", annotations={APPROVE_TARGET: "t-1"}
    ),
    ("status", "last_applied"): lambda d: _set(
        d,
        "status",
        "lastApplied",
        {"at": b.ts(b.NOW - timedelta(hours=1)), "method": "inPlace", "containers": {}},
    ),
    ("status", "last_rollback"): lambda d: _set(
        d, "status", "lastRollback", {"at": b.ts(b.NOW - timedelta(hours=1))}
    ),
    ("status", "approved_proposal"): lambda d: _set(d, "status", "approvedProposal", "p-1"),
    ("status", "pending_eviction"): lambda d: _set(
        d, "status", "pendingEviction", {"podUid": "u-1", "podName": "web-7d4b9-aaaaa"}
    ),
}


def _changed(change: Callable[[dict[str, Any]], None]) -> KerfResource:
    doc = _record_doc()
    change(doc)
    return parse_object(doc)


def _quiet_view(queued: list[WorkloadRef | None]) -> tuple[WatchedView, tuple[object, ...]]:
    """The view with the record, the admission memo warm, and the running inputs."""
    v = _view(queued)
    v.apply(parse_object(_record_doc()))
    for name in ("web-7d4b9-first", "web-7d4b9-second"):
        _admit(v, name)
    quiet = _running_inputs(v)
    queued.clear()
    return v, quiet


def test_every_declared_record_field_has_a_change_below() -> None:
    assert set(FIELD_CHANGES) == set(RECORD_FIELDS)


@pytest.mark.parametrize("path", list(FIELD_CHANGES), ids=".".join)
def test_a_change_of_a_declared_record_field_makes_both_paths_decide_again(
    path: tuple[str, ...],
) -> None:
    queued: list[WorkloadRef | None] = []
    v, quiet = _quiet_view(queued)

    v.apply(_changed(FIELD_CHANGES[path]))

    misses = memo_counts(v)[1]
    _admit(v, "web-7d4b9-later")
    assert memo_counts(v)[1] == misses + 1, "the webhook answered from its memo"
    assert not inputs.same_inputs(quiet, _running_inputs(v)), "the pass would be quiet"
    assert WEB in queued


def test_a_status_change_the_decisions_do_not_read_keeps_the_plan() -> None:
    queued: list[WorkloadRef | None] = []
    v, quiet = _quiet_view(queued)
    hits = memo_counts(v)[0]

    # What a pass reporting a block writes: its phase, reason, conditions, Event key.
    def report(doc: dict[str, Any]) -> None:
        doc["metadata"]["resourceVersion"] = "2"
        doc["status"] |= {
            "phase": "Blocked",
            "reason": "Cooldown",
            "conditions": [{"type": "Blocked", "status": "True", "reason": "Cooldown"}],
            "lastEvent": {"reason": "Cooldown", "key": "k"},
        }

    v.apply(_changed(report))

    _admit(v, "web-7d4b9-later")
    assert memo_counts(v)[0] == hits + 1, "the webhook decided again"
    assert inputs.same_inputs(quiet, _running_inputs(v))
    # The pass reads the whole status (its report): it is queued, and finds the record
    # version changed (reconciler.reconcile).
    assert WEB in queued


def test_a_record_without_a_declared_field_reads_as_none() -> None:
    queued: list[WorkloadRef | None] = []
    v = _view(queued)
    quiet = _running_inputs(v)
    v.apply(b.recommendation())  # created, its status not written yet
    assert inputs.same_inputs(quiet, _running_inputs(v))
    v.delete("RightsizingRecommendation", b.NS, "deployment-web")
    assert inputs.same_inputs(quiet, _running_inputs(v))
    assert WEB in queued


def _record_of(ctx: Context) -> Any:
    record = ctx.view.recommendations("record", ctx.workload.ref)
    assert record is not None and record.status is not None
    return record


def _reads_phase(ctx: Context) -> Result:
    _record_of(ctx).status.phase  # noqa: B018 (the read is the test)
    return PASS


def _reads_conditions(ctx: Context) -> Result:
    _record_of(ctx).status.conditions  # noqa: B018 (the read is the test)
    return PASS


def _reads_an_annotation(ctx: Context) -> Result:
    _record_of(ctx).metadata.annotations.get("example.com/note")
    return PASS


def _reads_last_applied(ctx: Context) -> Result:
    assert _record_of(ctx).status.last_applied is not None
    return PASS


def test_a_decision_that_reads_an_undeclared_record_field_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    v, _ = _quiet_view([])
    pod = v.get("Pod", b.NS, "web-7d4b9-aaaaa")
    assert pod is not None
    assert decide_pod(v, pod, now=b.NOW, path="running").outcome == "apply"
    running = checks._BY_PATH["running"]
    undeclared = (
        (_reads_phase, "status.phase"),
        (_reads_conditions, "status.conditions"),
        (_reads_an_annotation, r"metadata.annotations\[example.com/note\]"),
    )
    for decide, field in undeclared:
        stage = Check(("NewGuardrail",), decide, (inputs.RECORD,))
        monkeypatch.setitem(checks._BY_PATH, "running", (*running, stage))
        with pytest.raises(UndeclaredInput, match=f"record's {field}"):
            decide_pod(v, pod, now=b.NOW, path="running")
    declared = Check(("NewGuardrail",), _reads_last_applied, (inputs.RECORD,))
    monkeypatch.setitem(checks._BY_PATH, "running", (*running, declared))
    assert decide_pod(v, pod, now=b.NOW, path="running").outcome == "apply"
