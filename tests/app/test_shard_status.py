"""`kerf status --shards` as rows (kerf/shard_status.py): a line per replica with its
buckets compacted into runs and its member Lease's renewal age, then the expired and the
free buckets, for the reconciler's set and the recommender's."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.model.apitime import micro_time
from app.model.shards import (
    BUCKET,
    MEMBER,
    bucket_lease_name,
    bucket_of,
    member_lease_name,
    shard_labels,
)
from kerf.shard_status import FREE, WEIGHED_HEADER, compact, shard_rows

NOW = datetime(2026, 12, 6, 5, 0, 0, tzinfo=UTC)


def lease(
    name: str, labels: dict[str, str], holder: str, age_s: float | None, duration_s: int = 15
) -> dict[str, Any]:
    spec: dict[str, Any] = {"holderIdentity": holder, "leaseDurationSeconds": duration_s}
    if age_s is not None:
        spec["renewTime"] = micro_time(NOW - timedelta(seconds=age_s))
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": "kerf-system", "labels": labels},
        "spec": spec,
    }


def member(shard_set: str, identity: str, age_s: float, *, holder: str | None = None) -> dict:
    return lease(
        member_lease_name(shard_set, identity),
        shard_labels(shard_set, MEMBER),
        identity if holder is None else holder,
        age_s,
    )


def bucket(shard_set: str, index: int, holder: str, age_s: float, buckets: int = 64) -> dict:
    return lease(
        bucket_lease_name(shard_set, index, buckets),
        shard_labels(shard_set, BUCKET),
        holder,
        age_s,
    )


@pytest.mark.parametrize(
    ("buckets", "text"),
    [
        ([], "-"),
        ([7], "07"),
        (range(16), "00-15"),
        ([*range(16), 32], "00-15,32"),
        ([40, 3, 41, 2, 63], "02-03,40-41,63"),
        ([5, 5, 6], "05-06"),
    ],
)
def test_buckets_are_compacted_into_runs(buckets: list[int], text: str) -> None:
    assert compact(buckets) == text


def test_two_replicas_share_the_buckets_one_line_each() -> None:
    leases = [
        member("reconciler", "kerf-reconciler-b", 0.4),
        member("reconciler", "kerf-reconciler-a", 1.6),
        *(bucket("reconciler", b, "kerf-reconciler-a", 1) for b in [*range(16), *range(32, 48)]),
        *(
            bucket("reconciler", b, "kerf-reconciler-b", 2)
            for b in [*range(16, 32), *range(48, 64)]
        ),
    ]
    assert shard_rows(leases, NOW) == [
        ["reconciler", "kerf-reconciler-a", "32", "00-15,32-47", "2s ago"],
        ["reconciler", "kerf-reconciler-b", "32", "16-31,48-63", "0s ago"],
    ]


def test_a_silent_replica_s_buckets_show_expired_and_released_ones_free() -> None:
    leases = [
        member("reconciler", "a", 1),
        member("reconciler", "gone", 40),
        *(bucket("reconciler", b, "a", 1) for b in range(0, 8)),
        *(bucket("reconciler", b, "gone", 40) for b in (8, 9, 12)),
        bucket("reconciler", 10, "", 3),  # released
        # 11 was never created, 13..15 are held: 11 is free too
        *(bucket("reconciler", b, "a", 2) for b in (13, 14, 15)),
    ]
    assert shard_rows(leases, NOW) == [
        ["reconciler", "a", "11", "00-07,13-15", "1s ago"],
        ["reconciler", "gone", "0", "-", "40s ago, expired"],
        ["reconciler", "(expired)", "3", "08-09,12", "-"],
        ["reconciler", "(free)", "2", "10-11", "-"],
    ]


def test_a_holder_without_a_member_lease_is_shown_and_a_member_that_left_is_not() -> None:
    leases = [
        member("recommender", "old", 3, holder=""),
        bucket("recommender", 0, "new", 1, buckets=2),
        bucket("recommender", 1, "new", 1, buckets=2),
    ]
    assert shard_rows(leases, NOW) == [["recommender", "new", "2", "00-01", "-"]]


def test_the_reconciler_s_set_comes_before_the_recommender_s_and_others_are_left_out() -> None:
    leases = [
        bucket("recommender", 0, "r", 1, buckets=1),
        member("recommender", "r", 1),
        bucket("reconciler", 0, "c", 1, buckets=1),
        member("reconciler", "c", 1),
        lease("kerf-webhook", {}, "kerf-webhook-x", 1),
        lease("other", {"kerf.dev/shard-set": "webhook", "kerf.dev/shard-role": BUCKET}, "x", 1),
        lease("kerf-reconciler-elsewhere", shard_labels("reconciler", BUCKET), "c", 1),
    ]
    assert shard_rows(leases, NOW) == [
        ["reconciler", "c", "1", "00", "1s ago"],
        ["recommender", "r", "1", "00", "1s ago"],
    ]


def test_no_lease_no_row_and_a_never_renewed_member_has_no_age() -> None:
    assert shard_rows([], NOW) == []
    unrenewed = lease(
        member_lease_name("reconciler", "a"), shard_labels("reconciler", MEMBER), "a", None
    )
    assert shard_rows([unrenewed], NOW) == [["reconciler", "a", "0", "-", "-"]]


def test_a_renewal_ahead_of_this_clock_is_no_negative_age() -> None:
    ahead = member("reconciler", "a", -5)
    assert shard_rows([ahead, bucket("reconciler", 0, "a", -5, buckets=1)], NOW) == [
        ["reconciler", "a", "1", "00", "0s ago"]
    ]


def leader(shard_set: str, holder: str, age_s: float) -> dict[str, Any]:
    """The single leader's Lease: `kerf-<set>`, no shard labels (`--shards 1`)."""
    return lease(f"kerf-{shard_set}", {}, holder, age_s)


def test_one_leader_is_one_row_for_every_bucket() -> None:
    assert shard_rows([leader("reconciler", "kerf-reconciler-a", 1)], NOW) == [
        ["reconciler", "kerf-reconciler-a", "all", "(one leader)", "1s ago"]
    ]
    assert shard_rows([leader("recommender", "", 3)], NOW) == [
        ["recommender", "(none)", "all", "(one leader)", "3s ago, left"]
    ]


def test_a_previous_version_s_leader_shows_while_it_is_live_only() -> None:
    sharded = [
        member("reconciler", "new", 1),
        bucket("reconciler", 0, "new", 1, buckets=2),
        bucket("reconciler", 1, "", 1, buckets=2),
    ]
    # The old leader still renews (while it does, the new replicas claim nothing more).
    assert shard_rows([leader("reconciler", "old", 1), *sharded], NOW) == [
        ["reconciler", "old", "all", "(one leader)", "1s ago"],
        ["reconciler", "new", "1", "00", "1s ago"],
        ["reconciler", "(free)", "1", "01", "-"],
    ]
    # Released, or long expired, once the shards run: not shown.
    for stale in (leader("reconciler", "", 1), leader("reconciler", "old", 600)):
        assert shard_rows([stale, *sharded], NOW)[0][1] == "new"


def labelled(role: str, name: str, holder: str, age_s: float | None, buckets: int) -> dict:
    return lease(name, shard_labels("reconciler", role, buckets), holder, age_s)


def test_the_bucket_count_comes_from_the_label() -> None:
    """Buckets never created yet are free up to the count the Leases say, not only up to
    the highest bucket seen."""
    leases = [
        labelled(MEMBER, member_lease_name("reconciler", "a"), "a", 1, 64),
        *(labelled(BUCKET, bucket_lease_name("reconciler", b, 64), "a", 1, 64) for b in range(32)),
    ]
    assert shard_rows(leases, NOW) == [
        ["reconciler", "a", "32", "00-31", "1s ago"],
        ["reconciler", "(free)", "32", "32-63", "-"],
    ]


def test_two_bucket_counts_in_use_are_shown_apart() -> None:
    """`--shards` changing in a rolling update: the old count's replica holds its buckets,
    the new count's holds none; the old count's released Leases left behind by an earlier
    change are not a count in use."""
    leases = [
        labelled(MEMBER, member_lease_name("reconciler", "old"), "old", 1, 4),
        *(labelled(BUCKET, bucket_lease_name("reconciler", b, 4), "old", 1, 4) for b in range(4)),
        labelled(MEMBER, member_lease_name("reconciler", "new"), "new", 0.5, 8),
        labelled(BUCKET, bucket_lease_name("reconciler", 5, 8), "", 60, 2),
    ]
    assert shard_rows(leases, NOW) == [
        ["reconciler (4 buckets)", "old", "4", "00-03", "1s ago"],
        ["reconciler (8 buckets)", "new", "0", "-", "0s ago"],
        ["reconciler (8 buckets)", "(free)", "8", "00-07", "-"],
    ]


def test_rows_say_the_namespaces_of_each_replica_s_buckets() -> None:
    names = [f"team-{i}" for i in range(1000)]
    by_bucket = Counter(bucket_of(n, 64) for n in names)
    a = sorted(by_bucket)[:4]
    leases = [
        lease(member_lease_name("reconciler", "a"), shard_labels("reconciler", MEMBER, 64), "a", 1),
        *(
            lease(
                bucket_lease_name("reconciler", b, 64),
                shard_labels("reconciler", BUCKET, 64),
                "a",
                1,
            )
            for b in a
        ),
    ]
    rows = shard_rows(leases, NOW, names)
    assert rows[0][:4] == ["reconciler", "a", "4", str(sum(by_bucket[b] for b in a))]
    assert rows[1][:4] == ["reconciler", FREE, "60", str(1000 - sum(by_bucket[b] for b in a))]
    assert [len(r) for r in rows] == [len(WEIGHED_HEADER)] * 2
    assert rows[0][4] == compact(a)
