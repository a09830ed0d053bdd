"""RollbackPolicy and ClusterRollbackPolicy `status`: how many of the workloads each
governs are monitoring, rolled back (rollingBack or backingOff) and failed permanently.

Sharded, a replica keeps only its buckets' workloads, and a ClusterRollbackPolicy governs
workloads of every bucket. So each replica counts each ClusterRollbackPolicy over each
bucket it holds and publishes those counts on the bucket's Lease (`ROLLBACK_COUNTS`, carried
by its renewals); bucket 00's holder, which writes the cluster's status, sums them over
every bucket Lease (`SharedCounts`). A RollbackPolicy governs its own namespace only: its
bucket's holder counts it whole."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from app.model.crd import RollbackPolicy
from app.policy.plans import policies_for
from app.policy.rollback import RollbackState, rollback_state
from app.policy.rollback_monitor import policy_counts, rollback_policy_for
from app.policy.sync import ROLLBACK_KINDS
from app.store.view import ClusterView
from reconciler.api import Writer

PolicyKey = tuple[str, str, str]
#: a policy's counters, by status field
Counts = dict[str, int]
COUNTERS = ("monitoring", "rolledBack", "failedPermanent")
CLUSTER_KIND = "ClusterRollbackPolicy"
#: A bucket Lease's annotation: compact JSON of each ClusterRollbackPolicy's counters over
#: the bucket's workloads, `{"<policy>": [monitoring, rolledBack, failedPermanent]}`, the
#: policies with none left out.
ROLLBACK_COUNTS = "kerf.dev/rollback-counts"


@dataclass(frozen=True, slots=True)
class SharedCounts:
    """A sharded replica's part in the ClusterRollbackPolicies' counters (the bucket
    Leases' notes, `app.kube.shardleases.ShardLeases`)."""

    #: a namespace's bucket
    bucket: Callable[[str], int]
    #: the buckets whose workloads this replica's view holds whole now
    counted: Collection[int]
    #: what this replica's bucket Leases carry from their next renewal
    publish: Callable[[Mapping[int, str]], None]
    #: every bucket's counts as last read (this replica's own for the buckets it holds)
    notes: Callable[[], Mapping[int, str]]


def governed_states(view: ClusterView) -> dict[PolicyKey, list[tuple[str, RollbackState]]]:
    """The rollback states of the workloads each rollback policy governs, each with the
    workload's namespace."""
    states: dict[PolicyKey, list[tuple[str, RollbackState]]] = {}
    for workload in view.workloads():
        policy = rollback_policy_for(workload, policies_for(view, workload))
        if policy is None:
            continue
        key = (policy.kind, policy.metadata.namespace or "", policy.metadata.name)
        state = rollback_state(view, workload)
        states.setdefault(key, [])
        if state is not None:
            states[key].append((workload.namespace, state))
    return states


def encode_counts(counts: Mapping[str, Mapping[str, int]]) -> str:
    """`ROLLBACK_COUNTS`' value: each policy's counters, those with none left out."""
    compact = {
        name: row
        for name in sorted(counts)
        if any(row := [int(counts[name].get(c, 0)) for c in COUNTERS])
    }
    return orjson.dumps(compact).decode()


def decode_counts(text: str) -> dict[str, Counts]:
    """The counters `encode_counts` wrote; what cannot be read counts nothing (a Lease
    written by another version, or by hand)."""
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(raw, dict):
        return {}
    return {
        str(name): dict(zip(COUNTERS, row, strict=True))
        for name, row in raw.items()
        if isinstance(row, list)
        and len(row) == len(COUNTERS)
        and all(isinstance(n, int) and n >= 0 for n in row)
    }


def bucket_counts(
    states: Mapping[PolicyKey, Iterable[tuple[str, RollbackState]]],
    bucket: Callable[[str], int],
    buckets: Iterable[int],
) -> dict[int, dict[str, Counts]]:
    """Each ClusterRollbackPolicy's counters over the workloads of each of `buckets`."""
    by_bucket: dict[int, dict[str, list[RollbackState]]] = {b: {} for b in buckets}
    for (kind, _, name), governed in states.items():
        if kind != CLUSTER_KIND:
            continue
        for namespace, state in governed:
            found = by_bucket.get(bucket(namespace))
            if found is not None:
                found.setdefault(name, []).append(state)
    return {
        b: {name: policy_counts(found) for name, found in policies.items()}
        for b, policies in by_bucket.items()
    }


def summed(notes: Iterable[str]) -> dict[str, Counts]:
    """Each ClusterRollbackPolicy's counters summed over the buckets' notes."""
    total: dict[str, Counts] = {}
    for text in notes:
        for name, counts in decode_counts(text).items():
            into = total.setdefault(name, dict.fromkeys(COUNTERS, 0))
            for counter in COUNTERS:
                into[counter] += counts[counter]
    return total


def share_counts(
    states: Mapping[PolicyKey, Iterable[tuple[str, RollbackState]]], shared: SharedCounts
) -> dict[str, Counts]:
    """Publish this replica's counts of the buckets it holds whole, and return the
    ClusterRollbackPolicies' counters over every bucket."""
    counted = bucket_counts(states, shared.bucket, shared.counted)
    shared.publish({b: encode_counts(counts) for b, counts in counted.items()})
    return summed(shared.notes().values())


def rollback_policies(view: ClusterView) -> Iterator[RollbackPolicy]:
    """Every rollback policy of the view."""
    for kind in ROLLBACK_KINDS:
        yield from (p for p in view.kerf_objects(kind) if isinstance(p, RollbackPolicy))


async def write_policy_status(
    view: ClusterView,
    writer: Writer,
    *,
    owns: Callable[[str | None], bool] = lambda ns: True,
    shared: SharedCounts | None = None,
) -> int:
    """Write the counters of every rollback policy whose status differs and whose
    namespace this replica `owns` (None: a cluster policy); returns the number of writes
    (0 in a steady cluster). `shared` (sharded): the ClusterRollbackPolicies' counters
    are shared through the bucket Leases."""
    states = governed_states(view)
    cluster = share_counts(states, shared) if shared is not None else None
    writes = 0
    for policy in rollback_policies(view):
        key = (policy.kind, policy.metadata.namespace or "", policy.metadata.name)
        if not owns(key[1] or None):
            continue
        if cluster is not None and policy.kind == CLUSTER_KIND:
            counts = cluster.get(key[2]) or dict.fromkeys(COUNTERS, 0)
        else:
            counts = policy_counts(state for _, state in states.get(key, ()))
        wanted: dict[str, Any] = {
            "monitoring": counts["monitoring"],
            "rolledBack": counts["rolledBack"],
            "failedPermanent": counts["failedPermanent"],
            "observedGeneration": policy.metadata.generation or 1,
        }
        status = policy.status
        have = (
            {
                "monitoring": status.monitoring,
                "rolledBack": status.rolled_back,
                "failedPermanent": status.failed_permanent,
                "observedGeneration": status.observed_generation,
            }
            if status is not None
            else {}
        )
        if have != wanted:
            await writer.patch_status(key[1], key[2], wanted, kind=policy.kind)
            writes += 1
    return writes
