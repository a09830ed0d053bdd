"""The soak's verdicts: plain functions over what the run recorded, each returning its
figures and whether it holds (issue 15 part 7)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.model.quantities import parse_resource
from harness.shardaudit import WORKLOAD_RESOURCES
from kubesim.writes import Write
from soak.observe import containers_of, over_limits
from soak.workloads import Values, workload_of_pod

Obj = dict[str, Any]
#: statuses that say why a workload is not at its policy's values
EXPLAINING_PHASES = frozenset({"Blocked", "Skipped", "Failed", "RolledBack", "RollingBack"})
TRACEBACK = "Traceback (most recent call last)"
#: how many offending lines a failed check prints
SHOWN = 8


@dataclass(frozen=True)
class Check:
    """One verdict: its name, the figures, and the lines that break it."""

    name: str
    ok: bool
    figures: str
    problems: list[str] = field(default_factory=list)


def _matches(container: Obj, expected: Mapping[str, Mapping[str, str]]) -> bool:
    resources = container.get("resources") or {}
    for part, wanted in expected.items():
        have = resources.get(part) or {}
        for resource, value in wanted.items():
            if resource not in have or parse_resource(resource, have[resource]) != (
                parse_resource(resource, value)
            ):
                return False
    return True


def at_values(pod: Obj, expected: Values) -> bool:
    """Every container the policy names runs with the policy's requests and limits."""
    named = {c["name"]: c for c in containers_of(pod)}
    return all(name in named and _matches(named[name], want) for name, want in expected.items())


def why_not(status: Mapping[str, Any]) -> str | None:
    """The reason a workload's status gives for not being at its policy's values: a
    `Blocked` condition that is True (whatever the phase: an earlier change may still be
    live, so `Applied`), or an explaining phase with a reason."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Blocked" and condition.get("status") == "True":
            return str(condition.get("reason") or "") or None
    if status.get("phase") in EXPLAINING_PHASES and status.get("reason"):
        return str(status["reason"])
    return None


def policed_pods(
    pods: Iterable[Obj], expected: Mapping[str, Values], statuses: Mapping[str, Obj]
) -> Check:
    """Every policed pod ends at its policy's values, or its workload's status says why
    not (`why_not`)."""
    total = at = explained = 0
    problems = []
    for pod in pods:
        name = pod["metadata"]["name"]
        workload = workload_of_pod(name)
        if workload not in expected:
            continue
        total += 1
        if at_values(pod, expected[workload]):
            at += 1
            continue
        status = statuses.get(workload) or {}
        if why_not(status) is not None:
            explained += 1
            continue
        problems.append(
            f"{name}: not at its policy's values and its status does not say why "
            f"(phase {status.get('phase')!r}, reason {status.get('reason')!r})"
        )
    figures = f"{total} policed pods: {at} at their policy's values, {explained} explained by "
    figures += f"their status, {len(problems)} neither"
    return Check("policed pods at their values", not problems and total > 0, figures, problems)


def requests_within_limits(pods: Iterable[Obj], seen_during_run: list[str]) -> Check:
    """No pod has a request above its limit, at the end or after any write to a pod."""
    pods = list(pods)
    problems = [f"{p['metadata']['name']}: {x}" for p in pods for x in over_limits(p)]
    problems += [f"during the run: {line}" for line in seen_during_run]
    figures = f"{len(pods)} pods at the end, {len(problems)} requests above their limit "
    figures += f"({len(seen_during_run)} seen after writes during the run)"
    return Check("no request above its limit", not problems, figures, problems)


def events_per_change(
    changes: Mapping[str, set[str]], evictions: Mapping[str, int], events: Iterable[Obj]
) -> Check:
    """One `Resized` event per change made in place (distinct values a workload's pods
    were resized to), one `Evicted` event per eviction: more is a doubled change, fewer a
    lost one."""
    resized: Counter[str] = Counter()
    evicted: Counter[str] = Counter()
    for event in events:
        workload = str((event.get("regarding") or {}).get("name") or "")
        if event.get("reason") == "Resized":
            resized[workload] += 1
        elif event.get("reason") == "Evicted":
            evicted[workload] += 1
    problems = []
    doubled = lost = 0
    for workload in sorted(set(changes) | set(resized)):
        made, told = len(changes.get(workload, ())), resized[workload]
        doubled += max(0, told - made)
        lost += max(0, made - told)
        if made != told:
            problems.append(f"{workload}: {made} changes in place, {told} Resized events")
    for workload in sorted(set(evictions) | set(evicted)):
        made, told = evictions.get(workload, 0), evicted[workload]
        doubled += max(0, told - made)
        lost += max(0, made - told)
        if made != told:
            problems.append(f"{workload}: {made} evictions, {told} Evicted events")
    in_place = sum(len(v) for v in changes.values())
    figures = f"{in_place} changes in place / {sum(resized.values())} Resized events, "
    figures += f"{sum(evictions.values())} evictions / {sum(evicted.values())} Evicted events; "
    figures += f"{doubled} doubled, {lost} lost"
    return Check("one event per change", not problems, figures, problems)


def writes_by_leader(
    writes: Iterable[Write],
    reconcilers: Mapping[str, str],
    lease_of: Callable[[str], str],
    own_namespace: str = "kerf-system",
    cluster_lease: str | None = None,
) -> Check:
    """Every write by a reconciler replica (but its election's own Lease writes, in kerf's
    namespace) was made while the Lease that covers the write's namespace (`lease_of`: the
    leader's, or sharded the namespace's bucket's) named that replica as its holder; a
    report about what every replica keeps (anything but a workload's own objects) may
    also come from the holder of `cluster_lease` (sharded: the cluster bucket's)."""
    total = 0
    by_holder: Counter[str] = Counter()
    problems = []
    per_replica: Counter[str] = Counter()
    for write in writes:
        identity = reconcilers.get(write.user)
        if identity is None:
            continue
        if write.resource == "leases" and write.namespace == own_namespace:
            continue
        total += 1
        lease = lease_of(write.namespace)
        holder = write.lease_holders.get(lease, "")
        reporter = cluster_lease is not None and write.resource not in WORKLOAD_RESOURCES
        if holder == identity or (
            reporter and write.lease_holders.get(str(cluster_lease), "") == identity
        ):
            by_holder[identity] += 1
            continue
        per_replica[identity] += 1
        target = "/".join(x for x in (write.namespace, write.resource, write.name) if x)
        target += f"/{write.subresource}" if write.subresource else ""
        problems.append(
            f"write {write.seq}: {identity} {write.verb} {target} while {holder!r} held {lease}"
        )
    held = sum(by_holder.values())
    figures = f"{total} writes by reconciler replicas: {held} by the Lease holder"
    if by_holder:
        figures += " (" + ", ".join(f"{k}: {v}" for k, v in sorted(by_holder.items())) + ")"
    figures += f", {total - held} by a replica that did not hold it"
    if per_replica:
        figures += " (" + ", ".join(f"{k}: {v}" for k, v in sorted(per_replica.items())) + ")"
    return Check("no write without the Lease", not problems and total > 0, figures, problems)


def evictions_within_budgets(
    evictions: Mapping[str, int], pdb_breaks: list[str], pod_deletes: list[str]
) -> Check:
    """No eviction left a PDB short of healthy pods; kerf never deleted a pod outright."""
    problems = [*pdb_breaks, *pod_deletes]
    figures = f"{sum(evictions.values())} evictions, {len(pdb_breaks)} broke a PDB; "
    figures += f"{len(pod_deletes)} pods deleted by kerf"
    return Check("no eviction breaks a PDB", not problems, figures, problems)


def one_leader(holder: str, leaders: Mapping[str, bool | None]) -> Check:
    """At the end exactly one replica leads, and it is the one the Lease names."""
    leading = sorted(k for k, v in leaders.items() if v)
    silent = sorted(k for k, v in leaders.items() if v is None)
    problems = []
    if leading != [holder]:
        problems.append(f"the Lease names {holder!r}; replicas that say they lead: {leading}")
    problems += [f"{name} does not answer /metrics" for name in silent]
    figures = f"Lease holder {holder!r}; {len(leading)} of {len(leaders)} replicas lead"
    return Check("one leader at the end", not problems, figures, problems)


def buckets_held(
    holders: Mapping[str, str], held: Mapping[str, float | None], at_rest: bool
) -> Check:
    """At the end every bucket Lease (`holders`: Lease → holder) names a replica, the
    buckets are shared out by weight with no move left (`at_rest`,
    `app.model.shards.at_rest`), and each replica's own count of the buckets it holds
    (`held`, from its metrics; None: it did not answer) agrees with the Leases."""
    problems = [f"{lease} has no holder" for lease, h in sorted(holders.items()) if not h]
    counts = Counter(h for h in holders.values() if h)
    problems += [f"{name} holds buckets but is no replica" for name in counts if name not in held]
    for name, told in sorted(held.items()):
        if told is None:
            problems.append(f"{name} does not answer /metrics")
        elif told != counts[name]:
            problems.append(f"{name} says it holds {told:g} buckets, the Leases {counts[name]}")
    if not at_rest:
        problems.append("the buckets are not shared out by weight: a move is left")
    figures = ", ".join(f"{name}: {counts[name]}" for name in sorted(held))
    figures = f"buckets held of {len(holders)}: {figures}"
    return Check("every bucket held once at the end", not problems, figures, problems)


def no_tracebacks(logs: Mapping[str, str]) -> Check:
    """No log holds a traceback."""
    counts = {name: text.count(TRACEBACK) for name, text in logs.items()}
    problems = [f"{name}: {n} tracebacks" for name, n in sorted(counts.items()) if n]
    figures = f"{sum(counts.values())} tracebacks in {len(logs)} logs"
    return Check("no traceback in any log", not problems, figures, problems)
