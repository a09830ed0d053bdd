"""harness.shardaudit reads bucket Lease terms and foreign writes from audit entries: each
check passes on a sound log and names the offence on a broken one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from harness.audit import AuditEntry
from harness.shardaudit import AuditMismatch, ShardAudit, bucket_lease

T0 = datetime(2026, 1, 1, tzinfo=UTC)
BUCKETS = {"ns-a": 1, "ns-b": 2}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def lease(t: float, user: str, bucket: int, holder: str, code: int = 200) -> AuditEntry:
    name = f"kerf-reconciler-bucket-{bucket:02d}"
    return AuditEntry(
        user, "update", "leases", "", "kerf-system", name, code, at(t), at(t + 0.01), holder
    )


def resize(t: float, user: str, namespace: str, code: int = 200) -> AuditEntry:
    return AuditEntry(user, "patch", "pods", "resize", namespace, "p", code, at(t), at(t + 0.01))


def audit(*entries: AuditEntry) -> ShardAudit:
    return ShardAudit(list(entries), BUCKETS.__getitem__)


def test_bucket_lease_names() -> None:
    assert bucket_lease("kerf-reconciler-bucket-07") == 7
    assert bucket_lease("kerf-reconciler-member-r0") is None
    assert bucket_lease("kerf-reconciler") is None


def test_terms_run_from_a_take_to_the_next_holder_and_renewals_extend_them() -> None:
    log = audit(
        lease(0, "u0", 1, "r0"),
        lease(1, "u0", 1, "r0"),
        lease(2, "u0", 1, ""),  # released
        lease(3, "u1", 1, "r1"),
        lease(4, "u1", 1, "r1", code=409),  # refused: changes nothing
    )
    assert [(t.holder, t.start, t.end, t.released) for t in log.terms] == [
        ("r0", at(0.01), at(2), True),
        ("r1", at(3.01), None, False),
    ]
    assert log.identities == {"u0": "r0", "u1": "r1"}
    assert log.holders_at(at(2.5)) == {}
    assert log.unowned_gaps() == [(1, pytest.approx(1.01))]


def test_writes_within_the_writer_s_own_terms_are_not_foreign() -> None:
    log = audit(
        lease(0, "u0", 1, "r0"),
        lease(0, "u1", 2, "r1"),
        resize(1, "u0", "ns-a"),
        resize(1, "u1", "ns-b"),
        lease(2, "u0", 1, ""),
        lease(2.5, "u1", 1, "r1"),
        resize(3, "u1", "ns-a"),
    )
    assert log.foreign_writes() == []
    assert log.writes_per_holder() == {"r0": 1, "r1": 2}
    assert all(len(writers) == 1 for writers in log.writers_per_term().values())


def test_a_write_after_the_bucket_was_taken_over_is_foreign() -> None:
    log = audit(
        lease(0, "u0", 1, "r0"),
        lease(1, "u1", 2, "r1"),
        lease(5, "u1", 1, "r1"),  # r0 stopped renewing: taken over
        resize(6, "u0", "ns-a"),  # r0 resumed and wrote
        resize(6.5, "u1", "ns-a"),
    )
    [foreign] = log.foreign_writes()
    assert (foreign.writer, foreign.bucket, foreign.holder) == ("r0", 1, "r1")
    assert "bucket 1 held by r1" in str(foreign)
    assert log.taken_over("r0", at(1)) == {1: "r1"}
    split = [t for t, writers in log.writers_per_term().items() if len(writers) > 1]
    assert [(t.bucket, t.holder) for t in split] == [(1, "r1")]


def test_a_write_before_any_hold_is_foreign_and_since_leaves_earlier_ones_out() -> None:
    log = audit(resize(0, "u0", "ns-a"), lease(1, "u0", 1, "r0"), resize(2, "u0", "ns-a"))
    assert [w.holder for w in log.foreign_writes()] == [None]
    assert log.foreign_writes(since=at(1)) == []


def test_writes_for_no_namespace_belong_to_the_cluster_bucket() -> None:
    policy = AuditEntry("u1", "patch", "clusterthings", "status", "", "x", 200, at(2), at(2))
    log = audit(lease(0, "u0", 0, "r0"), lease(0, "u1", 1, "r1"), policy)
    assert [(w.writer, w.bucket, w.holder) for w in log.foreign_writes()] == [("r1", 0, "r0")]


def test_one_user_for_two_replicas_is_refused() -> None:
    with pytest.raises(AuditMismatch, match="a user of its own"):
        audit(lease(0, "u0", 1, "r0"), lease(0, "u0", 2, "r1"))


def test_the_cluster_bucket_s_holder_may_report_in_any_namespace_but_not_write_workloads() -> None:
    def event(t: float, user: str) -> AuditEntry:
        return AuditEntry(user, "create", "events", "", "ns-a", "e", 201, at(t), at(t))

    log = audit(
        lease(0, "u0", 0, "r0"),
        lease(0, "u1", 1, "r1"),
        event(1, "u0"),  # a policy's Event in ns-a, by the cluster bucket's holder
        event(1, "u1"),  # a workload's Event, by ns-a's bucket holder
        resize(2, "u0", "ns-a"),
    )
    assert [(w.writer, w.entry.resource) for w in log.foreign_writes()] == [("r0", "pods")]
    assert log.writes_per_holder() == {"r0": 1, "r1": 1}
