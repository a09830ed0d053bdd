"""Guardrails (SPEC §6, seed guardrails.txt): settings layering and the per-value rules.

The plan-level checks and their order live in `app/decide/checks.py`, which calls these
functions; every rule that changes or refuses one value is here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

from app.model.crd import ApplySettings, Guardrails, RollbackGuardrails
from app.model.durations import parse_duration
from app.model.quantities import MIB, parse_resource, round_up

BUILTIN_GUARDRAILS = Guardrails(
    learning_period="168h",
    min_confidence="0.7",
    max_change_percent=50,
    min_cpu="10m",
    min_memory="32Mi",
    cooldown="24h",
    rollback=RollbackGuardrails(
        watch_duration="30m", oom_kills=1, restarts=3, throttling_ratio="0.25"
    ),
    allow_single_replica_disruption=False,
    apply=ApplySettings(fallback_after="10m"),
)

#: Decision reasons of the per-value rules.
THROTTLED = "Throttled"
OOM_KILLED = "OOMKilled"
JVM_FIXED_HEAP = "JVMFixedHeap"
COOLDOWN = "Cooldown"
NO_SIGNIFICANT_CHANGE = "NoSignificantChange"


@dataclass(frozen=True, slots=True)
class GuardrailSettings:
    """Guardrails with every layer merged and every value parsed."""

    learning_period: timedelta
    min_confidence: float
    max_change_percent: int
    min_cpu: int  # millicores
    min_memory: int  # bytes
    cooldown: timedelta
    watch_duration: timedelta
    oom_kills: int
    restarts: int
    throttling_ratio: float
    allow_single_replica_disruption: bool
    fallback_after: timedelta


def _pick(name: str, *layers: Guardrails | None) -> object:
    for layer in reversed(layers):
        if layer is not None and getattr(layer, name) is not None:
            return getattr(layer, name)
    return getattr(BUILTIN_GUARDRAILS, name)


def _pick_nested(group: str, name: str, *layers: Guardrails | None) -> object:
    for layer in reversed(layers):
        block = getattr(layer, group) if layer is not None else None
        if block is not None and getattr(block, name) is not None:
            return getattr(block, name)
    return getattr(getattr(BUILTIN_GUARDRAILS, group), name)


@lru_cache(maxsize=4096)
def resolve_guardrails(
    global_defaults: Guardrails | None, policy: Guardrails | None
) -> GuardrailSettings:
    """Built-in defaults ← GlobalConfiguration.guardrailDefaults ← the policy's block."""
    layers = (global_defaults, policy)
    return GuardrailSettings(
        learning_period=parse_duration(str(_pick("learning_period", *layers))),
        min_confidence=float(str(_pick("min_confidence", *layers))),
        max_change_percent=int(str(_pick("max_change_percent", *layers))),
        min_cpu=parse_resource("cpu", str(_pick("min_cpu", *layers))),
        min_memory=parse_resource("memory", str(_pick("min_memory", *layers))),
        cooldown=parse_duration(str(_pick("cooldown", *layers))),
        watch_duration=parse_duration(str(_pick_nested("rollback", "watch_duration", *layers))),
        oom_kills=int(str(_pick_nested("rollback", "oom_kills", *layers))),
        restarts=int(str(_pick_nested("rollback", "restarts", *layers))),
        throttling_ratio=float(str(_pick_nested("rollback", "throttling_ratio", *layers))),
        allow_single_replica_disruption=bool(_pick("allow_single_replica_disruption", *layers)),
        fallback_after=parse_duration(str(_pick_nested("apply", "fallback_after", *layers))),
    )


def step_unit(resource: str) -> int:
    """The rounding unit of the decrease limit: a millicore, a MiB, or one unit."""
    if resource == "cpu":
        return 1
    if resource == "memory":
        return MIB
    return 1


def decrease_floor(current: int, max_change_percent: int, resource: str) -> int:
    """The lowest value one step may reach: current × (1 − p/100), rounded up to a whole
    millicore or MiB — never above the current value (a value under one MiB stays put
    rather than turning a decrease into an increase)."""
    exact_numerator = current * (100 - max_change_percent)
    lowest = -(-exact_numerator // 100)
    return min(round_up(lowest, step_unit(resource)), current)


@dataclass(frozen=True, slots=True)
class ValueContext:
    """Facts about one container that the refusal rules need."""

    throttled: bool = False
    oom_killed: bool = False
    jvm_heap_bytes: int | None = None
    rollback_cooldown: frozenset[str] = frozenset()  # resources rolled back within cooldown


#: the context of a value nothing refuses (shared: it is immutable)
NO_FACTS = ValueContext()


@dataclass(slots=True)
class ValueOutcome:
    """The value a rule set leaves, or None and the reason the part was dropped (never
    changed once built, and shared; not frozen, as one is built per value decided)."""

    value: int | None
    reason: str | None = None


#: the outcomes that drop a value, built once (they are immutable)
_DROPPED = {
    reason: ValueOutcome(None, reason)
    for reason in (THROTTLED, OOM_KILLED, JVM_FIXED_HEAP, COOLDOWN, NO_SIGNIFICANT_CHANGE)
}


def apply_value_rules(
    *,
    field: str,
    resource: str,
    current: int | None,
    desired: int,
    settings: GuardrailSettings,
    tolerance_percent: int,
    context: ValueContext,
) -> ValueOutcome:
    """Per-value rules in order: refusals (Throttled, OOMKilled, rollback cooldown), the
    decrease step limit, the minimums, the JVM heap floor, then the tolerance."""
    decreasing = current is not None and desired < current
    if decreasing:
        if context.throttled and resource == "cpu" and field == "requests":
            return _DROPPED[THROTTLED]
        if context.oom_killed and resource == "memory":
            return _DROPPED[OOM_KILLED]
        if resource in context.rollback_cooldown:
            return _DROPPED[COOLDOWN]
        assert current is not None
        desired = max(desired, decrease_floor(current, settings.max_change_percent, resource))
    if field == "requests":
        if resource == "cpu":
            desired = max(desired, settings.min_cpu)
        elif resource == "memory":
            desired = max(desired, settings.min_memory)
    if resource == "memory" and context.jvm_heap_bytes is not None:
        heap_floor = -(-context.jvm_heap_bytes * 5 // 4)
        if desired < heap_floor and (current is None or desired < current):
            return _DROPPED[JVM_FIXED_HEAP]
    if current is not None and abs(desired - current) * 100 < tolerance_percent * current:
        return _DROPPED[NO_SIGNIFICANT_CHANGE]
    if current is not None and desired == current:
        return _DROPPED[NO_SIGNIFICANT_CHANGE]
    return ValueOutcome(desired)
