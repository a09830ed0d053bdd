"""Sharded reconciler replicas on the selected backend (issue 37 part 2), each proven from
the API server's audit log alone (`harness.shardaudit`): the bucket Lease terms from the
Lease writes, each write attributed to its replica by user (a ServiceAccount of its own
per replica) and to a bucket by its namespace.

- no write for a workload is sent by a replica that does not hold its bucket, so no
  workload is written by two replicas within one term;
- a replica killed (SIGKILL) in the middle of its work: its buckets are taken over and its
  workloads converge;
- a replica stopped (SIGSTOP) past its Leases, then resumed: it writes nothing for the
  buckets it lost (but the one window the fence leaves, as for a paused leader:
  tests/e2e/test_pause.py);
- a third replica joining: buckets rebalance, none left unowned longer than one Lease
  duration.

The module has a cluster of its own with no reconciler but the tests' sharded ones:
kubesim in `make test`, the real control plane in `make e2e`."""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

import pytest

from app.model.shards import at_rest, bucket_of, bucket_weights
from harness.audit import read_audit
from harness.install import NAMESPACE, add_account_like
from harness.services import Kerf, Service, running_kerf, start_reconciler
from harness.shardaudit import ShardAudit, describe
from harness.wait import TimedOut, wait_until
from reconciler.defaults import DEFAULT_WORKERS
from tests.e2e.backends import selected_backend
from tests.e2e.scenario import (
    Namespace,
    delete_namespace,
    deployment,
    make_namespace,
    running_requests,
    static_policy,
)

BUCKETS = 8
LEASE_S = 4
ARGS = ("--resync-interval", "10", "--lease-duration", str(LEASE_S), "--shards", str(BUCKETS))
#: Up from the pods' 100m and 128Mi, then up again, small: the nodes' room is shared.
TARGET_A = {"cpu": "150m", "memory": "192Mi"}
TARGET_B = {"cpu": "200m", "memory": "256Mi"}
NAMESPACES = 4
SHARD_SET = "kerf.dev/shard-set=reconciler"
BUCKET_LEASES = f"{SHARD_SET},kerf.dev/shard-role=bucket"
LOG_TAIL = 40
_TESTS = itertools.count(1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kerf]:
    """kerf installed, its webhook running, and no reconciler yet."""
    with (
        selected_backend(tmp_path_factory, "shards") as backend,
        running_kerf(backend, backend.kubeconfig.parent, reconciler=False) as running,
    ):
        yield running


@dataclass
class Shards:
    """One test's sharded replicas, namespaces and audit log."""

    kerf: Kerf
    prefix: str
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    replicas: dict[str, Service] = field(default_factory=dict)
    namespaces: list[Namespace] = field(default_factory=list)

    def start(self, name: str) -> Service:
        """A replica with a ServiceAccount of its own (its writes are told apart by user)."""
        account = f"kerf-reconciler-{self.prefix}-{name}"
        add_account_like(self.kerf.kubectl, "reconciler", account)
        replica = start_reconciler(self.kerf, f"{self.prefix}-{name}", account, ARGS)
        self.replicas[name] = replica
        return replica

    def identity(self, name: str) -> str:
        return f"kerf-{self.replicas[name].name}"  # POD_NAME, as harness.services sets it

    def holders(self) -> dict[int, str]:
        """Each bucket's holder as its Lease names it now ("" for none)."""
        found = self.kerf.kubectl.json("-n", NAMESPACE, "leases", "-l", BUCKET_LEASES)
        holders = {}
        for lease in found["items"]:
            bucket = int(lease["metadata"]["name"].rsplit("-", 1)[1])
            holders[bucket] = str((lease.get("spec") or {}).get("holderIdentity") or "")
        return holders

    def balanced(self, *names: str) -> bool:
        """Every bucket held by one of these replicas, shared by the namespaces in them
        with no move left (app.model.shards.at_rest)."""
        found = self.kerf.kubectl.json("namespaces")
        weights = bucket_weights((ns["metadata"]["name"] for ns in found["items"]), BUCKETS)
        return at_rest(self.holders(), weights, [self.identity(n) for n in names], BUCKETS)

    def workloads(self) -> None:
        """NAMESPACES namespaces in buckets of their own, a Deployment of two pods in each,
        running."""
        for name in spread_names(self.prefix, NAMESPACES):
            ns = make_namespace(self.kerf, name)
            ns.apply(deployment("web"))
            self.namespaces.append(ns)
        for ns in self.namespaces:
            ns.running("web", 2)

    def police(self, target: dict[str, str]) -> None:
        """Each Deployment to `target`, with no cooldown between changes."""
        for ns in self.namespaces:
            ns.apply(static_policy({"app": {"requests": target}}, guardrails={"cooldown": "0s"}))

    def converged(self, target: dict[str, str]) -> bool:
        for ns in self.namespaces:
            pods = ns.pods("web")
            if len(pods) != 2 or any(running_requests(p) != target for p in pods):
                return False
            if ns.status().get("phase") != "Applied":
                return False
        return True

    def converge(self, target: dict[str, str], writer: str) -> None:
        try:
            wait_until(lambda: self.converged(target), "every workload to converge")
        except TimedOut:
            states = {ns.name: ns.status() for ns in self.namespaces}
            tail = "\n".join(self.replicas[writer].text().splitlines()[-LOG_TAIL:])
            pytest.fail(f"not converged: {states}\n{writer}'s log:\n{tail}")

    def bucket(self, ns: Namespace) -> int:
        return bucket_of(ns.name, BUCKETS)

    def busiest(self) -> str:
        """The replica that holds the most of the test's namespaces' buckets."""
        holders = self.holders()
        owned = [holders[self.bucket(ns)] for ns in self.namespaces]
        return max(self.replicas, key=lambda n: owned.count(self.identity(n)))

    def audit(self) -> ShardAudit:
        entries = [e for e in read_audit(self.kerf.backend.audit_log) if e.received >= self.started]
        return ShardAudit(entries, partial(bucket_of, buckets=BUCKETS), NAMESPACE)

    def wrote(self, name: str) -> bool:
        """The replica has sent a write for one of the test's namespaces."""
        audit = self.audit()
        mine = {ns.name for ns in self.namespaces}
        return any(
            writer == self.identity(name) and entry.namespace in mine
            for writer, _, entry in audit.workload_writes()
        )

    def metric(self, name: str, metric: str) -> float:
        """The sum of a replica's metric's samples (0 without any)."""
        lines = self.kerf.metrics(self.replicas[name]).splitlines()
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in lines
            if line.startswith((metric + " ", metric + "{"))
        )


def spread_names(prefix: str, count: int) -> list[str]:
    """`count` namespace names in distinct buckets. The names differ in their first
    character: FNV-1a's top bits, which pick the bucket, hardly change with the last
    characters, so `team-1`, `team-2`, … mostly share one bucket."""
    names: dict[int, str] = {}
    for letter in "abcdefghijklmnopqrstuvwxyz":
        name = f"{letter}-{prefix}"
        names.setdefault(bucket_of(name, BUCKETS), name)
    return sorted(names.values())[:count]


@pytest.fixture
def shards(cluster: Kerf) -> Iterator[Shards]:
    """The test's replicas (stopped after it) and namespaces (deleted after it), and the
    shard set's Leases: a killed replica's would stay, and count as a member for a Lease
    duration in the next test's replicas' eyes."""
    test = Shards(cluster, f"shards-{next(_TESTS)}")
    try:
        yield test
    finally:
        for replica in test.replicas.values():
            if replica.process.poll() is None:
                os.killpg(replica.process.pid, signal.SIGCONT)
            replica.stop()
            cluster.reconcilers.remove(replica)
        cluster.kubectl("-n", NAMESPACE, "delete", "leases", "-l", SHARD_SET)
        for ns in test.namespaces:
            delete_namespace(cluster, ns.name)


def _settled(shards: Shards, *names: str) -> None:
    wait_until(lambda: shards.balanced(*names), f"{', '.join(names)} to share the buckets")


def _no_foreign_writes(audit: ShardAudit) -> None:
    foreign = audit.foreign_writes()
    assert not foreign, f"writes by a replica that did not hold the bucket:\n{describe(foreign)}"
    split = {t: w for t, w in audit.writers_per_term().items() if len(w) > 1}
    assert not split, f"terms written by two replicas: {split}"


def _two_replicas_writing(shards: Shards) -> tuple[str, str]:
    """Two replicas sharing the buckets, the busier (the victim) writing a new target:
    (victim, survivor)."""
    shards.start("r0")
    shards.start("r1")
    _settled(shards, "r0", "r1")
    shards.workloads()
    victim = shards.busiest()
    survivor = next(n for n in shards.replicas if n != victim)
    shards.police(TARGET_A)
    wait_until(lambda: shards.wrote(victim), f"{victim}'s first write")
    return victim, survivor


def test_a_killed_replica_s_buckets_are_taken_over_and_its_workloads_converge(
    shards: Shards,
) -> None:
    victim, survivor = _two_replicas_writing(shards)
    killed = datetime.now(UTC)
    os.killpg(shards.replicas[victim].process.pid, signal.SIGKILL)
    shards.replicas[victim].process.wait()
    _settled(shards, survivor)
    shards.converge(TARGET_A, survivor)
    audit = shards.audit()
    taken = audit.taken_over(shards.identity(victim), killed)
    print(f"{victim} held {sorted(taken)} when killed; now {taken}")
    assert taken and set(taken.values()) == {shards.identity(survivor)}
    _no_foreign_writes(audit)


def test_a_replica_stopped_past_its_leases_writes_nothing_for_the_buckets_it_lost(
    shards: Shards,
) -> None:
    victim, survivor = _two_replicas_writing(shards)
    stopped = datetime.now(UTC)
    os.killpg(shards.replicas[victim].process.pid, signal.SIGSTOP)
    _settled(shards, survivor)
    os.killpg(shards.replicas[victim].process.pid, signal.SIGCONT)
    shards.converge(TARGET_A, survivor)
    _settled(shards, "r0", "r1")  # the resumed replica claims its share again
    audit = shards.audit()
    lost = audit.taken_over(shards.identity(victim), stopped)
    assert lost, f"{victim} held no bucket when it was stopped"
    foreign = audit.foreign_writes()
    late = [w for w in foreign if w.writer == shards.identity(victim)]
    assert [w for w in foreign if w not in late] == []
    # The one window the fence leaves (docs/reconciler.md): a write checked before the
    # stop leaves after it, one per pass under way at most, each counted as outlived.
    outlived = shards.metric(victim, "kerf_reconciler_writes_outlived_lease_total")
    print(f"{victim}: lost {sorted(lost)}, {len(late)} late writes, {outlived:g} outlived")
    assert len(late) <= outlived <= DEFAULT_WORKERS, describe(late)


def test_a_third_replica_takes_its_share_with_no_bucket_unowned_past_a_lease(
    shards: Shards,
) -> None:
    shards.start("r0")
    shards.start("r1")
    _settled(shards, "r0", "r1")
    shards.workloads()
    shards.police(TARGET_A)
    shards.converge(TARGET_A, "r0")
    joined = datetime.now(UTC)
    shards.start("r2")
    _settled(shards, "r0", "r1", "r2")
    shards.police(TARGET_B)
    shards.converge(TARGET_B, "r2")
    audit = shards.audit()
    gaps = audit.unowned_gaps(since=joined)
    print(f"buckets released for r2 and the time each went unowned: {gaps}")
    assert gaps, "no bucket was handed over to the third replica"
    assert all(seconds <= LEASE_S for _, seconds in gaps), gaps
    assert any(t.holder == shards.identity("r2") for t in audit.terms)
    _no_foreign_writes(audit)
