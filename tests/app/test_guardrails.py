"""Per-value rules and settings layering (SPEC §6, seed guardrails.txt)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.model.crd import Guardrails
from app.model.quantities import MIB, parse_resource
from app.policy.guardrails import (
    BUILTIN_GUARDRAILS,
    GuardrailSettings,
    ValueContext,
    ValueOutcome,
    apply_value_rules,
    decrease_floor,
    resolve_guardrails,
)

defaults = resolve_guardrails(None, None)
DEFAULTS = defaults


def m(text: str) -> int:
    return parse_resource("cpu", text)


def mem(text: str) -> int:
    return parse_resource("memory", text)


def rule(
    resource: str,
    current: int | None,
    desired: int,
    *,
    fld: str = "requests",
    settings: GuardrailSettings = DEFAULTS,
    tolerance: int = 5,
    **context: object,
) -> ValueOutcome:
    return apply_value_rules(
        field=fld,
        resource=resource,
        current=current,
        desired=desired,
        settings=settings,
        tolerance_percent=tolerance,
        context=ValueContext(**context),
    )  # type: ignore[arg-type]


def test_builtin_defaults_match_the_seed() -> None:
    assert defaults == GuardrailSettings(
        learning_period=timedelta(hours=168),
        min_confidence=0.7,
        max_change_percent=50,
        min_cpu=10,
        min_memory=32 * MIB,
        cooldown=timedelta(hours=24),
        watch_duration=timedelta(minutes=30),
        oom_kills=1,
        restarts=3,
        throttling_ratio=0.25,
        allow_single_replica_disruption=False,
        fallback_after=timedelta(minutes=10),
    )
    assert BUILTIN_GUARDRAILS.max_change_percent == 50


def test_layering_builtin_then_global_then_policy() -> None:
    global_defaults = Guardrails.model_validate(
        {
            "maxChangePercent": 30,
            "minCPU": "50m",
            "cooldown": "48h",
            "rollback": {"throttlingRatio": "0.5", "restarts": 5},
        }
    )
    policy = Guardrails.model_validate(
        {"maxChangePercent": 20, "rollback": {"restarts": 7}, "learningPeriod": "336h"}
    )
    s = resolve_guardrails(global_defaults, policy)
    assert s.max_change_percent == 20  # policy wins
    assert s.min_cpu == 50  # global wins over built-in
    assert s.cooldown == timedelta(hours=48)
    assert s.learning_period == timedelta(hours=336)
    assert s.throttling_ratio == 0.5  # nested field from the global layer
    assert s.restarts == 7  # nested field from the policy
    assert s.oom_kills == 1  # nested built-in
    assert s.min_memory == 32 * MIB and s.min_confidence == 0.7
    assert resolve_guardrails(global_defaults, None).max_change_percent == 30


# ------------------------------------------------------------------ maximum change


@pytest.mark.parametrize(
    ("current", "percent", "resource", "expected"),
    [
        (1000, 50, "cpu", 500),
        (333, 50, "cpu", 167),  # 166.5 rounds up to a whole millicore
        (1000, 30, "cpu", 700),
        (1, 50, "cpu", 1),
        (1000 * MIB + 1, 50, "memory", 501 * MIB),  # 500Mi + ½ byte rounds up to MiB
        (1000 * MIB, 50, "memory", 500 * MIB),
        (100 * MIB, 30, "memory", 70 * MIB),
        (333 * MIB, 50, "memory", 167 * MIB),
    ],
)
def test_decrease_floor_rounds_up(current: int, percent: int, resource: str, expected: int) -> None:
    assert decrease_floor(current, percent, resource) == expected


def test_step_limits_a_decrease_to_half() -> None:
    assert rule("cpu", m("1000m"), m("100m")) == ValueOutcome(500)
    assert rule("cpu", m("333m"), m("10m")) == ValueOutcome(167)
    assert rule("memory", mem("1000Mi") + 1, mem("100Mi")) == ValueOutcome(mem("501Mi"))
    assert rule("memory", mem("1000Mi") + 1, mem("100Mi"), fld="limits") == ValueOutcome(
        mem("501Mi")
    )


def test_increases_are_never_capped() -> None:
    assert rule("cpu", m("100m"), m("8")) == ValueOutcome(8000)
    assert rule("memory", mem("64Mi"), mem("16Gi")) == ValueOutcome(mem("16Gi"))


def test_policy_max_change_percent() -> None:
    s = resolve_guardrails(None, Guardrails.model_validate({"maxChangePercent": 30}))
    assert rule("cpu", m("1000m"), m("100m"), settings=s) == ValueOutcome(700)


# ------------------------------------------------------------------ minimums


def test_requests_are_raised_to_the_minimums() -> None:
    assert rule("cpu", m("15m"), m("1m")) == ValueOutcome(10)
    assert rule("memory", mem("40Mi"), mem("1Mi")) == ValueOutcome(mem("32Mi"))
    assert rule("cpu", None, m("1m")) == ValueOutcome(10)
    assert rule("memory", None, mem("8Mi")) == ValueOutcome(mem("32Mi"))
    s = resolve_guardrails(None, Guardrails.model_validate({"minCPU": "50m", "minMemory": "64Mi"}))
    assert rule("cpu", None, m("20m"), settings=s) == ValueOutcome(50)
    assert rule("memory", None, mem("40Mi"), settings=s) == ValueOutcome(mem("64Mi"))


def test_minimums_do_not_apply_to_limits() -> None:
    assert rule("cpu", None, m("5m"), fld="limits") == ValueOutcome(5)


# ------------------------------------------------------------------ tolerance


def test_tolerance_below_five_percent_is_no_significant_change() -> None:
    assert rule("cpu", 1000, 960) == ValueOutcome(None, "NoSignificantChange")
    assert rule("cpu", 1000, 1049) == ValueOutcome(None, "NoSignificantChange")
    assert rule("cpu", 1000, 950) == ValueOutcome(950)  # exactly 5 % changes
    assert rule("cpu", 1000, 1050) == ValueOutcome(1050)
    assert rule("cpu", 1000, 1000) == ValueOutcome(None, "NoSignificantChange")
    assert rule("cpu", 1000, 960, tolerance=0) == ValueOutcome(960)
    assert rule("cpu", 1000, 1040, tolerance=10) == ValueOutcome(None, "NoSignificantChange")


def test_tolerance_applies_after_the_minimum() -> None:
    # 10m → 1m is raised to the 10m minimum: nothing changes.
    assert rule("cpu", 10, 1) == ValueOutcome(None, "NoSignificantChange")


# ------------------------------------------------------------------ refusals


def test_throttled_container_never_gets_a_lower_cpu_request() -> None:
    assert rule("cpu", 500, 250, throttled=True) == ValueOutcome(None, "Throttled")
    assert rule("cpu", 500, 800, throttled=True) == ValueOutcome(800)
    assert rule("cpu", 500, 250, fld="limits", throttled=True) == ValueOutcome(250)
    assert rule("memory", mem("512Mi"), mem("256Mi"), throttled=True) == ValueOutcome(mem("256Mi"))


def test_oom_killed_container_never_gets_lower_memory_request_or_limit() -> None:
    for fld in ("requests", "limits"):
        assert rule("memory", mem("512Mi"), mem("256Mi"), fld=fld, oom_killed=True) == ValueOutcome(
            None, "OOMKilled"
        )
        assert rule("memory", mem("512Mi"), mem("1Gi"), fld=fld, oom_killed=True) == ValueOutcome(
            mem("1Gi")
        )
    assert rule("cpu", 500, 250, oom_killed=True) == ValueOutcome(250)


def test_jvm_fixed_heap_floor_is_heap_times_1_25() -> None:
    heap = mem("1Gi")
    assert rule("memory", mem("2Gi"), mem("1Gi"), jvm_heap_bytes=heap) == ValueOutcome(
        None, "JVMFixedHeap"
    )
    assert rule(
        "memory", mem("2Gi"), mem("1Gi"), fld="limits", jvm_heap_bytes=heap
    ) == ValueOutcome(None, "JVMFixedHeap")
    assert rule("memory", mem("2Gi"), mem("1280Mi"), jvm_heap_bytes=heap) == ValueOutcome(
        mem("1280Mi")
    )
    assert rule("memory", mem("2Gi"), mem("1279Mi"), jvm_heap_bytes=heap) == ValueOutcome(
        None, "JVMFixedHeap"
    )


def test_rollback_cooldown_refuses_decreases_of_that_resource_only() -> None:
    ctx = {"rollback_cooldown": frozenset({"cpu"})}
    assert rule("cpu", 500, 250, **ctx) == ValueOutcome(None, "Cooldown")
    assert rule("cpu", 500, 800, **ctx) == ValueOutcome(800)
    assert rule("memory", mem("512Mi"), mem("256Mi"), **ctx) == ValueOutcome(mem("256Mi"))


def test_decrease_step_never_turns_into_an_increase_below_one_mib() -> None:
    from app.policy.guardrails import decrease_floor

    half_mib = 512 * 1024
    assert decrease_floor(half_mib, 50, "memory") == half_mib
