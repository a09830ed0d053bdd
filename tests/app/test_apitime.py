"""The API server's time formats and who a replica is (app.model.apitime, app.kube.lease)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from app.kube.lease import holder_identity, own_namespace
from app.model.apitime import micro_time, rfc3339, rfc3339_as_kept, unix_rfc3339

T0 = datetime(2026, 11, 28, 10, 0, 0, 123456, tzinfo=UTC)
PLUS_TWO = timezone(timedelta(hours=2))


def test_micro_time_is_utc_with_microseconds() -> None:
    assert micro_time(T0.astimezone(PLUS_TWO)) == "2026-11-28T10:00:00.123456Z"


def test_rfc3339_is_utc_to_the_second() -> None:
    assert rfc3339(T0.astimezone(PLUS_TWO)) == "2026-11-28T10:00:00Z"
    assert unix_rfc3339(T0.timestamp()) == "2026-11-28T10:00:00Z"


def test_kerf_keeps_its_own_times_as_they_are() -> None:
    assert rfc3339_as_kept(T0) == "2026-11-28T10:00:00.123456Z"
    assert rfc3339_as_kept(T0.replace(microsecond=0)) == "2026-11-28T10:00:00Z"
    assert rfc3339_as_kept(T0.astimezone(PLUS_TWO)) == "2026-11-28T12:00:00.123456+02:00"


def test_identity_and_namespace_from_the_downward_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "kerf-webhook-7d4b9-abcde")
    monkeypatch.setenv("POD_NAMESPACE", "rightsizing")
    assert (holder_identity(), own_namespace()) == ("kerf-webhook-7d4b9-abcde", "rightsizing")


def test_identity_and_namespace_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("POD_NAME", raising=False)
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.setattr("app.kube.lease.SERVICE_ACCOUNT_NAMESPACE", tmp_path / "absent")
    assert holder_identity() and own_namespace() == "kerf-system"
