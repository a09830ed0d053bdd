"""`kerf report` as text: the table (120 columns; `-o wide` adds the rest), CSV and
Markdown, from app/outcome/report.py's data.

Amounts are in kubectl's notation (`800m`, `1.5`, `512Mi`, `2.25Gi`); a change is freed or
added, never a negative number; money carries the currency's label in its header.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.outcome.report import (
    GIB,
    HOURS_PER_MONTH,
    RESOURCES,
    STATES,
    ContainerTotals,
    Prices,
    Report,
    Totals,
    WorkloadTotals,
)

#: The default table's width.
TABLE_WIDTH = 120
MIB = 1024**2
ELLIPSIS = "…"
NONE = "-"


def _trimmed(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def format_cpu(millicores: int) -> str:
    """Millicores below a core (`800m`), cores above (`1.5`, two decimals at most)."""
    if millicores < 1000:
        return f"{millicores}m"
    return _trimmed(millicores / 1000)


def format_memory(memory_bytes: int) -> str:
    """Whole MiB below a GiB (`512Mi`), GiB above (`2.25Gi`, two decimals at most)."""
    if memory_bytes == 0:
        return "0"
    if memory_bytes < GIB:
        return f"{max(1, round(memory_bytes / MIB))}Mi"
    return _trimmed(memory_bytes / GIB) + "Gi"


def format_amount(resource: str, amount: int) -> str:
    """One resource's amount in kubectl's notation."""
    return format_cpu(amount) if resource == "cpu" else format_memory(amount)


def states(totals: Totals, resource: str, names: Sequence[str], arrow: str = " → ") -> str:
    """`800m → 500m → 500m`: the resource's amount in each named state."""
    return arrow.join(format_amount(resource, totals.amount(resource, s)) for s in names)


def change(per_resource: dict[str, int], sign: str = "") -> str:
    """`300m 512Mi`: the non-zero amounts of a change, `-` when there is none."""
    parts = [sign + format_amount(r, per_resource[r]) for r in RESOURCES if per_resource[r] > 0]
    return " ".join(parts) or NONE


def money(value: float) -> str:
    """A monthly amount with two decimals, `-` for nothing."""
    return f"{value:.2f}" if round(value, 2) > 0 else NONE


def upsize_reasons(containers: Iterable[ContainerTotals]) -> str:
    """Why the containers ask more: `throttled`, `OOM-killed`, …, once each (a workload's
    container rows say which container)."""
    found = dict.fromkeys(r for c in containers for r in c.upsizes.values())
    return ", ".join(found)


@dataclass(frozen=True, slots=True)
class Line:
    """One row of the report: a workload, one of its containers, a namespace's or the
    cluster's totals."""

    scope: str
    namespace: str
    workload: str
    container: str
    totals: Totals
    upsize_reason: str = ""
    not_applied: str = ""
    message: str = ""


def lines(report: Report, *, containers: str = "several") -> list[Line]:
    """Every row in order: each workload then its containers (`all`, only when it has
    `several`, or `none`), then each namespace, then the cluster."""
    found: list[Line] = []
    for w in report.workloads:
        found.append(_workload_line(w))
        if containers == "all" or (containers == "several" and len(w.containers) > 1):
            found.extend(
                Line(
                    "container",
                    w.ref.namespace,
                    f"{w.ref.kind}/{w.ref.name}",
                    c.name,
                    c.totals,
                    upsize_reasons([c]),
                )
                for c in w.containers
            )
    found.extend(Line("namespace", ns, "", "", t) for ns, t in report.namespaces.items())
    found.append(Line("cluster", "", "", "", report.cluster))
    return found


def _workload_line(w: WorkloadTotals) -> Line:
    return Line(
        "workload",
        w.ref.namespace,
        f"{w.ref.kind}/{w.ref.name}",
        "",
        w.totals,
        # Several containers: their rows follow, each with its own reason.
        upsize_reasons(w.containers) if len(w.containers) == 1 else "",
        w.reason or "",
        w.message,
    )


def _name(line: Line) -> str:
    if line.scope == "container":
        return f"  {line.container}"
    if line.scope == "namespace":
        return "(namespace)"
    if line.scope == "cluster":
        return "(cluster)"
    return line.workload


def _upsize(line: Line, prices: Prices | None) -> str:
    added = (
        money(prices.added_monthly(line.totals, "recommended"))
        if prices is not None
        else change(line.totals.added["recommended"], "+")
    )
    if added == NONE:
        return added
    return f"{added} {line.upsize_reason}".rstrip()


def table_rows(report: Report, prices: Prices | None, *, wide: bool = False) -> list[list[str]]:
    """The table's header and rows: per workload now → recommended → applied, what the
    recommendations free and add (with why), and why nothing is applied; `wide` adds the
    manifest, what kerf saved so far, what it frees today, the costs and the message."""
    unit = f" {prices.currency}/MO" if prices is not None else ""
    header = ["NAMESPACE", "WORKLOAD", "PODS", "CPU NOW→REC→APPLIED", "MEM NOW→REC→APPLIED"]
    header += [f"RECLAIM{unit}", f"UPSIZE{unit}", "NOT APPLIED"]
    if wide:
        header += ["CPU MANIFEST", "MEM MANIFEST", f"SAVED{unit}", f"RAISED{unit}"]
        header += [f"RECLAIM APPLIED{unit}"]
        if prices is not None:
            header += [f"COST NOW{unit}", f"COST REC{unit}"]
        header += ["MESSAGE"]
    rows = [header]
    for line in lines(report, containers="all" if wide else "several"):
        t = line.totals
        names = ("now", "recommended", "applied")
        cells = [line.namespace or NONE, _name(line), str(t.pods)]
        cells += [states(t, "cpu", names, "→"), states(t, "memory", names, "→")]
        cells += [_freed(t, "recommended", prices), _upsize(line, prices)]
        cells += [line.not_applied or NONE]
        if wide:
            cells += [
                format_cpu(t.millicores["manifest"]),
                format_memory(t.memory_bytes["manifest"]),
            ]
            cells += [_freed(t, "saved", prices), _added(t, "saved", prices)]
            cells += [_freed(t, "applied", prices)]
            if prices is not None:
                cells += [money(prices.monthly(t, "now")), money(prices.monthly(t, "recommended"))]
            cells += [line.message or NONE]
        rows.append(cells)
    return rows


def _freed(totals: Totals, comparison: str, prices: Prices | None) -> str:
    if prices is not None:
        return money(prices.freed_monthly(totals, comparison))
    return change(totals.freed[comparison])


def _added(totals: Totals, comparison: str, prices: Prices | None) -> str:
    if prices is not None:
        return money(prices.added_monthly(totals, comparison))
    return change(totals.added[comparison], "+")


#: The default table's columns that give way when it is too wide, each down to a floor:
#: the names and the reasons are cut with an ellipsis; the amounts never are.
SHRINKABLE = {1: 16, 7: 8, 0: 8, 6: 8}


def render_table(rows: Sequence[Sequence[str]], width: int | None = None) -> str:
    """Rows as aligned columns; with `width`, the `SHRINKABLE` columns are cut (with `…`)
    until every line fits."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    if width is not None:
        _fit(rows, widths, width)
    text = []
    for row in rows:
        cells = [_cut(cell, w).ljust(w) for cell, w in zip(row, widths, strict=True)]
        text.append("  ".join(cells).rstrip())
    return "\n".join(text) + "\n"


def _fit(rows: Sequence[Sequence[str]], widths: list[int], width: int) -> None:
    floor = {i: max(len(rows[0][i]), least) for i, least in SHRINKABLE.items()}
    while sum(widths) + 2 * (len(widths) - 1) > width:
        candidates = [i for i in SHRINKABLE if widths[i] > floor[i]]
        if not candidates:
            return
        widest = max(candidates, key=lambda i: widths[i] - floor[i])
        widths[widest] -= 1


def _cut(cell: str, width: int) -> str:
    return cell if len(cell) <= width else cell[: width - 1] + ELLIPSIS


def csv_rows(report: Report, prices: Prices | None) -> list[list[str]]:
    """One row per workload, container, namespace and cluster, in plain numbers (cores,
    GiB, money per month): what kerf saved and raised so far, what the recommendations
    reclaim and add (upsize), each ≥ 0, and the currency on every priced row."""
    header = ["SCOPE", "NAMESPACE", "WORKLOAD", "CONTAINER", "PODS"]
    for unit in ("CPU", "GIB"):
        header += [f"{unit}_{s.upper()}" for s in STATES]
    changes = {"SAVED": ("freed", "saved"), "RAISED": ("added", "saved")}
    changes |= {"RECLAIM": ("freed", "recommended"), "UPSIZE": ("added", "recommended")}
    for name in changes:
        header += [f"{name}_CPU", f"{name}_GIB"]
    header += ["UPSIZE_REASON", "NOT_APPLIED"]
    if prices is not None:
        header += ["CURRENCY", "COST_MANIFEST", "COST_NOW", "COST_RECOMMENDED"]
        header += [f"{name}_MONTHLY" for name in changes]
    rows = [header]
    for line in lines(report, containers="all"):
        t = line.totals
        cells = [line.scope, line.namespace, line.workload, line.container, str(t.pods)]
        cells += [f"{t.cores(s):.3f}" for s in STATES]
        cells += [f"{t.gib(s):.3f}" for s in STATES]
        for side, comparison in changes.values():
            amounts = (t.freed if side == "freed" else t.added)[comparison]
            cells += [f"{amounts['cpu'] / 1000:.3f}", f"{amounts['memory'] / GIB:.3f}"]
        cells += [line.upsize_reason, line.not_applied]
        if prices is not None:
            cells += [prices.currency]
            cells += [f"{prices.monthly(t, s):.2f}" for s in ("manifest", "now", "recommended")]
            for side, comparison in changes.values():
                cost = (prices.freed_monthly if side == "freed" else prices.added_monthly)(
                    t, comparison
                )
                cells.append(f"{cost:.2f}")
        rows.append(cells)
    return rows


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|") or " "


def _markdown_table(rows: Sequence[Sequence[str]], numeric: Iterable[int]) -> list[str]:
    right = set(numeric)
    header, *body = rows
    rule = ["---:" if i in right else "---" for i in range(len(header))]
    return [
        "| " + " | ".join(_markdown_cell(c) for c in row) + " |" for row in (header, rule, *body)
    ]


def render_markdown(report: Report, prices: Prices | None) -> str:
    """The report as Markdown: the cluster and namespace totals (saved, reclaimable,
    upsize), then every workload and container: now → recommended → applied, what the
    recommendations free and add (with why), and why nothing is applied."""
    unit = f" ({prices.currency}/month)" if prices is not None else ""
    out = ["# kerf report", ""]
    if prices is not None:
        out += [
            f"Costs in {prices.currency} per month ({HOURS_PER_MONTH} hours) at "
            f"{prices.cpu_core_hour:g} {prices.currency} per core-hour and "
            f"{prices.memory_gib_hour:g} {prices.currency} per GiB-hour.",
            "",
        ]
    out += ["## Namespaces", ""]
    totals = [["Namespace", "Pods", "CPU now → rec → applied", "Memory now → rec → applied"]]
    totals[0] += [f"Saved{unit}", f"Reclaimable{unit}", f"Upsize{unit}"]
    for name, t in [*report.namespaces.items(), ("**cluster**", report.cluster)]:
        names = ("now", "recommended", "applied")
        totals.append(
            [name, str(t.pods), states(t, "cpu", names), states(t, "memory", names)]
            + [
                _freed(t, "saved", prices),
                _freed(t, "recommended", prices),
                _added(t, "recommended", prices),
            ]
        )
    out += _markdown_table(totals, numeric=(1,))
    out += ["", "## Workloads", ""]
    workloads = [["Namespace", "Workload", "Container", "Pods", "CPU now → rec → applied"]]
    workloads[0] += ["Memory now → rec → applied", f"Reclaimable{unit}", f"Upsize{unit}"]
    workloads[0] += ["Not applied"]
    for line in lines(report, containers="several"):
        if line.scope not in ("workload", "container"):
            continue
        t = line.totals
        names = ("now", "recommended", "applied")
        workloads.append(
            [line.namespace, line.workload, line.container, str(t.pods)]
            + [states(t, "cpu", names), states(t, "memory", names)]
            + [_freed(t, "recommended", prices), _upsize(line, prices)]
            + [f"{line.not_applied}: {line.message}" if line.not_applied else ""]
        )
    out += _markdown_table(workloads, numeric=(3,))
    return "\n".join(out) + "\n"
