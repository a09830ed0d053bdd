"""Enablement (SPEC §5): what an AutomationStrategy lets a selected action do.

Each selected action is filtered through the strategy of the policy it came from (resolved
once per workload plan by `resolve_switches`, applied per pod by `apply_switches`): the
floor/ceiling clamp first (per-container bounds override the resource's), then the
direction switches (upsize, downsize, setFromUnspecified).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.model.crd import AutomationStrategySpec, FieldEnablement
from app.model.quantities import GPU_FRACTION, parse_resource

GPU = "nvidia.com/gpu"
#: Resources a strategy can enable; any other resource in a payload is never applied. A
#: KAI `gpu-fraction` is a GPU allocation: the `gpu` switches govern it.
ENABLED_RESOURCES = {"cpu": "cpu", "memory": "memory", GPU: "gpu", GPU_FRACTION: "gpu"}


@dataclass(slots=True)
class Enabled:
    """The value an action may set, or None with the reason it was filtered (never
    changed once built; not frozen, as one is built per value decided)."""

    value: int | None
    reason: str | None = None


def field_enablement(
    strategy: AutomationStrategySpec, resource: str, field: str
) -> FieldEnablement | None:
    """The switches for one resource field (None: the resource cannot be enabled)."""
    group = ENABLED_RESOURCES.get(resource)
    if group is None:
        return None
    switches: FieldEnablement | None = getattr(getattr(strategy.enablement, group), field)
    return switches


def bounds(
    switches: FieldEnablement, resource: str, container: str
) -> tuple[int | None, int | None]:
    """(floor, ceiling) for a container; per-container values override the resource's."""
    floor, ceiling = switches.floor, switches.ceiling
    override = switches.containers.get(container)
    if override is not None:
        floor = override.floor if override.floor is not None else floor
        ceiling = override.ceiling if override.ceiling is not None else ceiling
    return (
        parse_resource(resource, floor) if floor is not None else None,
        parse_resource(resource, ceiling) if ceiling is not None else None,
    )


@dataclass(frozen=True, slots=True)
class Switches:
    """One target's enablement, resolved once: the switches and the parsed bounds."""

    upsize: bool
    downsize: bool
    set_from_unspecified: bool
    floor: int | None
    ceiling: int | None


def resolve_switches(
    strategy: AutomationStrategySpec, *, container: str, field: str, resource: str
) -> Switches | None:
    """The enablement of one target under a strategy (None: the resource cannot be enabled)."""
    switches = field_enablement(strategy, resource, field)
    if switches is None:
        return None
    floor, ceiling = bounds(switches, resource, container)
    return Switches(
        switches.upsize, switches.downsize, switches.set_from_unspecified, floor, ceiling
    )


def apply_switches(switches: Switches | None, *, current: int | None, desired: int) -> Enabled:
    """Clamp to floor/ceiling, then check the direction switches."""
    if switches is None:
        return Enabled(None, "UnsupportedResource")
    value = desired
    if switches.floor is not None and value < switches.floor:
        value = switches.floor
    if switches.ceiling is not None and value > switches.ceiling:
        value = switches.ceiling
    if current is None:
        if not switches.set_from_unspecified:
            return Enabled(None, "SetFromUnspecifiedDisabled")
    elif value > current and not switches.upsize:
        return Enabled(None, "UpsizeDisabled")
    elif value < current and not switches.downsize:
        return Enabled(None, "DownsizeDisabled")
    return Enabled(value)
