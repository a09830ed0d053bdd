"""Pod health and adoption for rollback monitoring (app/policy/rollback_health.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest

from app.model.annotations import POD_INFO
from app.model.crd import Guardrails, RollbackGuardrails
from app.policy.guardrails import BUILTIN_GUARDRAILS, resolve_guardrails
from app.policy.rollback_health import (
    CPU_THROTTLING,
    Applied,
    HealthThresholds,
    carries,
    is_live,
    pod_health,
    restart_counts,
    running_resources,
    thresholds_for,
)
from tests.app import builders as b

START = b.NOW - timedelta(minutes=5)
LOW = {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "300Mi"}}


def status(name: str = "app", restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": name, "restartCount": restarts, "state": {"running": {}}, **extra}


def terminated(reason: str, at: Any) -> dict[str, Any]:
    return {"terminated": {"reason": reason, "exitCode": 137, "finishedAt": b.ts(at)}}


def pod(
    *statuses: dict[str, Any],
    created: Any = START + timedelta(seconds=10),
    conditions: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    containers: dict[str, Any] | None = None,
) -> dict[str, Any]:
    p = b.pod(
        containers=containers or {"app": LOW},
        statuses=list(statuses) or [status()],
        annotations=annotations,
    )
    p["metadata"]["creationTimestamp"] = b.ts(created)
    if conditions:
        p["status"]["conditions"] = conditions
    return p


T = HealthThresholds()


def test_a_running_pod_is_healthy() -> None:
    assert pod_health(pod(), T, START).healthy


def test_an_oom_kill_inside_the_window_is_unhealthy() -> None:
    p = pod(status(restarts=1, lastState=terminated("OOMKilled", START + timedelta(minutes=1))))
    health = pod_health(p, T, START)
    assert (health.reason, health.detail) == ("oomKilled", "container app OOM-killed 1 time(s)")


def test_oom_kills_below_the_threshold_are_tolerated() -> None:
    p = pod(status(restarts=1, lastState=terminated("OOMKilled", START + timedelta(minutes=1))))
    assert pod_health(p, HealthThresholds(oom_kills=2), START).healthy


def test_a_container_being_oom_killed_right_now_counts() -> None:
    p = pod({"name": "app", "restartCount": 0, "state": terminated("OOMKilled", START)})
    assert pod_health(p, T, START).reason == "oomKilled"


def test_restarts_before_the_window_of_an_older_pod_do_not_count() -> None:
    # A pod resized in place keeps its restart count from before the change.
    old = pod(
        status(restarts=7, lastState=terminated("OOMKilled", START - timedelta(hours=2))),
        created=START - timedelta(days=1),
    )
    assert pod_health(old, T, START).healthy
    again = pod(
        status(restarts=7, lastState=terminated("Error", START + timedelta(minutes=1))),
        created=START - timedelta(days=1),
    )
    assert pod_health(again, T, START).reason == "restarts"


def test_restarts_at_the_threshold_are_unhealthy_below_it_are_not() -> None:
    at = START + timedelta(minutes=1)
    assert pod_health(pod(status(restarts=2, lastState=terminated("Error", at))), T, START).healthy
    three = pod_health(pod(status(restarts=3, lastState=terminated("Error", at))), T, START)
    assert three.reason == "restarts"


def test_crash_loop_back_off_is_unhealthy() -> None:
    p = pod(status(restarts=1, state={"waiting": {"reason": "CrashLoopBackOff"}}))
    assert pod_health(p, T, START).reason == "crashLoopBackOff"


def test_unschedulable_is_unhealthy() -> None:
    cond = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/1 nodes are available: 1 Insufficient memory.",
    }
    health = pod_health(pod(conditions=[cond]), T, START)
    assert health.reason == "unschedulable"
    assert "Insufficient memory" in health.detail


def test_throttling_at_the_ratio_is_unhealthy() -> None:
    hot = pod(annotations={CPU_THROTTLING: orjson.dumps({"app": "0.25"}).decode()})
    cool = pod(annotations={CPU_THROTTLING: orjson.dumps({"app": "0.2"}).decode()})
    assert pod_health(hot, T, START).reason == "throttled"
    assert pod_health(cool, T, START).healthy
    assert pod_health(pod(annotations={CPU_THROTTLING: "junk"}), T, START).healthy


def test_the_most_telling_reason_is_reported_first() -> None:
    p = pod(
        status(
            restarts=4,
            lastState=terminated("OOMKilled", START + timedelta(minutes=1)),
            state={"waiting": {"reason": "CrashLoopBackOff"}},
        )
    )
    health = pod_health(p, T, START)
    assert health.reason == "oomKilled"
    assert "CrashLoopBackOff" in health.detail and "restarted 4" in health.detail


def test_thresholds_take_the_strictest_contributing_policy() -> None:
    loose = resolve_guardrails(None, Guardrails(rollback=RollbackGuardrails(restarts=9)))
    strict = resolve_guardrails(
        None, Guardrails(rollback=RollbackGuardrails(oom_kills=0, throttling_ratio="0.5"))
    )
    assert thresholds_for([loose, strict]) == HealthThresholds(1, 3, 0.25)
    assert thresholds_for([]) == HealthThresholds(
        oom_kills=BUILTIN_GUARDRAILS.rollback.oom_kills,  # type: ignore[union-attr]
        restarts=3,
        throttling_ratio=0.25,
    )


def info(fingerprint: str, values: dict[str, Any]) -> dict[str, str]:
    return {POD_INFO: orjson.dumps({"fingerprint": fingerprint, "containers": values}).decode()}


def test_a_pod_carries_the_fingerprint_the_webhook_wrote_while_it_runs_those_values() -> None:
    p = pod(annotations=info("f1", {"app": LOW}))
    assert carries(p, "f1", None)
    assert not carries(p, "f2", None)


def test_a_pod_rolled_back_in_place_no_longer_carries_its_admission_fingerprint() -> None:
    p = pod(annotations=info("f1", {"app": LOW}), containers={"app": b.APP_RES})
    assert not carries(p, "f1", None)


def test_a_pod_resized_in_place_carries_the_reconcilers_applied_values() -> None:
    applied = Applied("f1", START, {"app": {"requests": {"memory": "268435456"}}})
    assert carries(pod(), "f1", applied)  # 256Mi == 268435456 by amount
    assert not carries(pod(), "f2", applied)


def test_a_resize_counts_only_once_the_kubelet_actuated_it() -> None:
    p = pod(status(resources={"requests": {"cpu": "400m", "memory": "512Mi"}}))
    applied = Applied("f1", START, {"app": {"requests": {"memory": "256Mi"}}})
    assert running_resources(p)["app"]["requests"]["memory"] == "512Mi"
    assert not carries(p, "f1", applied)


@pytest.mark.parametrize(
    ("meta", "status_extra", "live"),
    [
        ({}, {}, True),
        ({"deletionTimestamp": "2026-12-01T12:00:00Z"}, {}, False),
        ({}, {"phase": "Failed", "reason": "Evicted"}, False),
        ({}, {"phase": "Failed"}, True),
    ],
)
def test_live_pods(meta: dict[str, Any], status_extra: dict[str, Any], live: bool) -> None:
    p = pod()
    p["metadata"].update(meta)
    p["status"].update(status_extra)
    assert is_live(p) is live


def test_an_oom_kill_in_the_second_the_window_opened_counts() -> None:
    """finishedAt has whole seconds; the window's start has microseconds. A kill 0.3 s after
    the change reads as 0.7 s before it, and was lost."""
    opened = START.replace(microsecond=700_000)
    killed_at = START.replace(microsecond=0)  # what the API writes for a kill at 0.9 s
    old = pod(
        status(restarts=1, lastState=terminated("OOMKilled", killed_at)),
        created=START - timedelta(minutes=10),
    )
    health = pod_health(old, T, opened)
    assert not health.healthy and health.reason == "oomKilled"
    earlier = pod(
        status(restarts=1, lastState=terminated("OOMKilled", killed_at - timedelta(seconds=1))),
        created=START - timedelta(minutes=10),
    )
    assert pod_health(earlier, T, opened).healthy  # a kill a second before: not this change's


def test_a_baseline_counts_only_the_restarts_after_the_change() -> None:
    """The restart count when the change was sent decides, not the termination's time."""
    old = pod(
        status(restarts=4, lastState=terminated("OOMKilled", START - timedelta(seconds=1))),
        created=START - timedelta(minutes=10),
    )
    assert not pod_health(old, T, START, {"app": 3}).healthy  # one kill since: this change's
    assert pod_health(old, T, START, {"app": 4}).healthy  # none since
    restarts = HealthThresholds(restarts=2)
    crashing = pod(status(restarts=7), created=START - timedelta(minutes=10))
    assert pod_health(crashing, restarts, START, {"app": 6}).healthy  # 1 restart since
    assert pod_health(crashing, restarts, START, {"app": 5}).reason == "restarts"


def test_restart_counts_are_the_baseline_taken_when_a_change_is_sent() -> None:
    p = pod(status(restarts=2), status("sidecar", restarts=1))
    p["metadata"]["uid"] = "u1"
    assert restart_counts([p, {"metadata": {}}]) == {"u1": {"app": 2, "sidecar": 1}}
