"""The order of the checks is one table (`app.decide.checks.CHECKS`), SPEC §6's order."""

from __future__ import annotations

from app.decide import checks
from app.decide.checks import CHECKS, FALLBACK_CHECKS, GATES
from tools import refgen

#: SPEC §6, "Order of checks — the first match decides", with the reasons of the
#: per-value rules at their place and node capacity as the reason it gives.
SPEC_ORDER = (
    "Audit",
    "AutomationDisabled",
    "HubUnreachable",
    "Paused",
    "ProtectedNamespace",
    "StaleRecommendation",
    "HPACoupled",
    "VPACoupled",
    "LearningPeriod",
    "LowConfidence",
    "FreezeWindow",
    "Throttled",
    "OOMKilled",
    "JVMFixedHeap",
    "NoSignificantChange",
    "RequestsExceedLimits",
    "GpuActionConflict",
    "Cooldown",
    "SingleReplicaUnsafe",
    "InsufficientNodeCapacity",
    "MaintenanceWindow",
)
#: SPEC §6: the admission path never evaluates windows, cooldown, single-replica safety
#: or node capacity; it chooses no method either (SPEC §7 is the running path's).
RUNNING_ONLY = {
    "FreezeWindow",
    "NoCommonMethod",
    "Cooldown",
    "SingleReplicaUnsafe",
    "InsufficientNodeCapacity",
    "MaintenanceWindow",
}


def table_reasons() -> list[str]:
    return [reason for check in CHECKS for reason in check.reasons]


def test_the_table_is_the_spec_order() -> None:
    assert [r for r in table_reasons() if r in SPEC_ORDER] == list(SPEC_ORDER)


def test_what_the_table_adds_to_the_spec_and_where() -> None:
    reasons = table_reasons()
    assert len(reasons) == len(set(reasons))
    assert [r for r in reasons if r not in SPEC_ORDER] == [
        "Infeasible",
        "LimitRangeViolation",
        "ResourceQuotaExceeded",
        "NoCommonMethod",
    ]
    # A value no node can hold is wrong whatever the mode; the namespace's bounds judge
    # the values once they are valid, on both paths; the method comes after them and
    # before SingleReplicaUnsafe, which depends on it.
    assert reasons[0] == "Infeasible"
    assert reasons.index("GpuActionConflict") + 1 == reasons.index("LimitRangeViolation")
    assert reasons.index("ResourceQuotaExceeded") + 1 == reasons.index("NoCommonMethod")
    assert reasons.index("NoCommonMethod") + 1 == reasons.index("Cooldown")


def test_the_admission_path_skips_what_the_spec_says() -> None:
    skipped = {r for c in CHECKS if "admission" not in c.paths for r in c.reasons}
    assert skipped == RUNNING_ONLY
    assert all("running" in c.paths for c in CHECKS)


def test_the_pod_gate_and_the_fallback_read_the_table() -> None:
    assert [reason for reason, _ in GATES] == ["AutomationDisabled", "Paused", "ProtectedNamespace"]
    by_fallback = {c.fallback: c.reasons for c in CHECKS if c.fallback is not None}
    assert [by_fallback[f] for f in FALLBACK_CHECKS] == [
        ("Paused",),
        ("NoCommonMethod",),
        ("SingleReplicaUnsafe",),
    ]


def test_the_reference_lists_the_reasons_in_the_table_order() -> None:
    documented = [reason for reason, _, _ in refgen.REASONS]
    assert [r for r in documented if r in table_reasons()] == table_reasons()


def test_audit_proposes_what_the_checks_after_it_that_set_values_leave() -> None:
    """Audit's proposal runs the table's checks that set values, in its order: they are
    the per-value rules, and they come after Audit."""
    reasons = [r for c in CHECKS for r in c.reasons]
    setting = [c for c in CHECKS if c.sets_values]
    assert [c.reasons for c in setting] == [
        ("Throttled", "OOMKilled", "JVMFixedHeap", "NoSignificantChange")
    ]
    assert all(reasons.index(c.reasons[0]) > reasons.index("Audit") for c in setting)
    assert tuple(c.decide for c in setting) == checks._SETS_VALUES


def test_the_windows_and_the_method_follow_the_strategies_before_the_value_rules() -> None:
    """The runner fixes the strategies behind the change before the first check that reads
    them: FreezeWindow, which comes before the value rules drop any action."""
    reading = [c.reasons[0] for c in CHECKS if c.strategies]
    assert reading == ["FreezeWindow", "NoCommonMethod", "MaintenanceWindow"]
    order = [c.reasons[0] for c in CHECKS]
    first_setting = next(c.reasons[0] for c in CHECKS if c.sets_values)
    assert order.index(reading[0]) < order.index(first_setting)
