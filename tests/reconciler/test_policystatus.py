"""Rollback policies' counters when sharded: each replica publishes, per bucket it holds
whole, each ClusterRollbackPolicy's counts there (a bucket Lease annotation), and bucket
00's holder writes their sum; a RollbackPolicy is counted by its namespace's holder."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from app.model.annotations import ROLLBACK_STATE
from app.model.crd import parse_object
from app.model.shards import bucket_of
from app.policy.rollback import RollbackState
from app.store.view import ClusterView
from reconciler.policystatus import (
    SharedCounts,
    bucket_counts,
    decode_counts,
    encode_counts,
    summed,
    write_policy_status,
)

BUCKETS = 8
#: buckets 0, 1, 2, 5 and 7 of 8 (`payments` and `ads` share bucket 7)
NAMESPACES = {"mail": 0, "search": 1, "billing": 2, "cart": 5, "payments": 7, "ads": 7}
ROLLBACK_SPEC = {
    "monitoringPeriod": "5m",
    "rollbackTarget": "manifest",
    "adoptionThresholdPercent": 50,
    "backoff": {"timePeriod": "1m", "multiplyByTurn": 2, "maxAttempts": 2},
}


def bucket(namespace: str) -> int:
    return bucket_of(namespace, BUCKETS)


def test_the_bucket_of_each_namespace() -> None:
    assert {ns: bucket(ns) for ns in NAMESPACES} == NAMESPACES


def test_counts_round_trip_through_the_annotation() -> None:
    counts = {
        "all": {"monitoring": 2, "rolledBack": 1, "failedPermanent": 0},
        "quiet": {"monitoring": 0, "rolledBack": 0, "failedPermanent": 0},
    }
    text = encode_counts(counts)
    assert text == '{"all":[2,1,0]}'  # compact, and a policy with none left out
    assert decode_counts(text) == {"all": counts["all"]}
    assert encode_counts({}) == "{}"
    for unreadable in ("", "[1]", "{not json", '{"all": [1, 2]}', '{"all": [1, -1, 0]}'):
        assert decode_counts(unreadable) == {}, unreadable


def test_counts_per_bucket_and_their_sum() -> None:
    monitoring, failed = RollbackState(mode="monitoring"), RollbackState(mode="failedPermanent")
    states = {
        ("ClusterRollbackPolicy", "", "all"): [
            ("mail", monitoring),
            ("payments", failed),
            ("ads", monitoring),
            ("cart", monitoring),
        ],
        # a namespaced policy is no bucket's to publish: its own holder counts it
        ("RollbackPolicy", "mail", "web"): [("mail", failed)],
    }
    counted = bucket_counts(states, bucket, [0, 7, 3])
    assert counted == {
        0: {"all": {"monitoring": 1, "rolledBack": 0, "failedPermanent": 0}},
        7: {"all": {"monitoring": 1, "rolledBack": 0, "failedPermanent": 1}},
        3: {},  # held, nothing governed there: published as such
    }
    notes = [encode_counts(c) for c in counted.values()]
    assert summed([*notes, '{"all":[0,2,0],"other":[1,0,0]}', "unreadable"]) == {
        "all": {"monitoring": 2, "rolledBack": 2, "failedPermanent": 1},
        "other": {"monitoring": 1, "rolledBack": 0, "failedPermanent": 0},
    }


def view_of(namespaces: list[str], mode: str = "failedPermanent") -> ClusterView:
    """A sharded replica's view: the policies, and one governed Deployment in each of
    `namespaces` (those of its buckets)."""
    view = ClusterView()
    scope = {"namespaceSelector": {"operator": "In", "values": ["*"]}}
    view.apply(
        parse_object(
            {
                "apiVersion": "rightsizing.kubex.ai/v1alpha1",
                "kind": "ClusterRollbackPolicy",
                "metadata": {"name": "all", "generation": 3},
                "spec": {"scope": scope, **ROLLBACK_SPEC},
            }
        )
    )
    view.apply(
        parse_object(
            {
                "apiVersion": "rightsizing.kubex.ai/v1alpha1",
                "kind": "RollbackPolicy",
                "metadata": {"name": "own", "namespace": "billing", "generation": 1},
                "spec": {"weight": 100, **ROLLBACK_SPEC},
            }
        )
    )
    for namespace in namespaces:
        labels = {"app": "web"}
        state = orjson.dumps({"mode": mode, "turn": 2}).decode()
        view.apply(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {
                    "name": "web",
                    "namespace": namespace,
                    "annotations": {ROLLBACK_STATE: state},
                },
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "app", "image": "web"}]},
                    },
                },
            }
        )
    return view


class Writer:
    def __init__(self) -> None:
        self.statuses: list[tuple[str, str, str, dict[str, Any]]] = []

    async def patch_status(
        self, namespace: str, name: str, patch: Mapping[str, Any], kind: str = ""
    ) -> Mapping[str, Any]:
        self.statuses.append((kind, namespace, name, dict(patch)))
        return {}


class BucketLeases:
    """The bucket Leases' notes, as the replicas publish them and read them back."""

    def __init__(self) -> None:
        self.notes: dict[int, str] = {}

    def replica(self, counted: set[int]) -> SharedCounts:
        def publish(notes: Mapping[int, str]) -> None:
            self.notes.update(notes)

        return SharedCounts(bucket, counted, publish, lambda: dict(self.notes))


async def test_bucket_00s_holder_writes_the_counts_of_every_bucket() -> None:
    """Two replicas: one holds buckets 0, 1 and 2 (and writes for the cluster), the other
    5 and 7. The ClusterRollbackPolicy counts the workloads of both; the RollbackPolicy
    of `billing` is counted by its own holder, and not in the cluster policy's."""
    leases = BucketLeases()
    first = view_of(["mail", "search", "billing"])
    second = view_of(["cart", "payments", "ads"])
    second_writer = Writer()
    await write_policy_status(
        second,
        second_writer,  # type: ignore[arg-type]
        owns=lambda ns: ns is not None and bucket(ns) in {5, 7},
        shared=leases.replica({5, 7}),
    )
    assert second_writer.statuses == []  # no policy of its own namespaces
    assert leases.notes == {5: '{"all":[0,0,1]}', 7: '{"all":[0,0,2]}'}
    first_writer = Writer()
    await write_policy_status(
        first,
        first_writer,  # type: ignore[arg-type]
        owns=lambda ns: ns is None or bucket(ns) in {0, 1, 2},
        shared=leases.replica({0, 1, 2}),
    )
    counted = {"monitoring": 0, "rolledBack": 0}
    assert sorted(first_writer.statuses) == [
        (
            "ClusterRollbackPolicy",
            "",
            "all",
            {**counted, "failedPermanent": 5, "observedGeneration": 3},
        ),
        (
            "RollbackPolicy",
            "billing",
            "own",
            {**counted, "failedPermanent": 1, "observedGeneration": 1},
        ),
    ]


async def test_a_bucket_not_held_whole_keeps_the_counts_its_lease_carries() -> None:
    """A bucket just gained, whose workloads are not all listed yet: its Lease keeps the
    previous holder's counts, not this replica's partial ones."""
    leases = BucketLeases()
    leases.notes = {5: '{"all":[0,0,1]}', 7: '{"all":[0,0,2]}'}
    writer = Writer()
    await write_policy_status(
        view_of(["mail", "payments"]),  # bucket 7 only partly listed
        writer,  # type: ignore[arg-type]
        owns=lambda ns: ns is None or bucket(ns) == 0,
        shared=leases.replica({0}),
    )
    assert leases.notes[7] == '{"all":[0,0,2]}'
    assert [s[3]["failedPermanent"] for s in writer.statuses] == [4]
