"""Enablement (SPEC §5): upsize/downsize, setFromUnspecified, floor/ceiling."""

from __future__ import annotations

from typing import Any

from app.model.crd import AutomationStrategySpec
from app.policy.enablement import GPU, Enabled, apply_switches, resolve_switches
from tests.app import builders as b


def spec(**data: Any) -> AutomationStrategySpec:
    return AutomationStrategySpec.model_validate(data)


def run(
    s: AutomationStrategySpec,
    resource: str,
    fld: str,
    current: int | None,
    desired: int,
    container: str = "app",
) -> Enabled:
    switches = resolve_switches(s, container=container, field=fld, resource=resource)
    return apply_switches(switches, current=current, desired=desired)


DEFAULT = spec()


def test_defaults_allow_cpu_memory_but_not_cpu_limits_from_unspecified() -> None:
    assert run(DEFAULT, "cpu", "requests", 500, 250) == Enabled(250)
    assert run(DEFAULT, "cpu", "requests", None, 250) == Enabled(250)
    assert run(DEFAULT, "memory", "limits", None, 1 << 30) == Enabled(1 << 30)
    assert run(DEFAULT, "cpu", "limits", None, 500) == Enabled(None, "SetFromUnspecifiedDisabled")
    assert run(DEFAULT, "cpu", "limits", 1000, 500) == Enabled(500)


def test_gpu_is_off_by_default() -> None:
    assert run(DEFAULT, GPU, "requests", 1, 2) == Enabled(None, "UpsizeDisabled")
    assert run(DEFAULT, GPU, "requests", 2, 1) == Enabled(None, "DownsizeDisabled")
    assert run(DEFAULT, GPU, "limits", None, 1) == Enabled(None, "SetFromUnspecifiedDisabled")
    on = spec(enablement={"gpu": {"requests": {"upsize": True}}})
    assert run(on, GPU, "requests", 1, 2) == Enabled(2)


def test_unsupported_resource() -> None:
    assert run(DEFAULT, "ephemeral-storage", "requests", 1, 2) == Enabled(
        None, "UnsupportedResource"
    )


def test_upsize_downsize_switches() -> None:
    s = spec(
        enablement={
            "cpu": {"requests": {"upsize": False}},
            "memory": {"requests": {"downsize": False}},
        }
    )
    assert run(s, "cpu", "requests", 100, 200) == Enabled(None, "UpsizeDisabled")
    assert run(s, "cpu", "requests", 200, 100) == Enabled(100)
    assert run(s, "memory", "requests", 200, 100) == Enabled(None, "DownsizeDisabled")
    assert run(s, "memory", "requests", 100, 200) == Enabled(200)


def test_floor_and_ceiling_clamp_with_container_override() -> None:
    s = spec(
        enablement={
            "cpu": {
                "requests": {
                    "floor": "100m",
                    "ceiling": "2",
                    "containers": {"db": {"floor": "500m"}},
                }
            }
        }
    )
    assert run(s, "cpu", "requests", 400, 50) == Enabled(100)
    assert run(s, "cpu", "requests", 400, 5000) == Enabled(2000)
    assert run(s, "cpu", "requests", 800, 50, container="db") == Enabled(500)
    assert run(s, "cpu", "requests", 800, 5000, container="db") == Enabled(2000)  # inherited


def test_clamp_then_direction() -> None:
    # A decrease clamped up by the floor above the current value is an upsize.
    s = spec(enablement={"cpu": {"requests": {"floor": "500m", "upsize": False}}})
    assert run(s, "cpu", "requests", 400, 100) == Enabled(None, "UpsizeDisabled")


def test_disabled_downsize_in_a_decision_is_skipped_not_enabled() -> None:
    objs = [
        b.namespace(),
        b.strategy(
            enablement={
                "cpu": {"requests": {"downsize": False}},
                "memory": {"requests": {"downsize": False}},
            }
        ),
        b.deployment(),
        b.static(),
    ]
    d = b.decide(b.view(*objs), b.pod())
    assert (d.outcome, d.reason) == ("skipped", "NotEnabled")
    assert b.reasons(d) == {
        "app.requests.cpu": "DownsizeDisabled",
        "app.requests.memory": "DownsizeDisabled",
    }


def test_missing_strategy_is_blocked() -> None:
    objs = [b.namespace(), b.deployment(), b.static(strategy="nope")]
    d = b.decide(b.view(*objs), b.pod())
    assert (d.outcome, d.reason) == ("blocked", "StrategyNotFound")


def test_floor_applies_in_a_decision() -> None:
    objs = [
        b.namespace(),
        b.strategy(enablement={"cpu": {"requests": {"floor": "300m"}}}),
        b.deployment(),
        b.static(containers={"app": {"requests": {"cpu": "250m"}}}),
    ]
    assert b.decide(b.view(*objs), b.pod()).values["app"]["requests"]["cpu"] == "300m"
