"""The reconciler's pure parts: the annotation patch, pod resize stages, the status and
its patch, event dedup, the work queue and the token bucket."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.kube.errors import ApiStatusError
from app.model.annotations import ARGS_KEY, ROLLBACK_STATE, fixed_key
from app.model.apitime import micro_time, rfc3339
from app.model.crd import PendingEviction, parse_object
from app.model.horizon import Horizon
from app.model.owners import WorkloadRef
from app.model.workloads import Workload
from app.outcome.rollout import Action
from app.policy.podstate import resize_progress, resources_running
from app.store.view import ClusterView
from reconciler.act import Actuator
from reconciler.events import dedup_key, event_body, is_repeat, merged, note_within, pending_event
from reconciler.execution import ExecutionConfig
from reconciler.intent import happened
from reconciler.memory import Inventory, WorkloadMemory
from reconciler.metrics import reconciler_metrics
from reconciler.outcome import Outcome
from reconciler.plan import PassPlan
from reconciler.publish import annotation_patch
from reconciler.queue import QueueClosed, WorkQueue
from reconciler.ratelimit import TokenBucket
from reconciler.status import (
    Summary,
    build_status,
    derived_from,
    phase_of,
    status_digest,
    status_patch,
)

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
REF = WorkloadRef("Deployment", "shop", "web")
REQ = fixed_key("StaticPolicy", "requests")
LIM = fixed_key("StaticPolicy", "limits")


# ----------------------------------------------------------------------- publishing


def test_no_patch_when_the_annotations_already_match() -> None:
    current = {REQ: '{"app":{"cpu":"250m"}}', "team": "shop"}
    assert annotation_patch(current, {REQ: '{"app":{"cpu":"250m"}}'}) is None


def test_patch_sets_changed_keys_and_removes_stale_kerf_keys_only() -> None:
    current = {REQ: "old", LIM: "stale", ARGS_KEY: "stale", "team": "shop", "x.io/y": "z"}
    desired = {REQ: "new"}
    assert annotation_patch(current, desired) == {REQ: "new", LIM: None, ARGS_KEY: None}


# ----------------------------------------------------------------------- pod stages


def pod(conditions: list[dict[str, Any]] = (), spec: str = "250m", running: str = "250m") -> Any:
    return {
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": spec}}}]},
        "status": {
            "conditions": list(conditions),
            "containerStatuses": [{"name": "app", "resources": {"requests": {"cpu": running}}}],
        },
    }


def test_resources_compare_as_amounts() -> None:
    assert resources_running(pod(spec="1", running="1000m"))
    assert not resources_running(pod(spec="1", running="500m"))


def test_a_gpu_the_kubelet_does_not_report_is_not_a_resize_under_way() -> None:
    gpu_pod = pod()
    gpu_pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    assert resources_running(gpu_pod)
    assert resize_progress(gpu_pod).stage == "none"


@pytest.mark.parametrize(
    ("conditions", "stage"),
    [
        ([], "none"),
        ([{"type": "PodResizePending", "status": "True", "reason": "Deferred"}], "deferred"),
        ([{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}], "infeasible"),
        ([{"type": "PodResizeInProgress", "status": "True"}], "inProgress"),
        ([{"type": "PodResizeInProgress", "status": "True", "reason": "Error"}], "error"),
        ([{"type": "PodResizePending", "status": "False", "reason": "Deferred"}], "none"),
    ],
)
def test_resize_stage_from_conditions(conditions: list[dict[str, Any]], stage: str) -> None:
    assert resize_progress(pod(conditions)).stage == stage


def test_a_spec_the_kubelet_does_not_run_yet_is_in_progress() -> None:
    assert resize_progress(pod(spec="250m", running="100m")).stage == "inProgress"


def test_deferred_since_its_transition() -> None:
    deferred = {
        "type": "PodResizePending",
        "status": "True",
        "reason": "Deferred",
        "lastTransitionTime": "2026-11-30T11:00:00Z",
    }
    assert resize_progress(pod([deferred])).since == NOW - timedelta(hours=1)


# ----------------------------------------------------------------------- status


@pytest.mark.parametrize(
    ("summary", "applied", "phase"),
    [
        (Summary("pending", "NoRunningPods", ""), False, "Pending"),
        (Summary("apply", None, ""), True, "Pending"),
        (Summary("skipped", "Audit", "", proposal=("p1", {})), False, "Proposed"),
        (Summary("blocked", "Cooldown", ""), False, "Blocked"),
        # An earlier change is still live: Applied, with the Blocked condition.
        (Summary("blocked", "Cooldown", "", live=True), True, "Applied"),
        (Summary("skipped", "NoSignificantChange", "", live=True), True, "Applied"),
        (Summary("skipped", "NoSignificantChange", ""), False, "Skipped"),
    ],
)
def test_phase(summary: Summary, applied: bool, phase: str) -> None:
    assert phase_of(summary, applied) == phase


def record(status: dict[str, Any] | None) -> Any:
    doc = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "RightsizingRecommendation",
        "metadata": {"name": "deployment-web", "namespace": "shop", "generation": 1},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
    }
    if status is not None:
        doc["status"] = status
    return parse_object(doc)


def test_status_is_not_written_again_when_nothing_changed() -> None:
    summary = Summary("blocked", "Cooldown", "wait", current={"app": {"requests": {"cpu": "1"}}})
    first = build_status(
        None, REF, summary, last_applied=None, last_event=None, approved=None, now=NOW
    )
    stored = record(first)
    later = build_status(
        stored,
        REF,
        summary,
        last_applied=None,
        last_event=None,
        approved=None,
        now=NOW + timedelta(hours=1),
    )
    assert later["conditions"] == first["conditions"]  # times move only on a change
    assert status_patch(stored, later) is None


def test_status_patch_removes_fields_that_go() -> None:
    stored = record(
        {"phase": "Blocked", "reason": "Cooldown", "nextAllowedAt": "2026-12-01T00:00:00Z"}
    )
    summary = Summary("skipped", "NoSignificantChange", "")
    new = build_status(
        stored, REF, summary, last_applied=None, last_event=None, approved=None, now=NOW
    )
    patch = status_patch(stored, new)
    assert patch is not None and patch["nextAllowedAt"] is None
    assert patch["phase"] == "Skipped"


def test_status_patch_leaves_the_recommender_s_gpu_block() -> None:
    gpu = {"policy": "GpuReactivePolicy ml/gpu", "reason": "GpuUpsize", "baseline": {"app": "1"}}
    stored = record({"phase": "Blocked", "reason": "Cooldown", "gpu": gpu})
    summary = Summary("skipped", "NoSignificantChange", "")
    new = build_status(
        stored, REF, summary, last_applied=None, last_event=None, approved=None, now=NOW
    )
    patch = status_patch(stored, new)
    assert patch is not None and "gpu" not in patch
    same = record({**new, "gpu": gpu})
    assert status_patch(same, new) is None


def test_a_status_digest_is_equal_for_equal_statuses_only() -> None:
    written = {"phase": "Applied", "lastApplied": {"at": "2026-12-01T00:00:00Z"}, "current": {}}
    same = {"current": {}, "lastApplied": {"at": "2026-12-01T00:00:00Z"}, "phase": "Applied"}
    assert status_digest(same) == status_digest(written)
    assert len(status_digest(same)) == 16
    assert status_digest({**same, "phase": "Blocked"}) != status_digest(written)
    assert status_digest({**same, "lastApplied": {}}) != status_digest(written)


# ----------------------------------------------------------------------- events


def test_a_blocked_event_repeats_only_for_a_new_reason_or_values() -> None:
    key = dedup_key("Cooldown", {"app": {"cpu": "250m"}})
    assert not is_repeat(None, key)
    assert is_repeat(key, dedup_key("Cooldown", {"app": {"cpu": "250m"}}))
    assert not is_repeat(key, dedup_key("Cooldown", {"app": {"cpu": "300m"}}))
    assert not is_repeat(key, dedup_key("FreezeWindow", {"app": {"cpu": "250m"}}))


def test_event_body_regards_the_workload_with_the_times_kubectl_sorts_by() -> None:
    pending = pending_event(REF, "Blocked", "x" * 5000, warning=True, now=NOW)
    body = event_body(REF, "apps/v1", "u1", pending, "r-0")
    assert body["apiVersion"] == "v1"
    assert body["metadata"] == {"name": pending["name"], "namespace": "shop"}
    assert body["action"] == "Decide"
    assert body["involvedObject"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "web",
        "namespace": "shop",
        "uid": "u1",
    }
    assert body["type"] == "Warning" and len(body["message"]) == 1024
    assert body["eventTime"] == micro_time(NOW)
    assert body["lastTimestamp"] == body["firstTimestamp"] == rfc3339(NOW)
    assert body["count"] == 1


def test_pending_events_have_names_of_their_own_and_merge_once() -> None:
    long = WorkloadRef("Deployment", "shop", "w" * 253)
    a = pending_event(long, "Resized", "a", warning=False, now=NOW)
    b = pending_event(long, "Resized", "a", warning=False, now=NOW)
    assert a["name"] != b["name"] and len(a["name"]) == 253
    assert a["action"] == "Resized" and a["type"] == "Normal"
    assert merged([a], [a, b], [b]) == [a, b]


def test_an_event_derived_again_from_the_same_inputs_has_the_same_name() -> None:
    ref = WorkloadRef("Deployment", "shop", "web")
    again = [
        pending_event(ref, "Resized", note, warning=False, now=NOW, identity="uid/41/Resized")
        for note in ("resized (1 of 2 pods)", "resized (2 of 2 pods)")
    ]
    other = pending_event(ref, "Resized", "x", warning=False, now=NOW, identity="uid/42/Resized")
    assert again[0]["name"] == again[1]["name"] != other["name"]
    assert (
        again[0]["name"].startswith("web.kerf-") and len(again[0]["name"]) == len("web.kerf-") + 16
    )
    assert merged([again[0]], [again[1]]) == [again[0]]  # told once


def test_events_are_derived_from_the_version_of_the_status_read() -> None:
    summary = Summary("blocked", "Cooldown", "wait", current={"app": {"requests": {"cpu": "1"}}})
    status = build_status(
        None, REF, summary, last_applied=None, last_event=None, approved=None, now=NOW
    )

    def at(version: str, found: Any) -> Any:
        meta = found.metadata.model_copy(update={"resource_version": version})
        return found.model_copy(update={"metadata": meta})

    # No record, and a record just created without a status: the same start.
    assert derived_from(None) == derived_from(at("41", record(None))) == ""
    # The same status read again is the same start; a later version of it is not, even
    # when it says the same (a change undone and made again at the same time).
    assert derived_from(at("42", record(status))) == "42"
    assert derived_from(at("43", record(status))) == "43"


# ----------------------------------------------------------------------- queue


async def test_queue_deduplicates_and_requeues_keys_added_while_active() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    key, _ = await queue.get()
    assert key == "a"
    queue.add("a")  # changed while being worked on
    assert len(queue) == 1
    queue.done("a")
    assert len(queue) == 2
    assert [(await queue.get())[0], (await queue.get())[0]] == ["b", "a"]


async def test_queue_schedules_and_backs_off_per_key() -> None:
    queue: WorkQueue[str] = WorkQueue()
    assert [queue.add_failed("a") for _ in range(3)] == [0.05, 0.1, 0.2]
    queue.forget("a")
    assert queue.add_failed("a") == 0.05
    queue.add_after("b", 0.01)
    key, _ = await asyncio.wait_for(queue.get(), 1)
    assert key in ("a", "b")


async def test_queue_counts_keys_scheduled_soon_and_later() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("soon", 0.5)
    queue.add_after("later", 600)
    assert (queue.scheduled_within(1), queue.scheduled_within(601), queue.scheduled) == (1, 2, 2)
    queue.close()


async def test_a_sealed_queue_hands_out_each_queued_key_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("b")
    queue.add_after("c", 0.01)
    queue.seal()
    key, _ = await queue.get()
    queue.add(key)  # its own write seen by the watch while it is worked on
    queue.add_after(key, 0)  # its pass asks to come back
    queue.done(key)
    assert (await queue.get())[0] == "b"
    queue.done("b")
    assert queue.scheduled == 0  # sealing cancelled the timer set before it
    queue.add("c")  # and nothing new is taken
    assert queue.idle and len(queue) == 0


async def test_keys_queued_for_a_change_go_before_keys_queued_in_bulk() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        queue.add(key, bulk=True)
    queue.add("d")  # a watch event of its own
    queue.add("c")  # queued in bulk, then changed: it moves ahead, once
    queue.add("a", bulk=True)  # queued already
    assert queue.queued() == ["d", "c", "a", "b"] and len(queue) == 4
    first, _ = await queue.get()
    queue.add_after("b", 0)  # a follow-up due now: ahead of the bulk
    got = [first, *[(await queue.get())[0] for _ in range(3)]]
    assert got == ["d", "c", "b", "a"]
    for key in got:
        queue.done(key)
    assert queue.idle
    queue.add("e", bulk=True)
    queue.add_after("f", 600)  # a follow-up, queued in bulk before it is due
    queue.add("f", bulk=True)
    assert queue.queued() == ["f", "e"] and queue.scheduled == 0
    queue.clear()
    assert queue.idle and len(queue) == 0
    queue.close()


async def test_a_change_of_a_key_due_back_soon_waits_for_that_time() -> None:
    queue: WorkQueue[str] = WorkQueue(coalesce_s=1.0)
    queue.add_after("followed", 0.5)  # a rollout under way, looked at again in 0.5 s
    queue.add("followed")  # the echo of its own write: read by that look
    queue.add_after("cooling", 300)  # a cooldown ending in 5 minutes
    queue.add("cooling")  # a change: looked at now
    assert queue.queued() == ["cooling"] and queue.scheduled == 1
    queue.add("followed", bulk=True)  # a resync: every workload now
    assert queue.queued() == ["cooling", "followed"] and queue.scheduled == 0
    queue.close()


async def test_a_closed_queue_stops_its_workers() -> None:
    queue: WorkQueue[str] = WorkQueue()
    waiter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.close()
    with pytest.raises(QueueClosed):
        await waiter


def test_token_bucket() -> None:
    now = [0.0]
    bucket = TokenBucket(2.0, 1.0, clock=lambda: now[0])
    assert bucket.try_take() == 0.0
    assert bucket.try_take() == pytest.approx(0.5)
    now[0] = 0.5
    assert bucket.try_take() == 0.0
    with pytest.raises(ValueError):
        TokenBucket(0)


def test_a_workload_waits_until_the_view_shows_the_annotations_written() -> None:
    memory = WorkloadMemory()
    state = {ROLLBACK_STATE: '{"mode": "monitoring"}'}
    # The pass read version 10 and its annotation patch was answered with version 12.
    memory.wrote("workload", "10", "12")
    memory.remember_annotations(state)
    # Version 11, another writer's (the controller's status update committed before the
    # patch), is not stale by version, but it lacks the write: still waiting.
    assert not memory.behind({"workload": "11", "record": ""})
    assert memory.unseen_annotations({})
    assert not memory.unseen_annotations(state)
    assert not memory.unseen_annotations({})  # seen once: forgotten


class _RefusingWriter:
    """Every eviction refused (429), as a PDB that allows no disruption; the writes before
    each (the record, the eviction intent) are kept in order."""

    def __init__(self) -> None:
        self.evictions = 0
        self.calls: list[str] = []

    async def create_recommendation(self, body: Any) -> dict[str, Any]:
        self.calls.append("create")
        return {}

    async def patch_status(self, namespace: str, name: str, patch: Any) -> dict[str, Any]:
        self.calls.append(f"intent {patch['pendingEviction']['podName']}")
        return {}

    async def evict(self, pod: Any) -> str:
        self.evictions += 1
        self.calls.append(f"evict {pod['metadata']['name']}")
        return "refused"


def _plan_of(ref: WorkloadRef) -> PassPlan:
    """A plan over a workload kerf never reported on (no record yet)."""
    workload = Workload(ref.kind, ref.namespace, ref.name)
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"uid": "w"}}
    now = datetime.now(UTC)
    return PassPlan(ref, workload, obj, None, now, Horizon(now), (), None)


async def test_refused_evictions_of_a_pod_back_off_exponentially_to_a_cap() -> None:
    config = ExecutionConfig(refused_retry_s=10.0, refused_retry_max_s=60.0)
    writer = _RefusingWriter()
    metrics = reconciler_metrics()
    actuator = Actuator(
        ClusterView(),
        writer,  # type: ignore[arg-type]
        metrics,
        config,
        TokenBucket(1.0, 100.0),  # the rate limit never holds one back here
    )
    plan = _plan_of(WorkloadRef("Deployment", "shop", "web"))
    memory = WorkloadMemory()
    pod = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "u1"}}
    delays = []
    for _ in range(5):
        done = Outcome()
        await actuator.act(plan, Action("evict", pod, None), memory, done)
        assert done.intent and not done.named  # recorded, then refused: nothing to tell
        delays.append(done.requeue)
    assert delays == [10.0, 20.0, 40.0, 60.0, 60.0]
    assert writer.evictions == 5
    assert metrics.evictions.labels("refused")._value.get() == 5
    # No record yet: it is created, then the intent recorded, before each eviction.
    assert writer.calls[:3] == ["create", "intent web-1", "evict web-1"]
    other = {"metadata": {"name": "web-2", "namespace": "shop", "uid": "u2"}}
    done = Outcome()
    await actuator.act(plan, Action("evict", other, None), memory, done)
    assert done.requeue == 10.0  # another pod starts over


class _AnsweringWriter(_RefusingWriter):
    """Evictions answered as given: a result, or an error raised (the answer lost). The
    record's write is carried out, its answer lost when `answer` is "record lost"."""

    def __init__(self, answer: str | Exception) -> None:
        super().__init__()
        self.answer = answer
        self.intents: list[dict[str, Any]] = []

    async def patch_status(self, namespace: str, name: str, patch: Any) -> dict[str, Any]:
        self.intents.append(patch["pendingEviction"])
        if self.answer == "record lost":
            raise ApiStatusError(504, "lost")
        return {}

    async def evict(self, pod: Any) -> str:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "known"),
    [
        ("record lost", True),
        ("refused", True),
        ("gone", True),
        ("evicted", False),
        (ApiStatusError(500, "lost"), False),
        (TimeoutError(), False),
    ],
)
async def test_a_replica_remembers_an_eviction_it_recorded_and_knows_did_not_go_out(
    answer: str | Exception, known: bool
) -> None:
    writer = _AnsweringWriter(answer)
    actuator = Actuator(
        ClusterView(),
        writer,  # type: ignore[arg-type]
        reconciler_metrics(),
        ExecutionConfig(),
        TokenBucket(1.0, 100.0),
    )
    memory = WorkloadMemory()
    pod = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "u1"}}
    with contextlib.suppress(ApiStatusError, TimeoutError):
        await actuator.act(
            _plan_of(WorkloadRef("Deployment", "shop", "web")),
            Action("evict", pod, None),
            memory,
            Outcome(),
        )
    (intent,) = writer.intents
    assert memory.knows_unsent(intent["events"][0]["name"]) is known
    assert not memory.knows_unsent("web.kerf-another")


def test_an_event_note_is_cut_to_1024_bytes_never_inside_a_character() -> None:
    assert note_within("a" * 1024) == "a" * 1024
    cut = note_within("é" * 600)  # 1,200 bytes: two bytes a character
    assert len(cut.encode()) <= 1024 and cut == "é" * 512
    assert len(note_within("x" + "é" * 600).encode()) == 1023  # the half character is dropped


def test_a_workloads_memory_keeps_nothing_of_pods_it_no_longer_has() -> None:
    memory = WorkloadMemory()
    kept = {"metadata": {"name": "web-1", "uid": "u1", "resourceVersion": "5"}}
    gone = {"metadata": {"name": "web-2", "uid": "u2", "resourceVersion": "6"}}
    for pod in (kept, gone):
        memory.mark_sent(pod)
        memory.refused(pod)
    memory.keep_pods([kept])
    assert memory.sent == {"u1": "5"} and memory.refusals == {"u1": 1}
    assert memory.awaiting(kept) and not memory.awaiting(gone)


def _own_containers(memory: WorkloadMemory) -> list[str]:
    """The fields of a memory that hold a container of their own (not the shared empty
    mapping every memory starts with)."""
    fresh = WorkloadMemory()
    return [
        f
        for f in ("sent", "rejected", "refusals", "written", "untold")
        if getattr(memory, f) is not getattr(fresh, f)
    ]


def test_a_memory_never_written_holds_no_container_of_its_own() -> None:
    one, other = WorkloadMemory(), WorkloadMemory()
    for f in ("sent", "rejected", "refusals", "written", "untold"):
        assert getattr(one, f) is getattr(other, f) and not getattr(one, f)
    pod = {"metadata": {"name": "web-1", "uid": "u1", "resourceVersion": "5"}}
    one.mark_sent(pod)
    one.refused(pod)
    one.wrote("record", "3", "4")
    assert _own_containers(one) == ["sent", "refusals", "written"]
    assert not other.sent and not other.refusals and not other.written  # nothing shared
    assert one.awaiting(pod) and one.behind({"record": "3"})


def test_a_memory_emptied_again_holds_no_container_of_its_own() -> None:
    memory = WorkloadMemory()
    pod = {"metadata": {"name": "web-1", "uid": "u1", "resourceVersion": "5"}}
    memory.mark_sent(pod)
    memory.refused(pod)
    memory.wrote("record", "3", "4")
    memory.evicted(pod)
    assert memory.refusals == {}
    assert not memory.awaiting({"metadata": {"uid": "u1", "resourceVersion": "6"}})
    assert not memory.behind({"record": "4"})  # the view caught up
    assert _own_containers(memory) == []
    memory.mark_sent(pod)
    memory.keep_pods([])
    assert _own_containers(memory) == []


def test_the_inventory_forgets_workloads_gone_from_the_view() -> None:
    inventory = Inventory()
    for name in ("web", "api", "db"):
        inventory.get(("Deployment", "shop", name)).mark_sent({"metadata": {"uid": name}})
    inventory.forget(("Deployment", "shop", "db"))
    inventory.keep([("Deployment", "shop", "web")])
    assert list(inventory) == [("Deployment", "shop", "web")]


def test_an_eviction_recorded_went_out_if_its_pod_is_gone_replaced_or_marked() -> None:
    intent = PendingEviction(pod_uid="u1", pod_name="web-1")
    mark = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}

    def pod(uid: str = "u1", *, deleting: bool = False, marked: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": "web-1", "uid": uid}
        if deleting:
            meta["deletionTimestamp"] = "2026-12-07T10:00:00Z"
        return {"metadata": meta, "status": {"conditions": [mark] if marked else []}}

    assert happened(intent, [])
    assert happened(intent, [pod("u2")])  # a StatefulSet's replacement keeps the name
    assert happened(intent, [pod(deleting=True, marked=True)])
    assert happened(intent, [pod(marked=True)])  # marked, not deleting yet
    assert not happened(intent, [pod()])
    assert not happened(intent, [pod(deleting=True)])  # someone else deleted it
