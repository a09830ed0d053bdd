"""Values and texts as a person reads them in a terminal: quantities in kubectl's notation
(`250m`, `256Mi`), a change as `before → after`, long texts wrapped or cut at a word with
`…`, never mid-word and never silently."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping

from app.model.quantities import QuantityError, format_resource, parse_resource, same_quantity

ARROW = " → "
ELLIPSIS = "…"
#: What a cell shows for a value that is not there.
NONE = "-"
#: cpu and memory first, as kubectl lists them; then the rest by name.
_FIRST = {"cpu": 0, "memory": 1}


def quantity(resource: str, value: object) -> str:
    """`value` of `resource` in kubectl's notation, the canonical spelling the API server
    shows (`0.25` → `250m`, `1000m` → `1`, `268435456` → `256Mi`); `-` for no value, and
    a text that is not a quantity as it is."""
    if value is None:
        return NONE
    try:
        return format_resource(resource, parse_resource(resource, value))
    except QuantityError:
        return str(value)


def change(resource: str, before: object, after: object) -> str:
    """`400m → 250m`; the value alone when both are the same amount (`1000m` and `1` are)."""
    if before is not None and after is not None and same_quantity(resource, before, after):
        return quantity(resource, after)
    return quantity(resource, before) + ARROW + quantity(resource, after)


def ordered(resources: Iterable[str]) -> list[str]:
    """Resource names as kubectl lists them: cpu, memory, then the others by name."""
    return sorted(set(resources), key=lambda r: (_FIRST.get(r, len(_FIRST)), r))


def values(amounts: Mapping[str, object] | None) -> str:
    """A requests or limits map in one cell: `cpu 250m, memory 256Mi`, or `-` when empty."""
    amounts = amounts or {}
    return ", ".join(f"{r} {quantity(r, amounts[r])}" for r in ordered(amounts)) or NONE


def changes(before: Mapping[str, object] | None, after: Mapping[str, object] | None) -> str:
    """Two requests or limits maps in one cell, over both maps' resources:
    `cpu 400m → 250m, memory 256Mi` (memory unchanged); `-` when both are empty."""
    before, after = before or {}, after or {}
    return (
        ", ".join(
            f"{r} {change(r, before.get(r), after.get(r))}" for r in ordered([*before, *after])
        )
        or NONE
    )


def shorten(text: str, width: int) -> str:
    """`text` on one line of at most `width` characters: whole, or cut after its last whole
    word that fits, ending with `…` (a first word longer than the line is cut, with `…`)."""
    text = " ".join(text.split())
    width = max(width, len(ELLIPSIS))
    if len(text) <= width:
        return text
    head = text[:width]
    cut = head.rfind(" ")
    kept = head[:cut] if cut > 0 else head[: width - len(ELLIPSIS)]
    return kept.rstrip(" ,;:") + ELLIPSIS


def wrap(text: str, width: int, max_lines: int | None = None) -> list[str]:
    """`text` in lines of at most `width` characters, broken between words (a word longer
    than a line goes on across lines); past `max_lines` lines, the last one is cut at a
    word with `…`. At least one line."""
    lines = textwrap.wrap(text, max(width, 1), break_on_hyphens=False) or [""]
    if max_lines is None or len(lines) <= max_lines:
        return lines
    keep = max(max_lines, 1) - 1
    return [*lines[:keep], shorten(" ".join(lines[keep:]), width)]
