"""`kerf report`: what kerf saves, per workload, per namespace and for the whole cluster.

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
today). A price per core-hour and per GiB-hour gives a monthly cost over
`HOURS_PER_MONTH`. Bare pods (no workload) are not counted: nothing sizes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.decide import PodDecision, decide_pod
from app.explain import path_for
from app.owners import WorkloadRef
from app.quantities import parse_resource
from app.view import TERMINAL_PHASES, ClusterView
from app.workloads import Workload

#: 365 × 24 / 12: the month cloud price lists use.
HOURS_PER_MONTH = 730
GIB = 1024**3
STATES = ("manifest", "now", "recommended", "applied")


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices per core-hour and per GiB-hour of requested resources."""

    cpu_core_hour: float
    memory_gib_hour: float

    def monthly(self, totals: Totals, state: str) -> float:
        """The monthly cost of one state's requests."""
        cores, gib = totals.cores(state), totals.gib(state)
        return (cores * self.cpu_core_hour + gib * self.memory_gib_hour) * HOURS_PER_MONTH


@dataclass(slots=True)
class Totals:
    """Requests summed over pods: millicores and bytes for each of `STATES`."""

    pods: int = 0
    millicores: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    memory_bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))

    def add(self, other: Totals) -> None:
        """Add another total into this one."""
        self.pods += other.pods
        for state in STATES:
            self.millicores[state] += other.millicores[state]
            self.memory_bytes[state] += other.memory_bytes[state]

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


@dataclass(frozen=True, slots=True)
class WorkloadTotals:
    """One workload's totals."""

    ref: WorkloadRef
    totals: Totals


@dataclass(frozen=True, slots=True)
class Report:
    """Totals per workload (sorted), per namespace and for the cluster."""

    workloads: tuple[WorkloadTotals, ...]
    namespaces: dict[str, Totals]
    cluster: Totals


def _requests(resources: Mapping[str, Mapping[str, Mapping[str, int]]]) -> tuple[int, int]:
    cpu = memory = 0
    for values in resources.values():
        requests = values.get("requests") or {}
        cpu += requests.get("cpu") or 0
        memory += requests.get("memory") or 0
    return cpu, memory


def _recommended(
    current: Mapping[str, Mapping[str, Mapping[str, int]]], decision: PodDecision
) -> tuple[int, int]:
    """Current requests with each selected request value in place of the container's."""
    chosen: dict[tuple[str, str], int] = {}
    for selected in decision.selected:
        if selected.field == "requests" and selected.resource in ("cpu", "memory"):
            key = (selected.container, selected.resource)
            chosen[key] = parse_resource(selected.resource, selected.value)
    cpu = memory = 0
    for container, values in current.items():
        requests = values.get("requests") or {}
        cpu += chosen.get((container, "cpu"), requests.get("cpu") or 0)
        memory += chosen.get((container, "memory"), requests.get("memory") or 0)
    return cpu, memory


def _manifest(
    current: Mapping[str, Mapping[str, Mapping[str, int]]], workload: Workload
) -> tuple[int, int]:
    """The template's requests for the pod's containers (current where it names none)."""
    cpu = memory = 0
    for container, values in current.items():
        requests = values.get("requests") or {}
        template = (workload.containers.get(container) or {}).get("requests")
        if template is None:
            cpu += requests.get("cpu") or 0
            memory += requests.get("memory") or 0
            continue
        cpu += parse_resource("cpu", template["cpu"]) if "cpu" in template else 0
        memory += parse_resource("memory", template["memory"]) if "memory" in template else 0
    return cpu, memory


def pod_totals(
    view: ClusterView, workload: Workload, pod: Mapping[str, Any], now: datetime
) -> Totals:
    """One pod's requests by the manifest, now, recommended and applied (its decision, as
    `kerf explain` makes it: the running path for a pod on a node, admission otherwise)."""
    _, current, _ = view.pod_facts(pod)
    decision = decide_pod(view, pod, now=now, path=path_for(pod, None))
    applied = decision.final if decision.outcome == "apply" else current
    totals = Totals(pods=1)
    for state, (cpu, memory) in (
        ("manifest", _manifest(current, workload)),
        ("now", _requests(current)),
        ("recommended", _recommended(current, decision)),
        ("applied", _requests(applied)),
    ):
        totals.millicores[state] = cpu
        totals.memory_bytes[state] = memory
    return totals


def _live(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


def build_report(view: ClusterView, *, now: datetime) -> Report:
    """The report over every live pod of every workload in the view."""
    by_workload: dict[WorkloadRef, Totals] = {}
    with view.lock:
        for workload in view.workloads():
            totals = Totals()
            for pod in view.pods_of(workload.ref):
                if _live(pod):
                    totals.add(pod_totals(view, workload, pod, now))
            by_workload[workload.ref] = totals
    return summarize(by_workload)


def summarize(by_workload: Mapping[WorkloadRef, Totals]) -> Report:
    """Namespace and cluster sums of per-workload totals."""
    namespaces: dict[str, Totals] = {}
    cluster = Totals()
    ordered = sorted(by_workload.items(), key=lambda item: item[0].key)
    for ref, totals in ordered:
        namespaces.setdefault(ref.namespace, Totals()).add(totals)
        cluster.add(totals)
    return Report(
        workloads=tuple(WorkloadTotals(ref, totals) for ref, totals in ordered),
        namespaces=dict(sorted(namespaces.items())),
        cluster=cluster,
    )


def _rounded(value: float) -> float:
    return round(value, 3)


def totals_json(totals: Totals, prices: Prices | None) -> dict[str, Any]:
    """One total as JSON: cores and GiB per state, reclaimable, monthly cost if priced."""
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
    }
    if prices is not None:
        body["monthlyCost"] = {s: round(prices.monthly(totals, s), 2) for s in STATES}
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
            "cpuCoreHour": prices.cpu_core_hour,
            "memoryGiBHour": prices.memory_gib_hour,
            "hoursPerMonth": HOURS_PER_MONTH,
        }
    return body


def report_rows(report: Report, prices: Prices | None) -> list[list[str]]:
    """Header and one row per workload, per namespace and for the cluster (table, CSV)."""
    header = ["SCOPE", "NAMESPACE", "WORKLOAD", "PODS"]
    for unit in ("CPU", "GIB"):
        header += [f"{unit}_{s.upper()}" for s in STATES]
    header += ["SAVED_CPU", "SAVED_GIB", "RECLAIM_CPU", "RECLAIM_GIB"]
    if prices is not None:
        header += ["COST_MANIFEST", "COST_NOW", "COST_RECOMMENDED", "SAVED_MONTHLY"]
    rows = [header]

    def row(scope: str, namespace: str, name: str, totals: Totals) -> list[str]:
        cells = [scope, namespace, name, str(totals.pods)]
        cells += [f"{totals.cores(s):.3f}" for s in STATES]
        cells += [f"{totals.gib(s):.3f}" for s in STATES]
        cells += [
            f"{totals.saved_cores():.3f}",
            f"{totals.saved_gib():.3f}",
            f"{totals.reclaimable_cores():.3f}",
            f"{totals.reclaimable_gib():.3f}",
        ]
        if prices is not None:
            costs = {s: prices.monthly(totals, s) for s in ("manifest", "now", "recommended")}
            cells += [f"{cost:.2f}" for cost in costs.values()]
            cells.append(f"{costs['manifest'] - costs['now']:.2f}")
        return cells

    for w in report.workloads:
        rows.append(row("workload", w.ref.namespace, f"{w.ref.kind}/{w.ref.name}", w.totals))
    for namespace, totals in report.namespaces.items():
        rows.append(row("namespace", namespace, "", totals))
    rows.append(row("cluster", "", "", report.cluster))
    return rows


def render_table(rows: Iterable[list[str]]) -> str:
    """Rows as aligned columns."""
    rows = list(rows)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines) + "\n"
