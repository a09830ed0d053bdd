"""The recommendation source (SPEC §4): ConfigMap rows in, typed rows out.

The interface is deliberately small — `parse_rows` turns a document into rows and the
rows it skipped — so a Prometheus-backed recommender can produce the same rows later.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import orjson

from app.model.quantities import QuantityError, parse_resource

SOURCE_LABEL = "rightsizing.kubex.ai/recommendations"
DATA_KEY = "recommendations.json"
_REQUIRED = (
    "namespace",
    "ownerKind",
    "ownerName",
    "container",
    "requests",
    "analyzedAt",
    "coverageHours",
    "samples",
    "confidence",
)


#: Where a row comes from: kerf's own format (SPEC §4) or Kubex's (app/model/kubex_rows.py).
Origin = Literal["kerf", "kubex"]


@dataclass(frozen=True, slots=True)
class RecommendationRow:
    """One container's recommendation from the source."""

    namespace: str
    owner_kind: str
    owner_name: str
    container: str
    requests: dict[str, str]
    limits: dict[str, str]
    analyzed_at: datetime
    #: None: the source does not report it (Kubex's rows: the hub's final word)
    coverage_hours: float | None
    samples: int | None
    confidence: float | None
    cpu_throttling_ratio: float | None
    origin: Origin = "kerf"
    #: Kubex's per-container `KubexAutomation` flag (kerf's own rows: always True)
    automation: bool = True

    @property
    def owner_key(self) -> tuple[str, str, str]:
        """(kind, namespace, name) of the workload the row is for."""
        return (self.owner_kind, self.namespace, self.owner_name)


@dataclass(frozen=True, slots=True)
class InvalidRow:
    """A row that is never acted on, and why (SPEC §4: `InvalidRecommendation`)."""

    #: (kind, namespace, name) of the workload the row names, when it names one
    owner_key: tuple[str, str, str] | None
    container: str | None
    #: the warning that names the row: source, index, workload and container, the reason
    warning: str


def is_recommendation_configmap(obj: Mapping[str, Any]) -> bool:
    """A ConfigMap labelled as a recommendation source."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return obj.get("kind") == "ConfigMap" and labels.get(SOURCE_LABEL) == "true"


def _shared(shared: dict[Any, Any], key: Any, value: Any) -> Any:
    """The value an earlier row of the document had under `key` if equal, else this one:
    a document's rows repeat their numbers, times and resources, and a number or a dict
    per row weighed ~200 bytes of a row's ~800."""
    return shared.setdefault(key, value)


def _resources(value: Any, field: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError(f"{field} must be a mapping of resource to quantity")
    for resource, quantity in value.items():
        try:
            amount = parse_resource(resource, quantity)
        except QuantityError as exc:
            raise ValueError(f"{field}.{resource}: {exc}") from None
        if amount <= 0:
            raise ValueError(f"{field}.{resource} {quantity!r} is not positive")
    # Interned: resource names and quantities repeat across thousands of rows.
    return {sys.intern(str(r)): sys.intern(str(q)) for r, q in value.items()}


def _number(raw: Mapping[str, Any], field: str) -> float:
    value = raw[field]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{field} {value!r} is not a number")
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{field} {value!r} is not a finite number")
    return float(value)


def _row(raw: Any, shared: dict[Any, Any]) -> RecommendationRow:
    """One row of kerf's format; `shared` holds what the document's rows share (`_shared`)."""
    if not isinstance(raw, dict):
        raise ValueError("row is not a mapping")
    missing = [f for f in _REQUIRED if raw.get(f) in (None, "")]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    text = str(raw["analyzedAt"])
    analyzed_at: datetime | None = shared.get(("analyzedAt", text))
    if analyzed_at is None:
        try:
            analyzed_at = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"analyzedAt {text!r} is not an RFC3339 time") from None
        shared[("analyzedAt", text)] = analyzed_at
    if analyzed_at.tzinfo is None:
        raise ValueError(f"analyzedAt {raw['analyzedAt']!r} has no time zone")
    confidence = _number(raw, "confidence")
    if not 0 <= confidence <= 1:
        raise ValueError(f"confidence {confidence} is outside 0..1")
    throttling = (
        None if raw.get("cpuThrottlingRatio") is None else _number(raw, "cpuThrottlingRatio")
    )
    if throttling is not None and not 0 <= throttling <= 1:
        raise ValueError(f"cpuThrottlingRatio {throttling} is outside 0..1")
    for field in ("coverageHours", "samples"):
        if _number(raw, field) < 0:
            raise ValueError(f"{field} {raw[field]} is negative")
    requests = _resources(raw["requests"], "requests")
    limits = _resources(raw.get("limits") or {}, "limits")
    for resource, limit in limits.items():
        request = requests.get(resource)
        if request is not None and parse_resource(resource, request) > parse_resource(
            resource, limit
        ):
            raise ValueError(f"requests.{resource} {request} is above limits.{resource} {limit}")
    coverage = _number(raw, "coverageHours")
    samples = int(_number(raw, "samples"))
    # Keyed by type too: 1 == 1.0 as keys.
    return RecommendationRow(
        namespace=sys.intern(str(raw["namespace"])),
        owner_kind=sys.intern(str(raw["ownerKind"])),
        owner_name=str(raw["ownerName"]),
        container=sys.intern(str(raw["container"])),
        requests=_shared(shared, ("resources", *requests.items()), requests),
        limits=_shared(shared, ("resources", *limits.items()), limits),
        analyzed_at=analyzed_at,
        coverage_hours=_shared(shared, (float, coverage), coverage),
        samples=_shared(shared, (int, samples), samples),
        confidence=_shared(shared, (float, confidence), confidence),
        cpu_throttling_ratio=(
            None if throttling is None else _shared(shared, (float, throttling), throttling)
        ),
    )


def load_document(text: str | bytes, source: str) -> Any:
    """The JSON of a `recommendations.json` document; ValueError when it is not JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{source}: {DATA_KEY} is not JSON: {exc}") from None


def parse_document(
    document: Any, source: str, namespaces: Callable[[str], bool] | None = None
) -> tuple[list[RecommendationRow], list[InvalidRow]]:
    """Rows of a loaded document in kerf's format and the rows it skipped.

    A bad row is skipped with a warning naming it; the rest load. A document that is not
    an object with a list `recommendations` raises ValueError (the source is then
    unreachable, not empty). With `namespaces`, a row that names no namespace or one it
    refuses is passed over unread, neither a row nor a skipped one.
    """
    raw_rows = document.get("recommendations") if isinstance(document, dict) else None
    if not isinstance(raw_rows, list):
        raise ValueError(
            f"{source}: {DATA_KEY} needs a list 'recommendations' (kerf's rows) "
            "or 'results' (Kubex's)"
        )
    rows: list[RecommendationRow] = []
    invalid: list[InvalidRow] = []
    shared: dict[Any, Any] = {}
    for index, raw in enumerate(raw_rows):
        if namespaces is not None:
            namespace = _namespace_of(raw)
            if namespace is None or not namespaces(namespace):
                continue
        try:
            rows.append(_row(raw, shared))
        except (ValueError, TypeError) as exc:
            invalid.append(_invalid(raw, f"{source}: recommendations[{index}]", exc))
    return rows, invalid


def _namespace_of(raw: Any) -> str | None:
    """The namespace a row names as `_row` reads it; None when it names none."""
    value = raw.get("namespace") if isinstance(raw, dict) else None
    return None if value in (None, "") else str(value)


def parse_rows(text: str | bytes, source: str) -> tuple[list[RecommendationRow], list[InvalidRow]]:
    """Rows of a `recommendations.json` text in kerf's format and the rows it skipped
    (`parse_document`); ValueError when it is not JSON or not of that shape."""
    return parse_document(load_document(text, source), source)


def _invalid(raw: Any, where: str, exc: Exception) -> InvalidRow:
    """The skipped row of kerf's format, keyed by the workload it names."""
    names = ("namespace", "ownerKind", "ownerName", "container")
    return invalid_row(raw, names, where, exc)


def invalid_row(
    raw: Any, names: tuple[str, str, str, str], where: str, exc: Exception
) -> InvalidRow:
    """A skipped row, keyed by the workload it names when its names are strings; `names`
    are the fields that hold its namespace, owner kind, owner name and container."""
    if not isinstance(raw, dict):
        return InvalidRow(None, None, f"{where} (?) skipped: {exc}")
    found = [raw.get(f) for f in names]
    who = "/".join(str(n) for n in found)
    namespace, kind, name, container = found
    named = all(isinstance(n, str) and n for n in (namespace, kind, name))
    return InvalidRow(
        (str(kind), str(namespace), str(name)) if named else None,
        container if isinstance(container, str) else None,
        f"{where} ({who}) skipped: {exc}",
    )


def configmap_text(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(`recommendations.json` text, the ConfigMap's name for messages); ValueError when
    the key is missing."""
    meta = obj.get("metadata") or {}
    source = f"ConfigMap {meta.get('namespace')}/{meta.get('name')}"
    data = obj.get("data") or {}
    if DATA_KEY not in data:
        raise ValueError(f"{source}: no {DATA_KEY} key")
    return str(data[DATA_KEY]), source


def rows_from_configmap(obj: Mapping[str, Any]) -> tuple[list[RecommendationRow], list[InvalidRow]]:
    """Rows of a recommendation ConfigMap in kerf's format and the rows it skipped;
    ValueError when the ConfigMap does not load (no `recommendations.json` key, not JSON,
    the wrong shape)."""
    return parse_rows(*configmap_text(obj))


def _rank(row: RecommendationRow) -> tuple[Any, ...]:
    """The order among rows for one container, highest first: a Kubex row over kerf's own
    (docs/recommender.md, "Two sources"), then the newest analysis, then the values, so
    that the choice never depends on the order of the rows."""
    return (
        row.origin == "kubex",
        row.analyzed_at,
        sorted(row.requests.items()),
        sorted(row.limits.items()),
        not row.automation,
    )


def index_rows(
    rows: Iterable[RecommendationRow],
) -> dict[tuple[str, str, str], dict[str, RecommendationRow]]:
    """Rows by workload (kind, namespace, name) then container: the highest `_rank` wins."""
    index: dict[tuple[str, str, str], dict[str, RecommendationRow]] = {}
    for row in rows:
        per_container = index.setdefault(row.owner_key, {})
        known = per_container.get(row.container)
        if known is None or _rank(row) > _rank(known):
            per_container[row.container] = row
    return index
