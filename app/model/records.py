"""How the view keeps a RightsizingRecommendation: as compressed JSON, parsed when read.

A record is the heaviest kerf object in a cluster of any size (one per workload). As
pydantic models its status weighs ~5 KB (conditions, selected values, the proposal, the
last applied change, each a model with its own dict) and its metadata and spec ~1.5 KB
(four models, each with its dicts), against ~1.5 KB and ~0.3 KB as compact JSON, and
~0.25 and ~0.1 KB compressed with a preset dictionary (`_STATUS_WORDS`, `_HEAD_WORDS`).
The view keeps the two compressed: the record's head (metadata and spec) and its status.
A pass reads its record's head once or twice (the resourceVersion, kerf's annotations)
and its status only when it decides; both are parsed on read (~15 µs for the head, tens
of µs for a status), and the last few parsed are kept (`RECENT`), so a pass parses each
once while the reconciler's workers interleave their passes.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, PrivateAttr, ValidationError

from app.model.crd import (
    InvalidObject,
    KerfModel,
    ObjectMeta,
    RecommendationStatus,
    RightsizingRecommendation,
    RightsizingRecommendationSpec,
    format_validation_error,
    kind_of,
    object_label,
    scope_problem,
)
from app.model.workloads import WORKLOAD_KINDS

#: How many parsed heads and statuses are kept: a pass reads its record between API
#: calls, and the reconciler's workers (8 at most in practice) interleave their passes.
RECENT = 16
_Parsed = TypeVar("_Parsed")
_Model = TypeVar("_Model", bound=BaseModel)
#: the fields a kept record has set, without and with a status
_FIELDS_SET = frozenset({"api_version", "kind", "metadata", "spec"})
_FIELDS_SET_STATUS = _FIELDS_SET | {"status"}
#: a record's top-level fields as the API spells them
_TOP_FIELDS = frozenset(
    field.alias or name for name, field in RightsizingRecommendation.model_fields.items()
)
#: resourceVersion of the record -> (the record, its parsed head), oldest first; an entry
#: serves only that very record (a new version of it parses its own)
_heads: dict[str, tuple[StoredRecommendation, _Head]] = {}
#: the same for statuses
_statuses: dict[str, tuple[StoredRecommendation, RecommendationStatus | None]] = {}
_recent_lock = threading.Lock()  # the webhook decides on several threads

#: What zlib refers back to when it packs a record (a preset dictionary): a head and a
#: status as kerf writes them, their keys and its words. A document of 1–2 KB alone has
#: little to refer back to; with these, a status packs to ~240 bytes, not ~590, and a
#: head to ~90, not ~230. A record unlike them packs as well as without: they only need
#: to be typical, and changing them needs no migration (the view packs what it reads).
_HEAD_WORDS = orjson.dumps(
    {
        "metadata": {
            "name": "deployment-",
            "namespace": "default",
            "uid": "00000000-0000-0000-0000-000000000000",
            "labels": {},
            "annotations": {},
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "generation": 1,
            "resourceVersion": "1",
            "ownerReferences": [],
        },
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": ""}},
    }
)
_VALUES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}
_STATUS_WORDS = orjson.dumps(
    {
        "phase": "Applied",
        "conditions": [
            {
                "type": "Blocked",
                "status": "False",
                "reason": "NotBlocked",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
            {
                "type": "Applied",
                "status": "True",
                "reason": "Resized",
                "message": "the last applied values run on every pod",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
        ],
        "observedGeneration": 1,
        "lastApplied": {
            "at": "2026-01-01T00:00:00Z",
            "method": "inPlace",
            "containers": {"app": _VALUES},
            "fingerprint": "0000000000000000",
            "baseline": {"00000000-0000-0000-0000-000000000000": {"app": 0}},
        },
        "workload": "Deployment/",
        "reason": "NoSignificantChange",
        "summary": {
            "cpu": "100m→200m",
            "memory": "128Mi",
            "memoryLimit": "256Mi",
            "reason": "Resized",
            "policy": "StaticPolicy/",
        },
        "current": {"app": _VALUES},
        "selected": [
            {
                "container": "app",
                "field": field,
                "resource": resource,
                "value": "",
                "policyKind": kind,
                "policyNamespace": "default",
                "policyName": "",
                "annotationKey": f"{prefix}.rightsizing.kubex.ai/desired-resource-{field}",
            }
            for kind, prefix in (("ProactivePolicy", "proactive"), ("StaticPolicy", "static"))
            for field, resource in (
                ("limits", "memory"),
                ("requests", "cpu"),
                ("requests", "memory"),
            )
        ],
        "filtered": [],
        "pendingEvents": [],
    }
)


def record_name(kind: str, name: str) -> str:
    """The name of the RightsizingRecommendation kerf keeps for a workload:
    `<kind-lowercase>-<workload name>` (SPEC §2)."""
    return f"{kind.lower()}-{name}"


def record_targets(namespace: str, name: str) -> list[tuple[str, str, str]]:
    """The (kind, namespace, name) of every workload whose record `name` could be (a name
    reads as `<kind>-<name>` for each kind whose prefix it has)."""
    return [
        (kind, namespace, name[len(kind) + 1 :])
        for kind in WORKLOAD_KINDS
        if name.startswith(record_name(kind, ""))
    ]


class _Head(KerfModel):
    """A record's metadata and spec, packed and parsed together."""

    metadata: ObjectMeta
    spec: RightsizingRecommendationSpec


class StoredRecommendation(RightsizingRecommendation):
    """A RightsizingRecommendation whose fields are parsed from compressed JSON when read.

    Readers share the parsed models as they shared the view's model before: none changes
    them (a reader that did would change what the next reads of this version see)."""

    #: the metadata and spec as zlib-compressed JSON
    _head_packed: bytes = PrivateAttr()
    #: metadata.resourceVersion, which every pass reads: kept out of the head's parse
    _version: str = PrivateAttr(default="")
    #: the status as zlib-compressed JSON (None: no status)
    _status_packed: bytes | None = PrivateAttr(default=None)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names not in the instance dict, which holds no field.
        if name == "metadata":
            return _head_of(self).metadata
        if name == "spec":
            return _head_of(self).spec
        if name == "status":
            return _status_of(self)
        if name == "api_version":
            return "rightsizing.kubex.ai/v1alpha1"
        if name == "kind":
            return "RightsizingRecommendation"
        return super().__getattr__(name)  # type: ignore[misc]

    def whole(self) -> RightsizingRecommendation:
        """The record with its fields parsed, as a plain RightsizingRecommendation."""
        return RightsizingRecommendation.model_construct(
            api_version=self.api_version,
            kind=self.kind,
            metadata=self.metadata,
            spec=self.spec,
            status=self.status,
        )

    # Pydantic dumps what the instance dict holds, which is empty: dump the record whole.
    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """As RightsizingRecommendation.model_dump."""
        return self.whole().model_dump(**kwargs)

    def model_dump_json(self, **kwargs: Any) -> str:
        """As RightsizingRecommendation.model_dump_json."""
        return self.whole().model_dump_json(**kwargs)


def stored(record: RightsizingRecommendation) -> StoredRecommendation:
    """The record as the view keeps it: the same object for every read until a new version
    arrives (the reconciler's steady-pass check compares its inputs by identity)."""
    if isinstance(record, StoredRecommendation):
        return record
    # Null fields left out: every field that can be null defaults to null, so what is read
    # back equals what was given (a null field of an older writer, unknown to this one, is
    # dropped; kerf's own dumps leave nulls out too).
    head = record.model_dump_json(include={"metadata", "spec"}, by_alias=True, exclude_none=True)
    status = record.status
    return _kept(
        head.encode(),
        record.metadata.resource_version or "",
        status.model_dump_json(by_alias=True, exclude_none=True).encode()
        if status is not None
        else None,
    )


def record_from_api(
    doc: dict[str, Any], metadata: dict[str, Any], source: str
) -> StoredRecommendation:
    """A record as the API sends it (`metadata`: what the view keeps of its metadata),
    validated as `parse_object` validates it, kept as `stored` keeps one, with one fewer
    walk: its head and status are validated from the compact JSON that is then packed,
    where `parse_object` then `stored` validate the document and dump the models again.
    What a pass parses back from that JSON is what the validation gave, and the two
    parsed are the record's most recent (the pass its change queues reads them)."""
    label = object_label(doc)
    cls = kind_of(doc, source)
    unknown = sorted(set(doc) - _TOP_FIELDS)
    if unknown:
        raise InvalidObject(f"{source}: {label}: {unknown[0]}: unknown field (misspelt?)")
    head_doc: dict[str, Any] = {"metadata": metadata}
    if "spec" in doc:
        head_doc["spec"] = doc["spec"]
    head_raw = orjson.dumps(head_doc)
    status_doc = doc.get("status")
    status_raw = orjson.dumps(status_doc) if status_doc is not None else None
    head = _validated(_Head, head_raw, (), f"{source}: {label}")
    problem = scope_problem(cls, head.metadata, head.spec)
    if problem is not None:
        raise InvalidObject(f"{source}: {label}: {problem}")
    status = (
        _validated(RecommendationStatus, status_raw, ("status",), f"{source}: {label}")
        if status_raw is not None
        else None
    )
    kept = _kept(head_raw, head.metadata.resource_version or "", status_raw)
    _remember(_heads, kept, head)
    _remember(_statuses, kept, status)
    return kept


def _validated(model: type[_Model], raw: bytes, within: tuple[str, ...], where: str) -> _Model:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise InvalidObject(f"{where}: {format_validation_error(exc, within)}") from None


def _kept(head: bytes, version: str, status: bytes | None) -> StoredRecommendation:
    """A StoredRecommendation of the compact JSON of a head and a status, built as
    model_construct builds a model, with no field in the instance dict."""
    kept = StoredRecommendation.__new__(StoredRecommendation)
    object.__setattr__(kept, "__dict__", {})
    object.__setattr__(
        kept, "__pydantic_fields_set__", _FIELDS_SET if status is None else _FIELDS_SET_STATUS
    )
    object.__setattr__(kept, "__pydantic_extra__", None)
    object.__setattr__(
        kept,
        "__pydantic_private__",
        {
            "_head_packed": _pack(head, _HEAD_WORDS),
            "_version": version,
            "_status_packed": _pack(status, _STATUS_WORDS) if status is not None else None,
        },
    )
    return kept


def record_version(record: RightsizingRecommendation | None) -> str:
    """The record's resourceVersion ("" for none); a stored record's without parsing its
    head (a pass over a workload whose inputs did not change reads nothing else of it)."""
    if record is None:
        return ""
    if isinstance(record, StoredRecommendation):
        return str(_packed(record, "_version"))
    return record.metadata.resource_version or ""


def _pack(raw: bytes, words: bytes) -> bytes:
    packer = zlib.compressobj(1, zdict=words)
    return packer.compress(raw) + packer.flush()


def _unpack(packed: bytes, words: bytes) -> bytes:
    return zlib.decompressobj(zdict=words).decompress(packed)


def _head_of(record: StoredRecommendation) -> _Head:
    def parse() -> _Head:
        raw = _unpack(_packed(record, "_head_packed"), _HEAD_WORDS)
        return _Head.model_validate_json(raw)

    return _recent(_heads, record, parse)


def _status_of(record: StoredRecommendation) -> RecommendationStatus | None:
    def parse() -> RecommendationStatus | None:
        packed = _packed(record, "_status_packed")
        if packed is None:
            return None
        return RecommendationStatus.model_validate_json(_unpack(packed, _STATUS_WORDS))

    return _recent(_statuses, record, parse)


def _packed(record: StoredRecommendation, name: str) -> Any:
    private = record.__pydantic_private__
    assert private is not None
    return private[name]


def _recent(
    cache: dict[str, tuple[StoredRecommendation, _Parsed]],
    record: StoredRecommendation,
    parse: Callable[[], _Parsed],
) -> _Parsed:
    """What `parse` gives for the record: parsed again unless among the `RECENT` last."""
    key = _packed(record, "_version")  # an etcd revision: one object's at most
    with _recent_lock:
        found = cache.get(key)
    if found is not None and found[0] is record:
        return found[1]
    parsed = parse()
    _remember(cache, record, parsed)
    return parsed


def _remember(
    cache: dict[str, tuple[StoredRecommendation, _Parsed]],
    record: StoredRecommendation,
    parsed: _Parsed,
) -> None:
    key = _packed(record, "_version")
    with _recent_lock:
        cache.pop(key, None)
        cache[key] = (record, parsed)
        while len(cache) > RECENT:
            del cache[next(iter(cache))]
