"""Leader election against split brain (issue 15 part 6): a leader stops acting before its
Lease can expire, measured from when its last renewal was sent on the monotonic clock; a
candidate waits a whole Lease duration of its own clock after it last saw the Lease
change; every write passes the fence; a lost leadership drops the queue."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from app.kube.errors import ApiStatusError
from app.kube.leader import LeaderElector, NotLeading, answer_check, write_fence
from app.kube.leadertimings import LeaderTimings
from app.model.owners import WorkloadRef
from app.store.view import ClusterView
from reconciler.api import ApiWriter
from reconciler.metrics import ReconcilerMetrics, reconciler_metrics
from reconciler.reconcile import WorkloadReconciler
from reconciler.service import Reconciler

TIMINGS = LeaderTimings(duration_s=15.0, renew_deadline_s=10.0, retry_s=2.0)
POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "u1"}, "spec": {}}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": POD["metadata"]}


class Monotonic:
    """A monotonic clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class LeaseServer:
    """One Lease with optimistic concurrency, as the API server keeps it; `during_write`
    runs while a write is in flight (a slow answer, a pause)."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.writes: list[tuple[str, str]] = []
        self.during_write: Callable[[], None] = lambda: None

    async def request(
        self, verb: str, resource: str, method: str, path: str, body: Any = None, **_: Any
    ) -> dict[str, Any]:
        if method == "GET":
            if self.lease is None:
                raise ApiStatusError(404, "not found")
            return copy.deepcopy(self.lease)
        self.during_write()
        if method == "POST" and self.lease is not None:
            raise ApiStatusError(409, "exists")
        if method == "PUT":
            assert self.lease is not None
            if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
                raise ApiStatusError(409, "the object has been modified")
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        self.writes.append((verb, body["spec"]["holderIdentity"]))
        return copy.deepcopy(self.lease)


def elector(
    server: LeaseServer, identity: str, clock: Monotonic, changes: list[bool] | None = None
) -> LeaderElector:
    return LeaderElector(
        server,  # type: ignore[arg-type]
        "kerf-system",
        identity,
        name="kerf-reconciler",
        timings=TIMINGS,
        clock=lambda: datetime(2026, 12, 1, tzinfo=UTC),
        monotonic=clock,
        on_change=(changes.append if changes is not None else lambda leading: None),
    )


async def test_the_defaults_are_client_gos_and_keep_their_order() -> None:
    assert LeaderTimings() == TIMINGS
    assert LeaderTimings.scaled(15.0) == TIMINGS
    assert LeaderTimings.scaled(6.0) == LeaderTimings(6.0, 4.0, 1.2)
    assert LeaderTimings().problem() is None
    assert "--renew-deadline (15s)" in (LeaderTimings.scaled(15.0, 15.0).problem() or "")
    assert LeaderTimings.scaled(15.0, 10.0, 10.0).problem() is not None
    assert LeaderTimings.scaled(15.0, 0.0, 0.0).problem() is not None


async def test_a_leader_stops_before_its_lease_can_expire() -> None:
    server, clock, changes = LeaseServer(), Monotonic(), []
    a = elector(server, "a", clock, changes)
    await a.attempt()
    assert a.leading() and changes == [True]
    clock.now += 9.9
    assert a.leading()
    clock.now += 0.1  # the renew deadline: 5 s before anyone may take the Lease over
    assert not a.leading()
    assert changes == [True, False]


async def test_the_deadline_runs_from_when_the_renewal_was_sent() -> None:
    server, clock = LeaseServer(), Monotonic()
    a = elector(server, "a", clock)
    await a.attempt()
    clock.now += 8.0
    # The renewal's answer takes 3 s: it renewed nothing this replica may rely on longer
    # than 10 s after it was sent.
    server.during_write = lambda: setattr(clock, "now", clock.now + 3.0)
    await a.attempt()
    server.during_write = lambda: None
    assert a.leading()
    clock.now += 7.0  # 10 s after the renewal was sent, 7 s after its answer came
    assert not a.leading()
    server.during_write = lambda: setattr(clock, "now", clock.now + 11.0)
    await a.attempt()  # an answer slower than the deadline: not the leader even on success
    assert not a.leading()


async def test_a_paused_leader_writes_nothing_after_resuming() -> None:
    # SIGSTOP for 20 s: the resumed process's first write, before any renewal, is refused.
    server, clock, metrics = LeaseServer(), Monotonic(), reconciler_metrics()
    a = elector(server, "a", clock)
    await a.attempt()
    sent: list[str] = []
    writer = ApiWriter(Recorder(sent), fence=write_fence(a, metrics.writes_withheld))  # type: ignore[arg-type]
    await writer.resize(POD, {"app": {"requests": {"cpu": "250m"}}})
    assert sent == ["pods/resize"]
    clock.now += 20.0
    with pytest.raises(NotLeading):
        await writer.evict(POD)
    assert sent == ["pods/resize"]
    assert withheld(metrics, "pods/eviction") == 1


async def test_every_write_passes_the_fence() -> None:
    sent: list[str] = []
    refused: list[tuple[str, str | None]] = []

    def fence(resource: str, namespace: str | None = None) -> None:
        refused.append((resource, namespace))
        raise NotLeading("no")

    writer = ApiWriter(Recorder(sent), fence=fence)  # type: ignore[arg-type]
    writes = [
        writer.patch_annotations(DEPLOYMENT, {"k": "v"}),
        writer.resize(POD, {"app": {}}),
        writer.evict(POD),
        writer.create_recommendation({"metadata": {"namespace": "shop", "name": "x"}}),
        writer.patch_status("shop", "x", {"phase": "Applied"}),
        writer.create_event({"metadata": {"namespace": "shop"}}),
    ]
    for write in writes:
        with pytest.raises(NotLeading):
            await write
    assert sent == []
    # each names the namespace it is written in: sharded, the fence asks for its bucket
    assert len(refused) == 6 and {namespace for _, namespace in refused} == {"shop"}


async def test_a_candidate_waits_a_whole_duration_of_its_own_clock() -> None:
    # The holder's renewTime says nothing to the candidate (clocks need not agree): it
    # takes over only after seeing the same version for leaseDurationSeconds.
    server, clock = LeaseServer(), Monotonic()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    await a.attempt()
    await b.attempt()
    assert not b.leading()
    clock.now += 14.9
    await b.attempt()
    assert not b.leading()
    clock.now += 0.1
    await b.attempt()
    assert b.leading()
    assert server.writes[-1] == ("update", "b")
    # The old leader, resumed, steps down by itself (deadline) and then sees b hold it.
    assert not a.leading()
    await a.attempt()
    assert not a.leading()
    assert server.writes[-1] == ("update", "b")


async def test_a_renewal_keeps_the_candidate_waiting() -> None:
    server, clock = LeaseServer(), Monotonic()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    await a.attempt()
    await b.attempt()
    for _ in range(10):
        clock.now += 2.0
        await a.attempt()
        await b.attempt()
    assert a.leading() and not b.leading()


async def test_losing_the_lease_drops_the_queue_and_the_pass_under_way() -> None:
    metrics = reconciler_metrics()
    reconciler = Dropped(metrics)
    service = Reconciler(ClusterView(), reconciler, metrics)  # type: ignore[arg-type]
    ref = WorkloadRef("Deployment", "shop", "web")
    other = WorkloadRef("Deployment", "shop", "api")
    service.queue.add(other)
    service.queue.add_after(ref, 30.0)
    service.on_leadership(False)
    assert service.queue.idle and service.queue.scheduled == 0
    # A pass whose write was withheld is dropped: not a failure, not queued again.
    await service._pass(ref)
    assert service.queue.scheduled == 0
    assert not any(s.value for m in metrics.pass_failures.collect() for s in m.samples)


async def test_the_renewal_loop_steps_down_when_a_renewal_hangs() -> None:
    server, clock = LeaseServer(), Monotonic()
    timings = LeaderTimings(duration_s=0.3, renew_deadline_s=0.2, retry_s=0.05)
    changes: list[bool] = []
    a = LeaderElector(
        server,  # type: ignore[arg-type]
        "kerf-system",
        "a",
        name="kerf-reconciler",
        timings=timings,
        monotonic=clock,
        on_change=changes.append,
    )
    await a.attempt()
    hung = asyncio.Event()

    async def hang(*args: Any, **kwargs: Any) -> dict[str, Any]:
        clock.now += 1.0
        hung.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    server.request = hang  # type: ignore[method-assign]

    async def stepped_down() -> None:
        while a.is_leader:
            await asyncio.sleep(0.01)

    task = asyncio.create_task(a.run())
    try:
        await asyncio.wait_for(hung.wait(), 10)
        # Nothing else asks: only the loop's bound on the hung renewal can step it down.
        await asyncio.wait_for(stepped_down(), 10)
    finally:
        task.cancel()
    assert changes == [True, False]


class Recorder:
    """A transport that records what would be sent."""

    def __init__(self, sent: list[str]) -> None:
        self.sent = sent

    async def request(self, verb: str, resource: str, *args: Any, **kwargs: Any) -> dict:
        self.sent.append(resource)
        return {}


class Dropped(WorkloadReconciler):
    """A pass whose first write the fence refuses."""

    def __init__(self, metrics: ReconcilerMetrics) -> None:
        super().__init__(ClusterView(), ApiWriter(Recorder([])), metrics, webhook_lease=None)  # type: ignore[arg-type]

    async def reconcile(self, ref: WorkloadRef) -> float | None:
        raise NotLeading("lost")


def withheld(metrics: ReconcilerMetrics, resource: str) -> float:
    return metrics.writes_withheld.labels(resource, "")._value.get()


class PausedOnTheWay(Recorder):
    """A transport whose process is paused (for 20 s) after the fence and before the
    request leaves."""

    def __init__(self, sent: list[str], clock: Monotonic) -> None:
        super().__init__(sent)
        self.clock = clock

    async def request(self, verb: str, resource: str, *args: Any, **kwargs: Any) -> dict:
        self.clock.now += 20.0
        return await super().request(verb, resource, *args, **kwargs)


async def test_a_write_that_outlived_the_lease_is_counted_and_the_next_is_withheld() -> None:
    server, clock, metrics = LeaseServer(), Monotonic(), reconciler_metrics()
    a = elector(server, "a", clock)
    await a.attempt()
    sent: list[str] = []
    writer = ApiWriter(
        PausedOnTheWay(sent, clock),  # type: ignore[arg-type]
        fence=write_fence(a, metrics.writes_withheld),
        answered=answer_check(a, metrics.writes_outlived, logging.getLogger("test")),
    )
    # The one write the fence cannot hold back: it was checked before the pause.
    await writer.resize(POD, {"app": {"requests": {"cpu": "250m"}}})
    assert sent == ["pods/resize"]
    assert metrics.writes_outlived.labels("pods/resize")._value.get() == 1
    with pytest.raises(NotLeading):
        await writer.evict(POD)
    assert sent == ["pods/resize"]
    assert metrics.writes_outlived.labels("pods/eviction")._value.get() == 0
