"""The view keeps a RightsizingRecommendation as compressed JSON (app/model/records.py):
every read gives the metadata, spec and status it was given, and the record stays one
object until a new version arrives."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from app.model import records
from app.model.crd import (
    InvalidObject,
    KerfResource,
    LastApplied,
    LastRollback,
    RecommendationStatus,
    parse_object,
)
from app.model.owners import WorkloadRef
from app.model.records import RECENT, StoredRecommendation, record_version
from app.policy.plans import plan_for
from app.store.slim import kerf_metadata, kerf_object
from app.store.view import ClusterView
from tests.app import builders as b

REF = WorkloadRef("Deployment", b.NS, "web")


def _record() -> KerfResource:
    return b.recommendation(
        applied_at=b.NOW - timedelta(days=5),
        rollback_at=b.NOW - timedelta(hours=2),
        rollback_resources=["cpu"],
    )


def test_the_view_keeps_no_status_model_and_reads_back_the_same_status() -> None:
    given = _record()
    view = ClusterView()
    view.apply(given)
    kept = view.recommendations("record", REF)
    assert isinstance(kept, StoredRecommendation)
    assert not any(isinstance(v, RecommendationStatus) for v in vars(kept).values())
    assert kept.status == given.status
    assert kept.status.last_rollback is not None  # a field deep inside, parsed again
    assert kept.model_dump() == given.model_dump()


def test_the_view_keeps_no_model_of_a_record_and_reads_back_the_same_fields() -> None:
    given = _record().model_copy(
        update={
            "metadata": _record().metadata.model_copy(
                update={
                    "uid": "u-1",
                    "resource_version": "42",
                    "generation": 3,
                    "annotations": {"rightsizing.kubex.ai/approve": "p-1"},
                    "labels": {"team": "shop"},
                    "creation_timestamp": b.NOW,
                }
            )
        }
    )
    view = ClusterView()
    view.apply(given)
    kept = view.recommendations("record", REF)
    assert isinstance(kept, StoredRecommendation)
    assert vars(kept) == {}
    assert not any(isinstance(v, BaseModel) for v in (kept.__pydantic_private__ or {}).values())
    assert (kept.api_version, kept.kind) == (given.api_version, given.kind)
    assert kept.metadata == given.metadata and kept.spec == given.spec
    assert kept.metadata.resource_version == "42" and kept.metadata.creation_timestamp == b.NOW
    assert kept.spec.target_ref.name == "web"
    assert kept.model_dump_json() == given.model_dump_json()
    assert kept.whole() == given


def test_reads_of_one_version_parse_its_head_once_while_recent() -> None:
    view = ClusterView()
    view.apply(_record())
    kept = view.recommendations("record", REF)
    assert kept is not None
    first = kept.metadata
    assert kept.metadata is first and kept.spec is kept.spec  # parsed once for a pass
    for n in range(RECENT):  # other records' heads read since: parsed again
        view.apply(b.recommendation(f"other-{n}", applied_at=b.NOW))
        other = view.recommendations("record", WorkloadRef("Deployment", b.NS, f"other-{n}"))
        assert other is not None and other.metadata.name == f"deployment-other-{n}"
    assert kept.metadata is not first and kept.metadata == first


def test_the_version_of_a_record_is_read_without_parsing_its_head() -> None:
    given = _record()
    given = given.model_copy(
        update={"metadata": given.metadata.model_copy(update={"resource_version": "42"})}
    )
    view = ClusterView()
    view.apply(given)
    kept = view.recommendations("record", REF)
    assert kept is not None
    parsed = dict(records._heads)
    assert record_version(kept) == "42" == record_version(given)
    assert records._heads == parsed
    assert record_version(None) == ""


def test_the_record_is_one_object_until_a_new_version_arrives() -> None:
    view = ClusterView()
    view.apply(_record())
    first = view.recommendations("record", REF)
    assert view.recommendations("record", REF) is first
    view.apply(_record())
    assert view.recommendations("record", REF) is not first


def test_reads_of_one_version_parse_its_status_once_while_recent() -> None:
    view = ClusterView()
    view.apply(_record())
    kept = view.recommendations("record", REF)
    assert kept is not None
    first = kept.status
    assert kept.status is first  # a pass reads it several times: parsed once
    for n in range(RECENT):  # other records' statuses read since: parsed again
        view.apply(b.recommendation(f"other-{n}", applied_at=b.NOW))
        other = view.recommendations("record", WorkloadRef("Deployment", b.NS, f"other-{n}"))
        assert other is not None and other.status is not None
    again = kept.status
    assert again is not first and again == first
    view.apply(_record())  # a new version: its own status
    newer = view.recommendations("record", REF)
    assert newer is not None and newer.status is not again and newer.status == again


def test_a_record_without_status_reads_none() -> None:
    given = _record().model_copy(update={"status": None})
    view = ClusterView()
    view.apply(given)
    kept = view.recommendations("record", REF)
    assert kept is not None and kept.status is None


def test_a_plan_keeps_the_last_change_time_not_the_status_models() -> None:
    view = b.view(*b.base_objects(), b.static(), _record())
    b.decide(view, b.pod())
    workload = view.workload(REF)
    assert workload is not None
    memo = plan_for(view, workload).memo
    facts = [v for k, v in memo.items() if k[0] == "facts"]
    assert facts
    for found in facts:
        kept = [getattr(found, f.name) for f in dataclasses.fields(found)]
        assert not any(isinstance(v, LastApplied | LastRollback) for v in kept)
        assert found.last_applied_at == b.NOW - timedelta(days=5)


def _as_api_sends(record: KerfResource) -> dict[str, object]:
    doc = orjson.loads(record.model_dump_json(by_alias=True, exclude_none=True))
    doc["metadata"] |= {"resourceVersion": "77", "uid": "u-7", "managedFields": [{"x": 1}]}
    return doc


def _from_api(doc: dict[str, object]) -> StoredRecommendation:
    return records.record_from_api(doc, kerf_metadata(doc), "watch")


def test_a_record_from_the_api_reads_as_the_parsed_record_does() -> None:
    doc = _as_api_sends(_record())
    by_parse = records.stored(parse_object(kerf_object(copy.deepcopy(doc)), "watch"))
    kept = _from_api(doc)
    assert isinstance(kept, StoredRecommendation) and vars(kept) == {}
    assert kept.whole() == by_parse.whole()
    assert record_version(kept) == "77"
    assert kept.model_dump_json() == by_parse.model_dump_json()


def test_a_record_from_the_api_without_status_reads_none() -> None:
    doc = _as_api_sends(_record())
    del doc["status"]
    kept = _from_api(doc)
    assert kept.status is None and kept.spec.target_ref.name == "web"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["status"].update(phase="Sideways"), "status.phase: Input should be"),
        (lambda d: d["spec"].update(extra=1), "spec.extra: unknown field (misspelt?)"),
        (lambda d: d.update(extra=1), "extra: unknown field (misspelt?)"),
        (lambda d: d["metadata"].pop("namespace"), "metadata.namespace: required"),
        (lambda d: d.pop("spec"), "spec: Field required"),
        (lambda d: d.update(apiVersion="v1"), "apiVersion must be rightsizing.kubex.ai/v1alpha1"),
    ],
)
def test_a_bad_record_from_the_api_is_refused_as_parse_object_refuses_it(
    change: Callable[[dict[str, Any]], object], message: str
) -> None:
    doc = _as_api_sends(_record())
    change(doc)
    with pytest.raises(InvalidObject) as parsed:
        parse_object(kerf_object(copy.deepcopy(doc)), "watch")
    with pytest.raises(InvalidObject) as from_api:
        _from_api(doc)
    assert message in str(from_api.value)
    assert str(from_api.value).startswith("watch: RightsizingRecommendation")
    assert message in str(parsed.value)
