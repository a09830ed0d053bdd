"""GlobalConfiguration status: the webhook's health from its Lease and the recommendation
reloads; times move only when what they time changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.policy.global_status import WEBHOOK_HEALTHY, Reload, global_status, reload_of
from app.store.sources import SourceState

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
MAX_AGE = timedelta(seconds=60)
QUIET = Reload(frozenset({("shop", "recs", "7")}), 12, ())


def status(previous=None, renewed=NOW, reload=QUIET, changed=False, now=NOW):  # type: ignore[no-untyped-def]
    return global_status(
        previous,
        renewed_at=renewed,
        max_age=MAX_AGE,
        reload=reload,
        reload_changed=changed,
        now=now,
    )


def condition(s: dict) -> dict:  # type: ignore[type-arg]
    (c,) = [c for c in s["conditions"] if c["type"] == WEBHOOK_HEALTHY]
    return c


def test_a_fresh_lease_is_healthy_and_a_stale_or_missing_one_is_not() -> None:
    assert condition(status())["status"] == "True"
    stale = status(renewed=NOW - timedelta(seconds=61))
    assert (condition(stale)["status"], condition(stale)["reason"]) == ("False", "LeaseStale")
    assert stale["webhookHealth"]["healthy"] is False
    assert condition(status(renewed=None))["reason"] == "NoLease"


def test_times_move_only_on_a_change() -> None:
    first = status(changed=True)
    later = NOW + timedelta(minutes=5)
    again = status(first, renewed=later, now=later)
    assert again == first
    flipped = status(first, renewed=None, now=later)
    assert condition(flipped)["lastTransitionTime"] == "2026-12-03T12:05:00Z"
    reloaded = status(first, renewed=later, now=later, changed=True)
    assert reloaded["recommendationReload"]["lastTime"] == "2026-12-03T12:05:00Z"


def test_the_reload_counts_rows_of_the_configmaps_that_loaded_and_names_the_others() -> None:
    good = SourceState("shop", "recs", "u1", "7", rows=[object()] * 3)  # type: ignore[list-item]
    bad = SourceState("web", "recs", "u2", "9", failure="recommendations.json is not JSON")
    reload = reload_of([good, bad])
    assert reload.rows == 3
    s = status(reload=reload, changed=True)
    assert s["recommendationReload"]["lastCount"] == 3
    assert s["recommendationReload"]["lastError"] == "web/recs: recommendations.json is not JSON"
    later = NOW + timedelta(minutes=1)
    assert (
        status(s, reload=reload, now=later, renewed=later)["recommendationReload"]
        == (s["recommendationReload"])
    )
