"""The view keeps a RightsizingRecommendation's status as JSON bytes (app/records.py):
every read gives the status it was given, and the record stays one object until a new
version arrives."""

from __future__ import annotations

from datetime import timedelta

from app.models import KerfResource, LastApplied, LastRollback, RecommendationStatus
from app.owners import WorkloadRef
from app.records import StoredRecommendation
from app.view import ClusterView
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
    kept = view.recommendation_for(REF)
    assert isinstance(kept, StoredRecommendation)
    assert not any(isinstance(v, RecommendationStatus) for v in vars(kept).values())
    assert kept.status == given.status
    assert kept.status.last_rollback is not None  # a field deep inside, parsed again
    assert kept.model_dump() == given.model_dump()


def test_the_record_is_one_object_until_a_new_version_arrives() -> None:
    view = ClusterView()
    view.apply(_record())
    first = view.recommendation_for(REF)
    assert view.recommendation_for(REF) is first
    view.apply(_record())
    assert view.recommendation_for(REF) is not first


def test_a_changed_read_does_not_reach_the_view() -> None:
    view = ClusterView()
    view.apply(_record())
    kept = view.recommendation_for(REF)
    assert kept is not None and kept.status is not None
    read = kept.status
    read.phase = "Failed"
    assert kept.status.phase != "Failed"


def test_a_record_without_status_reads_none() -> None:
    given = _record().model_copy(update={"status": None})
    view = ClusterView()
    view.apply(given)
    kept = view.recommendation_for(REF)
    assert kept is not None and kept.status is None


def test_a_plan_keeps_the_last_change_time_not_the_status_models() -> None:
    view = b.view(*b.base_objects(), b.static(), _record())
    b.decide(view, b.pod())
    workload = view.workload(REF)
    assert workload is not None
    memo = view.plan_for(workload).memo
    facts = [v for k, v in memo.items() if k[0] == "facts"]
    assert facts
    for found in facts:
        kept = [getattr(found, name) for name in found.__slots__]
        assert not any(isinstance(v, LastApplied | LastRollback) for v in kept)
        assert found.last_applied_at == b.NOW - timedelta(days=5)
