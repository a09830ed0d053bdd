"""`kerf report -o html`: one self-contained page (its style and script inline, nothing
fetched) to open in a browser or attach to a ticket.

It holds the cluster's totals, a bar per namespace of what kerf saved and what the
recommendations can still reclaim, and a table of every workload and its containers,
sortable by any column (a click on its header, or `#sort=COLUMN` / `#sort=-COLUMN` in the
address, which keeps the order in a shared link).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from html import escape

from app.outcome.report import GIB, HOURS_PER_MONTH, Prices, Report, Totals
from kerf.report_table import NONE, Line, change, format_cpu, format_memory, lines, money, states

NOW_REC_APPLIED = ("now", "recommended", "applied")

STYLE = """
:root { --ink: #1d232b; --muted: #5b6672; --line: #d9dee4; --saved: #2e8b57;
  --reclaim: #e0a526; --upsize: #c0392b; --band: #f4f6f8; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  margin: 24px auto; max-width: 1280px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 8px; }
.meta { color: var(--muted); margin: 0 0 16px; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; min-width: 170px; }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 18px; font-variant-numeric: tabular-nums; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line);
  vertical-align: top; white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.why { white-space: normal; max-width: 340px; color: var(--muted); }
th { background: var(--band); position: sticky; top: 0; white-space: normal; }
th.sortable { cursor: pointer; user-select: none; }
th.sortable::after { content: " \\2195"; color: var(--muted); }
th[aria-sort="ascending"]::after { content: " \\2191"; color: var(--ink); }
th[aria-sort="descending"]::after { content: " \\2193"; color: var(--ink); }
tbody.workload tr.container td { color: var(--muted); border-bottom-style: dashed; }
tbody.workload tr.container td.name { padding-left: 26px; }
.upsize { color: var(--upsize); }
.bar { display: flex; height: 14px; width: 320px; background: var(--band); border-radius: 3px;
  overflow: hidden; }
.bar span { display: block; height: 100%; }
.bar .saved { background: var(--saved); }
.bar .reclaim { background: var(--reclaim); }
.legend span { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; }
"""

# Sorting: each workload is one <tbody> (its row, then its containers'), so a sort moves
# containers with their workload. Cells carry their sort key in data-v.
SCRIPT = """
(function () {
  "use strict";
  var table = document.getElementById("workloads");
  var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
  function key(body, column) {
    var cell = body.rows[0].cells[column];
    var v = cell.getAttribute("data-v");
    return v === null ? cell.textContent : v;
  }
  function sortBy(column, descending) {
    var numeric = headers[column].classList.contains("num");
    var bodies = Array.prototype.slice.call(table.tBodies);
    bodies.sort(function (a, b) {
      var x = key(a, column), y = key(b, column);
      var order = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
      return descending ? -order : order;
    });
    bodies.forEach(function (body) { table.appendChild(body); });
    headers.forEach(function (th, i) {
      if (i === column) {
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      } else {
        th.removeAttribute("aria-sort");
      }
    });
  }
  headers.forEach(function (th, column) {
    th.addEventListener("click", function () {
      var descending = th.getAttribute("aria-sort") === "ascending";
      sortBy(column, descending);
      history.replaceState(null, "", "#sort=" + (descending ? "-" : "") + th.id.slice(4));
    });
  });
  var wanted = /^#sort=(-?)([a-z]+)$/.exec(location.hash);
  if (wanted) {
    var th = document.getElementById("col-" + wanted[2]);
    if (th) { sortBy(headers.indexOf(th), wanted[1] === "-"); }
  }
  document.body.setAttribute("data-ready", "true");
})();
"""


def _cell(text: str, *, sort: float | str | None = None, cls: str = "", title: str = "") -> str:
    attributes = f' class="{cls}"' if cls else ""
    if sort is not None:
        attributes += f' data-v="{escape(str(sort))}"'
    if title:
        attributes += f' title="{escape(title)}"'
    return f"<td{attributes}>{escape(text)}</td>"


def _freed(totals: Totals, comparison: str, prices: Prices | None) -> tuple[str, float]:
    """A comparison's freed amount as text, and its sort key (money, or cores + GiB)."""
    freed = totals.freed[comparison]
    if prices is not None:
        value = prices.freed_monthly(totals, comparison)
        return money(value), round(value, 4)
    return change(freed), round(freed["cpu"] / 1000 + freed["memory"] / GIB, 4)


def _upsize(line: Line, prices: Prices | None) -> tuple[str, float]:
    added = line.totals.added["recommended"]
    if prices is not None:
        value = prices.added_monthly(line.totals, "recommended")
        text = money(value)
    else:
        value, text = added["cpu"] / 1000 + added["memory"] / GIB, change(added, "+")
    if text != NONE and line.upsize_reason:
        text += f" ({line.upsize_reason})"
    return text, round(value, 4)


#: The workloads table's columns: id (for #sort=), header, numeric.
COLUMNS = (
    ("namespace", "Namespace", False),
    ("workload", "Workload / container", False),
    ("pods", "Pods", True),
    ("cpu", "CPU now → rec. → applied", True),
    ("memory", "Memory now → rec. → applied", True),
    ("saved", "Saved", True),
    ("reclaim", "Reclaimable", True),
    ("upsize", "Upsize (why)", True),
    ("reason", "Not applied (why)", False),
)


def _row(line: Line, prices: Prices | None, cls: str) -> str:
    t = line.totals
    name = line.container if line.scope == "container" else line.workload
    saved, saved_key = _freed(t, "saved", prices)
    reclaim, reclaim_key = _freed(t, "recommended", prices)
    upsize, upsize_key = _upsize(line, prices)
    cells = [
        _cell(line.namespace if line.scope == "workload" else ""),
        _cell(name, cls="name"),
        _cell(str(t.pods), sort=t.pods, cls="num"),
        _cell(states(t, "cpu", NOW_REC_APPLIED), sort=t.millicores["now"], cls="num"),
        _cell(states(t, "memory", NOW_REC_APPLIED), sort=t.memory_bytes["now"], cls="num"),
        _cell(saved, sort=saved_key, cls="num"),
        _cell(reclaim, sort=reclaim_key, cls="num"),
        _cell(upsize, sort=upsize_key, cls="num upsize" if upsize != NONE else "num"),
        _why(line),
    ]
    return f'<tr class="{cls}">' + "".join(cells) + "</tr>"


def _why(line: Line) -> str:
    """Why nothing is applied: the reason, then the decision's message."""
    if not line.not_applied:
        return _cell(NONE, cls="why")
    return (
        f'<td class="why" data-v="{escape(line.not_applied)}"><b>{escape(line.not_applied)}</b>'
        f" {escape(line.message)}</td>"
    )


def _workloads_table(report: Report, prices: Prices | None) -> str:
    unit = f" ({escape(prices.currency)}/month)" if prices is not None else ""
    head = "".join(
        f'<th id="col-{key}" class="sortable{" num" if numeric else ""}">{escape(title)}'
        f"{unit if key in ('saved', 'reclaim', 'upsize') else ''}</th>"
        for key, title, numeric in COLUMNS
    )
    bodies: list[str] = []
    for line in lines(report, containers="all"):
        if line.scope == "workload":
            bodies.append('<tbody class="workload">' + _row(line, prices, "workload"))
        elif line.scope == "container":
            bodies[-1] += _row(line, prices, "container")
    return (
        f'<table id="workloads"><thead><tr>{head}</tr></thead>'
        + "".join(body + "</tbody>" for body in bodies)
        + "</table>"
    )


def _bar(saved: float, reclaim: float, scale: float) -> str:
    def part(cls: str, value: float) -> str:
        width = 100 * value / scale if scale > 0 else 0
        return f'<span class="{cls}" style="width:{width:.2f}%"></span>'

    return f'<div class="bar">{part("saved", saved)}{part("reclaim", reclaim)}</div>'


def _measures(prices: Prices | None) -> list[tuple[str, Callable[[Totals, str], float], str]]:
    """What a namespace bar measures: money with prices, else CPU and memory apart."""
    if prices is not None:
        return [
            (f"{prices.currency}/month", prices.freed_monthly, prices.currency),
        ]
    return [
        ("CPU", lambda t, c: t.freed[c]["cpu"] / 1000, "cores"),
        ("memory", lambda t, c: t.freed[c]["memory"] / GIB, "GiB"),
    ]


def _namespaces_table(report: Report, prices: Prices | None) -> str:
    measures = _measures(prices)
    namespaces = list(report.namespaces.values())
    # Each bar is scaled to the namespace with the most saved and reclaimable.
    scales = [
        max((m(n, "saved") + m(n, "recommended") for n in namespaces), default=0.0)
        for _, m, _ in measures
    ]
    rows = [*((name, t, False) for name, t in report.namespaces.items())]
    rows.append(("cluster", report.cluster, True))
    head = "<th>Namespace</th><th class='num'>Pods</th>"
    head += "<th class='num'>CPU now → recommended → applied</th>"
    head += "<th class='num'>Memory now → recommended → applied</th>"
    head += "".join(f"<th>Saved and reclaimable, {escape(label)}</th>" for label, _, _ in measures)
    body: list[str] = []
    for name, t, cluster in rows:
        cells = [
            f"<td><b>{escape(name)}</b></td>" if cluster else _cell(name),
            _cell(str(t.pods), cls="num"),
            _cell(states(t, "cpu", NOW_REC_APPLIED), cls="num"),
            _cell(states(t, "memory", NOW_REC_APPLIED), cls="num"),
        ]
        for (_, measure, unit), scale in zip(measures, scales, strict=True):
            saved, reclaim = measure(t, "saved"), measure(t, "recommended")
            label = f"saved {saved:.2f} {unit}, reclaimable {reclaim:.2f} {unit}"
            bar = "" if cluster else _bar(saved, reclaim, scale)
            cells.append(f'<td title="{escape(label)}">{bar}{escape(label)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    legend = (
        '<p class="legend"><span style="background:var(--saved)"></span>saved by kerf so far'
        '<span style="background:var(--reclaim)"></span>still reclaimable</p>'
    )
    return f"<table id='namespaces'><thead><tr>{head}</tr></thead>{''.join(body)}</table>{legend}"


def _cards(report: Report, prices: Prices | None) -> str:
    t = report.cluster
    cards: list[tuple[str, str]] = [
        ("Pods", str(t.pods)),
        (
            "CPU now → recommended",
            f"{format_cpu(t.millicores['now'])} → {format_cpu(t.millicores['recommended'])}",
        ),
        (
            "Memory now → recommended",
            f"{format_memory(t.memory_bytes['now'])} → "
            f"{format_memory(t.memory_bytes['recommended'])}",
        ),
    ]
    for title, comparison, side in (
        ("Saved", "saved", "freed"),
        ("Reclaimable", "recommended", "freed"),
        ("Upsize", "recommended", "added"),
    ):
        if prices is not None:
            cost = (prices.freed_monthly if side == "freed" else prices.added_monthly)(
                t, comparison
            )
            value = f"{money(cost)} {prices.currency}/month" if money(cost) != NONE else NONE
        else:
            value = change((t.freed if side == "freed" else t.added)[comparison])
        cards.append((title, value))
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card"><div class="k">{escape(k)}</div><div class="v">{escape(v)}</div></div>'
            for k, v in cards
        )
        + "</div>"
    )


def render_html(report: Report, prices: Prices | None, *, now: datetime) -> str:
    """The report as one HTML page, with nothing to fetch."""
    meta = f"At {now.isoformat(timespec='seconds')}. "
    if prices is not None:
        meta += (
            f"Costs in {prices.currency} per month ({HOURS_PER_MONTH} hours) at "
            f"{prices.cpu_core_hour:g} {prices.currency} per core-hour and "
            f"{prices.memory_gib_hour:g} {prices.currency} per GiB-hour. "
        )
    meta += (
        "Saved: what kerf's changes freed against the manifests. Reclaimable: what the "
        "recommendations free. Upsize: what they add, and why."
    )
    parts: Sequence[str] = (
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # No request may leave the page: a report is read offline and attached to tickets.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">",
        "<title>kerf report</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>kerf report</h1>",
        f'<p class="meta">{escape(meta)}</p>',
        _cards(report, prices),
        "<h2>Namespaces</h2>",
        _namespaces_table(report, prices),
        "<h2>Workloads</h2>",
        _workloads_table(report, prices),
        f"<script>{SCRIPT}</script>",
        "</body></html>",
    )
    return "\n".join(parts) + "\n"
