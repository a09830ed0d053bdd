"""The soak's checks judge what they are given: each passes on a sound record and fails,
naming the offence, on a broken one."""

from __future__ import annotations

from typing import Any

from kubesim.writes import Write
from soak import checks
from soak.workloads import PHASE_B

LEASE = "kerf-system/kerf-reconciler"
TOKENS = {"t0": "r0", "t1": "r1"}


def the_lease(namespace: str) -> str:
    return LEASE  # one leader: every namespace's writer holds the one Lease


def pod(name: str, requests: dict[str, str], limits: dict[str, str]) -> dict[str, Any]:
    resources = {"requests": requests, "limits": limits}
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "resources": resources}]},
    }


def write(
    seq: int, user: str, holder: str, resource: str = "pods", name: str = "p", ns: str = "soak"
) -> Write:
    return Write(seq, "patch", "", resource, ns, name, "resize", user, 200, {LEASE: holder})


def test_policed_pods_at_values_pass_with_equal_quantities_in_another_form() -> None:
    at = pod("web-abc-1", {"cpu": "0.2", "memory": "256Mi"}, {"cpu": "600m", "memory": "768Mi"})
    verdict = checks.policed_pods([at], {"web": {"app": PHASE_B}}, {})
    assert verdict.ok and verdict.figures.startswith("1 policed pods: 1 at")


def test_a_pod_off_its_values_needs_a_status_that_says_why() -> None:
    off = pod("web-abc-1", {"cpu": "100m", "memory": "128Mi"}, {"cpu": "400m", "memory": "512Mi"})
    expected = {"web": {"app": PHASE_B}}
    assert not checks.policed_pods([off], expected, {"web": {"phase": "Applied"}}).ok
    blocked = {"web": {"phase": "Blocked", "reason": "SingleReplicaUnsafe"}}
    assert checks.policed_pods([off], expected, blocked).ok
    # An earlier change still live keeps the phase Applied; the condition says why.
    condition = {"type": "Blocked", "status": "True", "reason": "SingleReplicaUnsafe"}
    live = {"web": {"phase": "Applied", "conditions": [condition]}}
    assert checks.policed_pods([off], expected, live).ok
    cleared = {"web": {"phase": "Applied", "conditions": [{**condition, "status": "False"}]}}
    assert not checks.policed_pods([off], expected, cleared).ok


def test_no_policed_pod_at_all_fails() -> None:
    assert not checks.policed_pods([], {"web": {"app": PHASE_B}}, {}).ok


def test_a_request_above_its_limit_fails_at_the_end_or_during_the_run() -> None:
    bad = pod("web-abc-1", {"cpu": "1"}, {"cpu": "500m"})
    good = pod("web-abc-2", {"cpu": "500m"}, {"cpu": "1"})
    assert checks.requests_within_limits([good], []).ok
    verdict = checks.requests_within_limits([bad, good], [])
    assert not verdict.ok and "cpu request 1 > limit 500m" in verdict.problems[0]
    assert not checks.requests_within_limits([good], ["web-abc-3 after patch: …"]).ok


def event(reason: str, workload: str) -> dict[str, Any]:
    return {"reason": reason, "regarding": {"name": workload}}


def test_one_event_per_change_counts_doubled_and_lost() -> None:
    changes = {"web": {"a", "b"}}
    evictions = {"api": 1}
    sound = [event("Resized", "web"), event("Resized", "web"), event("Evicted", "api")]
    assert checks.events_per_change(changes, evictions, sound).ok
    doubled = checks.events_per_change(changes, evictions, [*sound, event("Evicted", "api")])
    assert not doubled.ok and "1 doubled, 0 lost" in doubled.figures
    lost = checks.events_per_change(changes, evictions, sound[1:])
    assert not lost.ok and "0 doubled, 1 lost" in lost.figures


def test_writes_by_a_replica_that_does_not_hold_the_lease_fail() -> None:
    held = [write(0, "t0", "r0"), write(1, "t1", "r1"), write(2, "other", "r0")]
    verdict = checks.writes_by_leader(held, TOKENS, the_lease)
    assert verdict.ok and verdict.figures.startswith("2 writes")
    stale = checks.writes_by_leader([*held, write(3, "t0", "r1")], TOKENS, the_lease)
    assert not stale.ok and "1 by a replica that did not hold it (r0: 1)" in stale.figures


def test_election_writes_to_the_lease_itself_are_not_counted() -> None:
    takeover = write(0, "t1", "r0", "leases", "kerf-reconciler", "kerf-system")
    verdict = checks.writes_by_leader([takeover, write(1, "t1", "r1")], TOKENS, the_lease)
    assert verdict.ok and verdict.figures.startswith("1 writes")


def test_sharded_each_write_is_judged_by_the_lease_of_its_namespace_s_bucket() -> None:
    buckets = {
        "a": "kerf-system/kerf-reconciler-bucket-01",
        "b": "kerf-system/kerf-reconciler-bucket-02",
    }
    holders = {buckets["a"]: "r0", buckets["b"]: "r1"}

    def sharded(seq: int, user: str, ns: str) -> Write:
        return Write(seq, "patch", "", "pods", ns, "p", "resize", user, 200, holders)

    sound = [sharded(0, "t0", "a"), sharded(1, "t1", "b"), sharded(2, "t1", "b")]
    verdict = checks.writes_by_leader(sound, TOKENS, buckets.__getitem__)
    assert verdict.ok and "by the Lease holder (r0: 1, r1: 2)" in verdict.figures
    crossed = checks.writes_by_leader([*sound, sharded(3, "t0", "b")], TOKENS, buckets.__getitem__)
    report = Write(4, "create", "", "events", "b", "e", "", "t0", 201, holders)
    assert checks.writes_by_leader(
        [*sound, report], TOKENS, buckets.__getitem__, cluster_lease=buckets["a"]
    ).ok
    assert not crossed.ok
    assert crossed.problems == [
        "write 3: r0 patch b/pods/p/resize while 'r1' held kerf-system/kerf-reconciler-bucket-02"
    ]


def test_every_bucket_held_once_at_rest_by_replicas_that_agree() -> None:
    holders = {"l0": "r0", "l1": "r1", "l2": "r0"}
    assert checks.buckets_held(holders, {"r0": 2, "r1": 1}, True).ok
    assert not checks.buckets_held({**holders, "l3": ""}, {"r0": 2, "r1": 1}, True).ok
    assert not checks.buckets_held(holders, {"r0": 2, "r1": 1}, False).ok
    assert not checks.buckets_held(holders, {"r0": 3, "r1": 1}, True).ok
    assert not checks.buckets_held(holders, {"r0": 2, "r1": None}, True).ok
    assert not checks.buckets_held({**holders, "l3": "gone"}, {"r0": 2, "r1": 1}, True).ok


def test_pdb_breaks_and_pod_deletions_fail() -> None:
    assert checks.evictions_within_budgets({"api": 2}, [], []).ok
    assert not checks.evictions_within_budgets({"api": 2}, ["eviction of …"], []).ok
    assert not checks.evictions_within_budgets({}, [], ["r0 deleted web-abc-1"]).ok


def test_one_leader_is_the_lease_holder_and_every_replica_answers() -> None:
    assert checks.one_leader("r0", {"r0": True, "r1": False}).ok
    assert not checks.one_leader("r0", {"r0": True, "r1": True}).ok
    assert not checks.one_leader("r1", {"r0": True, "r1": False}).ok
    assert not checks.one_leader("r0", {"r0": True, "r1": None}).ok


def test_a_traceback_in_any_log_fails() -> None:
    assert checks.no_tracebacks({"a": "fine\n", "b": ""}).ok
    verdict = checks.no_tracebacks({"a": "x\nTraceback (most recent call last):\n  …"})
    assert not verdict.ok and verdict.problems == ["a: 1 tracebacks"]
