"""Kubex's recommendation file: `{"results": [...]}` rows in, kerf's rows out.

Kubex's local-recommendations mode reads this document from a ConfigMap (by default
`recommendations` in the controller's namespace, key `recommendations.json`); docs/
recommender.md, "Kubex's recommendation file", maps every field. Field names are matched
without regard to case, as Kubex's decoder (Go's encoding/json) matches them, so the
PascalCase of Kubex's files and the camelCase of its API both load.

A Kubex row reports no coverage, samples or confidence: it is the hub's final word
(docs/decisions.md), so those stay None and the checks that read them pass it by.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from app.model.quantities import format_bytes, format_cpu
from app.model.recommendations import InvalidRow, RecommendationRow, invalid_row

#: The ConfigMap Kubex's chart mounts in local-recommendations mode (its
#: `localRecommendations.configMapName` default), in the controller's namespace.
DEFAULT_CONFIGMAP = "recommendations"
#: The document's list of rows.
RESULTS = "results"

#: Fields every row must carry (Kubex's own validation requires the same), lower-cased.
_NAMES = ("cluster", "namespace", "podownerkind", "podownername", "container")
_IDS = ("entityid", "containerid")
#: The fields that name a row's workload and container in a warning.
_WHO = ("namespace", "podownerkind", "podownername", "container")
#: (field, resource, requests|limits, formatter) of each recommended value.
_RECOMMENDED = (
    ("recommendedcpurequestmcores", "cpu", "requests", format_cpu),
    ("recommendedmemrequestbytes", "memory", "requests", format_bytes),
    ("recommendedcpulimitmcores", "cpu", "limits", format_cpu),
    ("recommendedmemlimitbytes", "memory", "limits", format_bytes),
)
#: Kubex's view of the current values and its other figures: checked, not used (kerf's
#: baseline is the pod itself, SPEC §6).
_INFORMATIONAL_INTEGERS = (
    "currentcpurequestmcores",
    "currentmemrequestbytes",
    "currentcpulimitmcores",
    "currentmemlimitbytes",
    "avgcontainercount",
)


def is_kubex_document(document: Any) -> bool:
    """Whether a loaded `recommendations.json` is in Kubex's format."""
    return isinstance(document, dict) and RESULTS in document


def _integer(raw: Mapping[str, Any], field: str) -> int:
    """A non-negative whole number, or 0 when absent (Kubex's zero value: no value)."""
    value = raw.get(field)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field} {value!r} is not a whole number")
    if value < 0:
        raise ValueError(f"{field} {value} is negative")
    return value


def _automation(value: Any) -> bool:
    """KubexAutomation: a boolean or the strings "true"/"false". Required: a row that
    does not say whether Kubex automates its container is never acted on."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if value is None:
        raise ValueError("missing KubexAutomation")
    raise ValueError(f'KubexAutomation {value!r} is not "true" or "false"')


def _analyzed_on(value: Any) -> datetime:
    try:
        analyzed = datetime.fromisoformat(str(value))
    except ValueError:
        raise ValueError(f"AnalyzedOn {value!r} is not an RFC3339 time") from None
    if analyzed.tzinfo is None:
        raise ValueError(f"AnalyzedOn {value!r} has no time zone")
    return analyzed


def _lowered(raw: Any) -> Any:
    """A row with its field names lower-cased (anything else as it is)."""
    return {str(k).lower(): v for k, v in raw.items()} if isinstance(raw, dict) else raw


def _namespace_of(lowered: Any) -> str | None:
    """The namespace a row names as `_row` reads it; None when it names none."""
    value = lowered.get("namespace") if isinstance(lowered, dict) else None
    return value if isinstance(value, str) and value else None


def _row(raw: Any) -> RecommendationRow:
    if not isinstance(raw, dict):
        raise ValueError("row is not a mapping")
    missing = [f for f in (*_NAMES, *_IDS, "analyzedon") if raw.get(f) in (None, "")]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    for field in (*_NAMES, *_IDS, "hpametricname"):
        if raw.get(field) is not None and not isinstance(raw[field], str):
            raise ValueError(f"{field} {raw[field]!r} is not a string")
    automation = _automation(raw.get("kubexautomation"))
    analyzed_at = _analyzed_on(raw["analyzedon"])
    for field in _INFORMATIONAL_INTEGERS:
        _integer(raw, field)
    savings = raw.get("estimatedsavingspercontainer")
    if savings is not None and (isinstance(savings, bool) or not isinstance(savings, int | float)):
        raise ValueError(f"estimatedsavingspercontainer {savings!r} is not a number")
    amounts = {(kind, resource): _integer(raw, field) for field, resource, kind, _ in _RECOMMENDED}
    if not any(amounts.values()):
        raise ValueError("no Recommended… value above 0")
    for resource in ("cpu", "memory"):
        request, limit = amounts[("requests", resource)], amounts[("limits", resource)]
        if request and limit and request > limit:
            raise ValueError(
                f"the recommended {resource} request {request} is above its limit {limit}"
            )
    values: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for _, resource, kind, shown in _RECOMMENDED:
        if amounts[(kind, resource)]:
            values[kind][resource] = sys.intern(shown(amounts[(kind, resource)]))
    return RecommendationRow(
        namespace=sys.intern(raw["namespace"]),
        owner_kind=sys.intern(raw["podownerkind"]),
        owner_name=raw["podownername"],
        container=sys.intern(raw["container"]),
        requests=values["requests"],
        limits=values["limits"],
        analyzed_at=analyzed_at,
        coverage_hours=None,
        samples=None,
        confidence=None,
        cpu_throttling_ratio=None,
        origin="kubex",
        automation=automation,
    )


def parse_results(
    document: Any, source: str, namespaces: Callable[[str], bool] | None = None
) -> tuple[list[RecommendationRow], list[InvalidRow]]:
    """Rows of a loaded Kubex document and the rows it skipped (each named in one line,
    never acted on); ValueError when `results` is not a list (the source does not load).
    With `namespaces`, a row that names no namespace or one it refuses is passed over
    unread."""
    raw_rows = document.get(RESULTS) if isinstance(document, dict) else None
    if not isinstance(raw_rows, list):
        raise ValueError(f"{source}: Kubex's '{RESULTS}' is not a list")
    rows: list[RecommendationRow] = []
    invalid: list[InvalidRow] = []
    for index, raw in enumerate(raw_rows):
        lowered = _lowered(raw)
        if namespaces is not None:
            namespace = _namespace_of(lowered)
            if namespace is None or not namespaces(namespace):
                continue
        try:
            rows.append(_row(lowered))
        except (ValueError, TypeError) as exc:
            invalid.append(invalid_row(lowered, _WHO, f"{source}: {RESULTS}[{index}]", exc))
    return rows, invalid
