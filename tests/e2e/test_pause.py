"""A paused leader on the selected backend (issue 15 part 6; tests/integration/reconciler/test_pause.py
is its in-process twin on kubesim): the leader is SIGSTOPped in the middle of its work for
longer than its Lease, the other replica takes over, the old leader is SIGCONTed, and the
API server's audit log, by user (each replica runs with a ServiceAccount of its own), shows
that the old leader sent no write after the takeover."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from harness.audit import AuditEntry, read_audit
from harness.install import NAMESPACE, add_account_like, username
from harness.services import Kerf, Service, start_reconciler
from harness.wait import TimedOut, wait_until
from reconciler.defaults import DEFAULT_WORKERS
from tests.e2e.scenario import (
    delete_namespace,
    deployment,
    make_namespace,
    running_requests,
    static_policy,
)

#: Up from the pods' 100m and 128Mi, and small: the e2e cluster's two nodes are shared with
#: the other scenarios' pods, and a node without room blocks an increase.
TARGET = {"cpu": "150m", "memory": "192Mi"}
APPS = [f"app{i}" for i in range(4)]
ACCOUNT = "kerf-reconciler-b"
LEASE = "kerf-reconciler"
NS = "e2e-pause"
#: passes under way at once (each has at most one write in flight)
#: How many lines of the new leader's log a failure shows.
LOG_TAIL = 40
WORKERS = DEFAULT_WORKERS


def _metric(kerf: Kerf, service: Service, name: str) -> float:
    """The sum of a metric's samples (0 when it has none yet)."""
    lines = kerf.metrics(service).splitlines()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith(name + " ") or line.startswith(name + "{")
    )


def _holder(kerf: Kerf) -> str:
    lease = kerf.kubectl.json("-n", NAMESPACE, "lease", LEASE)
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def _identity(service: Service) -> str:
    return f"kerf-{service.name}"  # POD_NAME, as harness.services.spawn sets it


@pytest.fixture
def second(kerf: Kerf) -> Iterator[Service]:
    """A second replica with a ServiceAccount of its own, stopped after the test (the
    session's first replica then leads again, as the later tests expect), and the test's
    namespace deleted (its pods would take the room later tests' resizes need)."""
    add_account_like(kerf.kubectl, "reconciler", ACCOUNT)
    replica = start_reconciler(kerf, "reconciler-paused-test", account=ACCOUNT)
    first = kerf.reconcilers[0]
    try:
        yield replica
    finally:
        for service in kerf.reconcilers:
            if service.process.poll() is None:
                os.killpg(service.process.pid, signal.SIGCONT)
        replica.stop()
        kerf.reconcilers.remove(replica)
        delete_namespace(kerf, NS)
        wait_until(lambda: _metric(kerf, first, "kerf_reconciler_leader") == 1, "the first to lead")


def test_a_leader_resumed_after_the_takeover_writes_nothing_after_its_fence(
    kerf: Kerf, second: Service
) -> None:
    first = kerf.reconcilers[0]
    wait_until(lambda: _holder(kerf) in (_identity(first), _identity(second)), "a leader")
    leader, follower = (first, second) if _holder(kerf) == _identity(first) else (second, first)
    users = {
        first.name: username(kerf.backend, "kerf-reconciler"),
        second.name: username(kerf.backend, ACCOUNT),
    }
    audit = kerf.backend.audit_log
    ns = make_namespace(kerf, NS)
    for app in APPS:
        ns.apply(deployment(app))
    for app in APPS:
        ns.running(app, 2)
    for app in APPS:
        ns.apply(static_policy({"app": {"requests": TARGET}}, app=app, name=app))

    def resized_by_leader() -> bool:
        return any(
            e.user == users[leader.name] and e.subresource == "resize" and e.namespace == ns.name
            for e in read_audit(audit)
        )

    # Paused in the middle of its work: a rollout under way, other workloads still queued.
    wait_until(resized_by_leader, "the leader's first resize")
    os.killpg(leader.process.pid, signal.SIGSTOP)
    wait_until(lambda: _holder(kerf) == _identity(follower), "the follower to take the Lease")

    def takeover() -> AuditEntry | None:
        return next(
            (
                e
                for e in read_audit(audit)
                if e.user == users[follower.name]
                and e.resource == "leases"
                and e.name == LEASE
                and e.code == 200
            ),
            None,
        )

    # The follower writes the Lease only to take it: its first write of it.
    taken = wait_until(takeover, "the takeover in the audit log")
    os.killpg(leader.process.pid, signal.SIGCONT)
    wait_until(lambda: "lost the leader Lease" in leader.text(), "the old leader to notice")

    def converged() -> bool:
        for app in APPS:
            pods = ns.pods(app)
            if len(pods) != 2 or any(running_requests(p) != TARGET for p in pods):
                return False
            if ns.status(f"deployment-{app}").get("phase") != "Applied":
                return False
        return True

    try:
        wait_until(converged, "the new leader to finish every change")
    except TimedOut:
        states = {app: ns.status(f"deployment-{app}") for app in APPS}
        tail = "\n".join(follower.text().splitlines()[-LOG_TAIL:])
        pytest.fail(f"the new leader did not converge: {states}\nits log:\n{tail}")
    entries = read_audit(audit)
    # A Lease update refused for its stale version changes nothing: it is how a candidate
    # that read the Lease before the takeover loses; every other write counts.
    late = [
        e.what
        for e in entries
        if e.user == users[leader.name]
        and e.received > taken.completed
        and not (e.resource == "leases" and e.code == 409)
    ]
    # The one window the fence leaves (docs/reconciler.md, "A paused leader"): a write
    # checked before the pause leaves after it, one per pass under way at most, and the
    # old leader counts each as it hears its answer. Anything beyond is a split brain.
    outlived = _metric(kerf, leader, "kerf_reconciler_writes_outlived_lease_total")
    withheld = _metric(kerf, leader, "kerf_reconciler_writes_withheld_total")
    print(f"old leader: {len(late)} late, {outlived:g} outlived, {withheld:g} withheld")
    assert len(late) <= outlived <= WORKERS, f"the old leader wrote after the takeover: {late}"
    assert any(e.user == users[follower.name] and e.received > taken.completed for e in entries)
    assert _metric(kerf, leader, "kerf_reconciler_leader") == 0
