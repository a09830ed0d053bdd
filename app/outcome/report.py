"""`kerf report`: what kerf saves, per workload and container, per namespace and for the
whole cluster (the data; kerf/report_table.py and kerf/report_html.py render it).

For every live pod of a workload the view holds, four sums of CPU and memory requests:

- **manifest**: what the workload's template asks for each pod (the requests without kerf;
  a container the template does not name counts at its current value);
- **now**: what the pods request at this moment (what the scheduler reserves);
- **recommended**: what they would request with every selected recommendation as it
  stands, before the guardrails (a container no policy sizes keeps its value);
- **applied**: what kerf's decision sets through the guardrails today (an `apply`
  decision's values, the current ones when the decision is blocked or skipped).

Saved is `manifest − now` (what kerf's changes already freed); reclaimable is
`now − recommended` (what the recommendations free) and `now − applied` (what kerf frees
today). Each is also split, container by container, into what is freed and what is added:
an upsize is a cost with its reason (the container is throttled, was OOM-killed, or its
policy asks more), never a negative saving hidden in a sum. A price per core-hour and per
GiB-hour gives a monthly cost over `HOURS_PER_MONTH`. Bare pods (no workload) are not
counted: nothing sizes them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.decide import PodDecision, decide_pod, read_pod_facts
from app.model.kube_types import PodDict
from app.model.owners import WorkloadRef
from app.model.quantities import parse_resource
from app.model.workloads import Workload, oom_terminations
from app.outcome.explain import path_for
from app.policy.plans import guardrails
from app.store.view import TERMINAL_PHASES, ClusterView

#: 365 × 24 / 12: the month cloud price lists use.
HOURS_PER_MONTH = 730
GIB = 1024**3
STATES = ("manifest", "now", "recommended", "applied")
RESOURCES = ("cpu", "memory")
#: Each comparison's states, before → after: `saved` is what kerf's changes already did,
#: `recommended` and `applied` what the recommendations and kerf's decision would do.
COMPARISONS: dict[str, tuple[str, str]] = {
    "saved": ("manifest", "now"),
    "recommended": ("now", "recommended"),
    "applied": ("now", "applied"),
}
DEFAULT_CURRENCY = "USD"
#: Why a container's recommendation asks more than it has.
THROTTLED = "throttled"
OOM_KILLED = "OOM-killed"


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices per core-hour and per GiB-hour of requested resources, in `currency`."""

    cpu_core_hour: float
    memory_gib_hour: float
    currency: str = DEFAULT_CURRENCY

    def monthly_of(self, millicores: int, memory_bytes: int) -> float:
        """The monthly cost of an amount of CPU and memory."""
        cores, gib = millicores / 1000, memory_bytes / GIB
        return (cores * self.cpu_core_hour + gib * self.memory_gib_hour) * HOURS_PER_MONTH

    def monthly(self, totals: Totals, state: str) -> float:
        """The monthly cost of one state's requests."""
        return self.monthly_of(totals.millicores[state], totals.memory_bytes[state])

    def freed_monthly(self, totals: Totals, comparison: str) -> float:
        """The monthly cost of what a comparison frees (decreases only)."""
        return self.monthly_of(totals.freed[comparison]["cpu"], totals.freed[comparison]["memory"])

    def added_monthly(self, totals: Totals, comparison: str) -> float:
        """The monthly cost of what a comparison adds (increases only)."""
        return self.monthly_of(totals.added[comparison]["cpu"], totals.added[comparison]["memory"])


def _per_comparison() -> dict[str, dict[str, int]]:
    return {c: dict.fromkeys(RESOURCES, 0) for c in COMPARISONS}


@dataclass(slots=True)
class Totals:
    """Requests summed over pods: millicores and bytes for each of `STATES`; and for each
    of `COMPARISONS`, the decreases (`freed`) and increases (`added`) of each container,
    summed apart (millicores for cpu, bytes for memory, each ≥ 0)."""

    pods: int = 0
    millicores: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    memory_bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    freed: dict[str, dict[str, int]] = field(default_factory=_per_comparison)
    added: dict[str, dict[str, int]] = field(default_factory=_per_comparison)

    def add(self, other: Totals) -> None:
        """Add another total into this one."""
        self.pods += other.pods
        for state in STATES:
            self.millicores[state] += other.millicores[state]
            self.memory_bytes[state] += other.memory_bytes[state]
        for comparison in COMPARISONS:
            for resource in RESOURCES:
                self.freed[comparison][resource] += other.freed[comparison][resource]
                self.added[comparison][resource] += other.added[comparison][resource]

    def amount(self, resource: str, state: str) -> int:
        """Millicores (cpu) or bytes (memory) requested in `state`."""
        return self.millicores[state] if resource == "cpu" else self.memory_bytes[state]

    def cores(self, state: str) -> float:
        """CPU requested in `state`, in cores."""
        return self.millicores[state] / 1000

    def gib(self, state: str) -> float:
        """Memory requested in `state`, in GiB."""
        return self.memory_bytes[state] / GIB

    def saved_cores(self) -> float:
        """Cores kerf's changes freed: manifest − now (negative when it added)."""
        return self.cores("manifest") - self.cores("now")

    def saved_gib(self) -> float:
        """GiB kerf's changes freed: manifest − now (negative when it added)."""
        return self.gib("manifest") - self.gib("now")

    def reclaimable_cores(self, state: str = "recommended") -> float:
        """Cores freed going from now to `state` (negative when it asks for more)."""
        return self.cores("now") - self.cores(state)

    def reclaimable_gib(self, state: str = "recommended") -> float:
        """GiB freed going from now to `state` (negative when it asks for more)."""
        return self.gib("now") - self.gib(state)

    def upsized(self, comparison: str = "recommended") -> bool:
        """Whether some container asks more in the comparison's later state."""
        return any(self.added[comparison].values())

    def record(self, resource: str, values: Mapping[str, int]) -> None:
        """One container's amounts of one resource in every state."""
        for state, value in values.items():
            if resource == "cpu":
                self.millicores[state] = value
            else:
                self.memory_bytes[state] = value
        for comparison, (before, after) in COMPARISONS.items():
            change = values[after] - values[before]
            self.added[comparison][resource] = max(change, 0)
            self.freed[comparison][resource] = max(-change, 0)


@dataclass(frozen=True, slots=True)
class ContainerTotals:
    """One container's totals over the workload's pods, and why it asks more where its
    recommendation is an upsize, by resource."""

    name: str
    totals: Totals
    upsizes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WorkloadTotals:
    """One workload's totals, its containers', and why kerf applies nothing where it does
    not: the reason and message of its pods' decisions (the most frequent)."""

    ref: WorkloadRef
    totals: Totals
    containers: tuple[ContainerTotals, ...] = ()
    reason: str | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class Report:
    """Totals per workload (sorted), per namespace and for the cluster."""

    workloads: tuple[WorkloadTotals, ...]
    namespaces: dict[str, Totals]
    cluster: Totals


Requests = Mapping[str, Mapping[str, Mapping[str, int]]]


def _request(values: Mapping[str, Mapping[str, int]] | None, resource: str) -> int:
    return ((values or {}).get("requests") or {}).get(resource) or 0


def _chosen(decision: PodDecision) -> dict[tuple[str, str], int]:
    """Each selected request value, by (container, resource)."""
    chosen: dict[tuple[str, str], int] = {}
    for selected in decision.selected:
        if selected.field == "requests" and selected.resource in RESOURCES:
            key = (selected.container, selected.resource)
            chosen[key] = parse_resource(selected.resource, selected.value)
    return chosen


def _manifest(workload: Workload, container: str, resource: str, current: int) -> int:
    """The template's request (the current one where the template names none)."""
    template = (workload.containers.get(container) or {}).get("requests")
    if template is None:
        return current
    return parse_resource(resource, template[resource]) if resource in template else 0


def container_totals(
    workload: Workload, current: Requests, decision: PodDecision
) -> Iterator[tuple[str, Totals]]:
    """Each container of one pod: its requests by the manifest, now, recommended (the
    selected values in place of its own) and applied (the decision's when it applies)."""
    applied = decision.final if decision.outcome == "apply" else current
    chosen = _chosen(decision)
    for container, values in current.items():
        totals = Totals(pods=1)
        for resource in RESOURCES:
            now = _request(values, resource)
            totals.record(
                resource,
                {
                    "manifest": _manifest(workload, container, resource, now),
                    "now": now,
                    "recommended": chosen.get((container, resource), now),
                    "applied": _request(applied.get(container), resource),
                },
            )
        yield container, totals


def upsize_reason(
    view: ClusterView,
    ref: WorkloadRef,
    pod: PodDict,
    decision: PodDecision,
    container: str,
    resource: str,
) -> str:
    """Why a container's recommendation asks more of a resource than it has: throttled
    (CPU, the row's throttling ratio at or above the policy's rollback threshold),
    OOM-killed (memory, the pod records an OOM kill of it), else the winning policy."""
    selected = next(
        (
            s
            for s in decision.selected
            if (s.container, s.field, s.resource) == (container, "requests", resource)
        ),
        None,
    )
    policy = (
        view.kerf_object(selected.policy_kind, selected.policy_namespace, selected.policy_name)
        if selected is not None
        else None
    )
    if resource == "cpu":
        row = view.recommendations("rows", ref).get(container)
        ratio = row.cpu_throttling_ratio if row is not None else None
        if ratio is not None and ratio >= guardrails(view, policy).throttling_ratio:
            return THROTTLED
    elif any(name == container for name, _ in oom_terminations(pod)):
        return OOM_KILLED
    return f"{selected.policy_kind} {selected.policy_name}" if selected is not None else "policy"


def _live(pod: PodDict) -> bool:
    return (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


def _changes(totals: Totals, comparison: str) -> bool:
    return any(totals.freed[comparison].values()) or any(totals.added[comparison].values())


def workload_totals(view: ClusterView, workload: Workload, now: datetime) -> WorkloadTotals:
    """A workload's totals over its live pods, each decided as `kerf explain` decides it
    (the running path for a pod on a node, admission otherwise), and why a change its
    recommendations ask is not applied: the most frequent reason among those pods'
    decisions, with the first such decision's message."""
    totals = Totals()
    containers: dict[str, Totals] = {}
    upsizes: dict[tuple[str, str], Counter[str]] = {}
    not_applied: Counter[str] = Counter()
    messages: dict[str, str] = {}
    pods = 0
    for pod in view.pods(workload.ref):
        if not _live(pod):
            continue
        pods += 1
        _, current, _ = read_pod_facts(view, pod)
        decision = decide_pod(view, pod, now=now, path=path_for(pod, None))
        wanted = False
        for name, one in container_totals(workload, current, decision):
            totals.add(one)
            containers.setdefault(name, Totals()).add(one)
            wanted = wanted or _changes(one, "recommended")
            for resource in RESOURCES:
                if one.added["recommended"][resource]:
                    why = upsize_reason(view, workload.ref, pod, decision, name, resource)
                    upsizes.setdefault((name, resource), Counter())[why] += 1
        if wanted and decision.outcome != "apply":
            why = decision.reason or decision.outcome
            not_applied[why] += 1
            messages.setdefault(why, decision.message)
    totals.pods = pods  # the sums above counted each container's pods
    reason = not_applied.most_common(1)[0][0] if not_applied else None
    return WorkloadTotals(
        workload.ref,
        totals,
        tuple(
            ContainerTotals(
                name,
                t,
                {
                    r: upsizes[(name, r)].most_common(1)[0][0]
                    for r in RESOURCES
                    if (name, r) in upsizes
                },
            )
            for name, t in sorted(containers.items())
        ),
        reason,
        messages[reason] if reason is not None else "",
    )


def build_report(view: ClusterView, *, now: datetime) -> Report:
    """The report over every live pod of every workload in the view."""
    with view.lock:
        found = [workload_totals(view, workload, now) for workload in view.workloads()]
    return summarize(found)


def summarize(workloads: list[WorkloadTotals]) -> Report:
    """Namespace and cluster sums of per-workload totals."""
    namespaces: dict[str, Totals] = {}
    cluster = Totals()
    ordered = sorted(workloads, key=lambda w: w.ref.key)
    for w in ordered:
        namespaces.setdefault(w.ref.namespace, Totals()).add(w.totals)
        cluster.add(w.totals)
    return Report(
        workloads=tuple(ordered),
        namespaces=dict(sorted(namespaces.items())),
        cluster=cluster,
    )


def _rounded(value: float) -> float:
    return round(value, 3)


def _change_json(per_resource: Mapping[str, int]) -> dict[str, float]:
    return {
        "cpuCores": _rounded(per_resource["cpu"] / 1000),
        "memoryGiB": _rounded(per_resource["memory"] / GIB),
    }


def totals_json(totals: Totals, prices: Prices | None) -> dict[str, Any]:
    """One total as JSON: cores and GiB per state; saved and reclaimable, net and split
    into what the containers free and what they add; monthly costs if priced."""
    body: dict[str, Any] = {
        "pods": totals.pods,
        "cpuCores": {s: _rounded(totals.cores(s)) for s in STATES},
        "memoryGiB": {s: _rounded(totals.gib(s)) for s in STATES},
        "saved": {
            "cpuCores": _rounded(totals.saved_cores()),
            "memoryGiB": _rounded(totals.saved_gib()),
        },
        "reclaimable": {
            s: {
                "cpuCores": _rounded(totals.reclaimable_cores(s)),
                "memoryGiB": _rounded(totals.reclaimable_gib(s)),
            }
            for s in ("recommended", "applied")
        },
        "freed": {c: _change_json(totals.freed[c]) for c in COMPARISONS},
        "added": {c: _change_json(totals.added[c]) for c in COMPARISONS},
    }
    if prices is not None:
        body["monthlyCost"] = {s: round(prices.monthly(totals, s), 2) for s in STATES}
        body["monthlyFreed"] = {c: round(prices.freed_monthly(totals, c), 2) for c in COMPARISONS}
        body["monthlyAdded"] = {c: round(prices.added_monthly(totals, c), 2) for c in COMPARISONS}
    return body


def report_json(report: Report, prices: Prices | None) -> dict[str, Any]:
    """The whole report as JSON (the `-o json` contract)."""
    body: dict[str, Any] = {
        "workloads": [
            {
                "namespace": w.ref.namespace,
                "kind": w.ref.kind,
                "name": w.ref.name,
                **totals_json(w.totals, prices),
                "notApplied": (
                    {"reason": w.reason, "message": w.message} if w.reason is not None else None
                ),
                "containers": [
                    {
                        "name": c.name,
                        **totals_json(c.totals, prices),
                        "upsizeReasons": dict(c.upsizes),
                    }
                    for c in w.containers
                ],
            }
            for w in report.workloads
        ],
        "namespaces": [
            {"namespace": ns, **totals_json(t, prices)} for ns, t in report.namespaces.items()
        ],
        "cluster": totals_json(report.cluster, prices),
    }
    if prices is not None:
        body["prices"] = {
            "currency": prices.currency,
            "cpuCoreHour": prices.cpu_core_hour,
            "memoryGiBHour": prices.memory_gib_hour,
            "hoursPerMonth": HOURS_PER_MONTH,
        }
    return body
