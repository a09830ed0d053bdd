"""The recommender's rows in the source format (SPEC §4), and the merge of a run's rows into
a namespace's ConfigMap document. Pure: no I/O.

A workload refused this run keeps the row it had (its last good analysis ages out through
`StaleRecommendation`, never shrinks to what a partial answer shows); a workload the view
no longer has loses its row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from app.model.apitime import rfc3339
from app.model.owners import WorkloadRef
from app.recommend.rules import ContainerResult

#: The ConfigMap the recommender writes in each namespace (labelled as a source).
CONFIGMAP_NAME = "kerf-recommendations"
#: Row fields whose change alone is no reason to write (it moves every run).
_VOLATILE = ("analyzedAt",)

Row = dict[str, Any]


def row(ref: WorkloadRef, result: ContainerResult, analyzed_at: datetime) -> Row:
    """One recommendation row, in the field order of SPEC §4."""
    out: Row = {
        "namespace": ref.namespace,
        "ownerKind": ref.kind,
        "ownerName": ref.name,
        "container": result.container,
        "requests": dict(result.requests),
    }
    if result.limits:
        out["limits"] = dict(result.limits)
    out.update(
        analyzedAt=rfc3339(analyzed_at),
        coverageHours=result.coverage_hours,
        samples=result.samples,
        confidence=result.confidence,
    )
    if result.cpu_throttling_ratio is not None:
        out["cpuThrottlingRatio"] = result.cpu_throttling_ratio
    return out


def _owner(raw: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(raw.get("ownerKind")), str(raw.get("namespace")), str(raw.get("ownerName")))


def existing_rows(text: str | None) -> list[Row]:
    """The rows of a stored document; an unreadable one counts as empty (it is rewritten)."""
    if not text:
        return []
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        return []
    rows = document.get("recommendations") if isinstance(document, dict) else None
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _sort_key(raw: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (*_owner(raw), str(raw.get("container")))


def merged_rows(
    old: Sequence[Row],
    new: Sequence[Row],
    *,
    kept: Iterable[WorkloadRef],
) -> list[Row]:
    """The rows to store: this run's, plus the old rows of the workloads in `kept` (known but
    refused this run)."""
    keep = {ref.key for ref in kept}
    fresh = {_owner(r) for r in new}
    carried = [r for r in old if _owner(r) in keep and _owner(r) not in fresh]
    return sorted([*new, *carried], key=_sort_key)


def _stable(rows: Sequence[Row]) -> list[Row]:
    return [{k: v for k, v in r.items() if k not in _VOLATILE} for r in rows]


def _analyzed_at(raw: Mapping[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(raw.get("analyzedAt")))
    except ValueError:
        return None


def changed(old: Sequence[Row], new: Sequence[Row], *, refresh_before: datetime) -> bool:
    """Whether `new` should be stored over `old`: a value changed (the analysis time
    aside), or a stored row was analysed before `refresh_before` (rewritten so that an
    unchanged recommendation never ages into `StaleRecommendation`)."""
    if _stable(sorted(old, key=_sort_key)) != _stable(new):
        return True
    fresh = {_owner(r) for r in new if r not in old}
    for raw in old:
        at = _analyzed_at(raw)
        if _owner(raw) in fresh and (at is None or at < refresh_before):
            return True
    return False


def document(rows: Sequence[Row]) -> str:
    """The `recommendations.json` text."""
    return orjson.dumps({"recommendations": list(rows)}, option=orjson.OPT_INDENT_2).decode()
