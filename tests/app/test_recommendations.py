"""The recommendation source (SPEC §4)."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.model.quantities import parse_resource
from app.model.recommendations import (
    index_rows,
    is_recommendation_configmap,
    parse_rows,
    rows_from_configmap,
)
from tests.app import builders as b


def doc(*rows: object) -> bytes:
    return orjson.dumps({"recommendations": list(rows)})


def test_spec_example_row() -> None:
    rows, warnings = parse_rows(doc(b.row(limits={"cpu": "500m", "memory": "512Mi"})), "src")
    assert warnings == []
    (r,) = rows
    assert (r.namespace, r.owner_kind, r.owner_name, r.container) == (
        b.NS,
        "Deployment",
        "web",
        "app",
    )
    assert r.requests == {"cpu": "250m", "memory": "256Mi"}
    assert r.limits == {"cpu": "500m", "memory": "512Mi"}
    assert (r.coverage_hours, r.samples, r.confidence, r.cpu_throttling_ratio) == (
        240,
        20160,
        0.93,
        0.02,
    )
    assert r.analyzed_at == b.NOW - timedelta(days=1)


def test_limits_and_throttling_are_optional() -> None:
    rows, warnings = parse_rows(doc(b.row(throttling=None)), "src")
    assert warnings == [] and rows[0].limits == {} and rows[0].cpu_throttling_ratio is None


def test_rows_of_a_document_share_their_equal_values() -> None:
    rows, _ = parse_rows(
        doc(
            b.row(workload="web"),
            b.row(workload="api"),
            b.row(workload="db", requests={"cpu": "1"}, confidence=0.5, coverage_hours=240.0),
        ),
        "src",
    )
    web, api, db = rows
    for name in ("requests", "limits", "analyzed_at", "coverage_hours", "samples", "confidence"):
        assert getattr(web, name) is getattr(api, name), name
    assert web.cpu_throttling_ratio is api.cpu_throttling_ratio
    assert web.limits is db.limits and web.analyzed_at is db.analyzed_at
    assert db.requests == {"cpu": "1"} and db.confidence == 0.5 and db.coverage_hours == 240
    (alone,), _ = parse_rows(doc(b.row(workload="api")), "src")
    assert api == alone


def test_a_number_shares_nothing_with_an_equal_number_of_another_type() -> None:
    # samples is 20160: a coverage of 20160 hours read first must not stand in for it
    (row,), _ = parse_rows(doc(b.row(coverage_hours=20160)), "src")
    assert row.coverage_hours == row.samples == 20160
    assert type(row.coverage_hours) is float and type(row.samples) is int


@pytest.mark.parametrize(
    ("broken", "words"),
    [
        ({"confidence": None}, "missing confidence"),
        ({"requests": {"cpu": "lots"}}, "requests.cpu"),
        ({"analyzedAt": "yesterday"}, "analyzedAt"),
        ({"analyzedAt": "2026-11-28T10:00:00"}, "time zone"),
        ({"confidence": 1.5}, "outside 0..1"),
        (
            {"requests": {"cpu": "250m", "memory": "-384Mi"}},
            "requests.memory '-384Mi' is not positive",
        ),
        ({"requests": {"cpu": "0"}}, "requests.cpu '0' is not positive"),
        ({"limits": {"memory": "0"}}, "limits.memory '0' is not positive"),
        ({"coverageHours": -5}, "coverageHours -5 is negative"),
        ({"samples": -1}, "samples -1 is negative"),
        ({"cpuThrottlingRatio": 7}, "cpuThrottlingRatio 7.0 is outside 0..1"),
        ({"confidence": "high"}, "confidence 'high' is not a number"),
        (
            {"requests": {"memory": "512Mi"}, "limits": {"memory": "256Mi"}},
            "requests.memory 512Mi is above limits.memory 256Mi",
        ),
    ],
)
def test_bad_row_is_skipped_with_a_warning_naming_it(broken: dict, words: str) -> None:
    bad = {**b.row(workload="api"), **broken}
    rows, warnings = parse_rows(doc(b.row(), bad), "ConfigMap shop/recs")
    assert [r.owner_name for r in rows] == ["web"]
    (skipped,) = warnings
    warning = skipped.warning
    assert "ConfigMap shop/recs" in warning and "recommendations[1]" in warning
    assert "shop/Deployment/api/app" in warning and words in warning
    assert (skipped.owner_key, skipped.container) == (("Deployment", b.NS, "api"), "app")


def test_not_json_is_an_error() -> None:
    with pytest.raises(ValueError, match="not JSON"):
        parse_rows("{", "src")
    with pytest.raises(ValueError, match="recommendations"):
        parse_rows("{}", "src")


def test_newest_analysis_wins() -> None:
    old = b.row(requests={"cpu": "1"}, analyzed_at=b.NOW - timedelta(days=3))
    new = b.row(requests={"cpu": "2"}, analyzed_at=b.NOW - timedelta(days=1))
    for order in ((old, new), (new, old)):
        rows, _ = parse_rows(doc(*order), "src")
        assert index_rows(rows)[("Deployment", b.NS, "web")]["app"].requests == {"cpu": "2"}


def test_configmap_label_and_missing_key() -> None:
    cm = b.configmap(b.row())
    assert is_recommendation_configmap(cm)
    assert not is_recommendation_configmap({**cm, "metadata": {"name": "x", "labels": {}}})
    with pytest.raises(ValueError, match="no recommendations.json key"):
        rows_from_configmap({**cm, "data": {}})


@given(
    row=st.fixed_dictionaries(
        {
            "cpu": st.integers(-2000, 4000).map(lambda m: f"{m}m"),
            "memory": st.integers(-1024, 4096).map(lambda m: f"{m}Mi"),
            "limit": st.one_of(st.none(), st.integers(-1024, 4096).map(lambda m: f"{m}Mi")),
            "coverageHours": st.floats(-100, 1000),
            "samples": st.integers(-10, 100_000),
            "confidence": st.floats(-1, 2),
            "throttling": st.one_of(st.none(), st.floats(-1, 8)),
        }
    )
)
def test_a_row_is_rejected_with_a_reason_or_every_value_is_sound(row: dict) -> None:
    raw = {
        **b.row(),
        "requests": {"cpu": row["cpu"], "memory": row["memory"]},
        "coverageHours": row["coverageHours"],
        "samples": row["samples"],
        "confidence": row["confidence"],
        "cpuThrottlingRatio": row["throttling"],
    }
    if row["limit"] is not None:
        raw["limits"] = {"memory": row["limit"]}
    rows, warnings = parse_rows(doc(raw), "src")
    if warnings:
        assert not rows and "skipped: " in warnings[0].warning
        return
    (parsed,) = rows
    assert all(parse_resource(r, q) > 0 for r, q in {**parsed.requests, **parsed.limits}.items())
    limit = parsed.limits.get("memory")
    if limit is not None:
        assert parse_resource("memory", parsed.requests["memory"]) <= parse_resource(
            "memory", limit
        )
    assert parsed.coverage_hours >= 0 and parsed.samples >= 0
    assert 0 <= parsed.confidence <= 1
    assert parsed.cpu_throttling_ratio is None or 0 <= parsed.cpu_throttling_ratio <= 1
