"""How a change is carried out: in place, by eviction, and whether a resize restarts a
container."""

from __future__ import annotations

from dataclasses import dataclass

from app.decide.capacity import _restore_outgrows
from app.decide.context import IN_PLACE_RESOURCES, _block_regular, _Context
from app.models import (
    AutomationStrategySpec,
    Window,
)


@dataclass(frozen=True, slots=True)
class _StrategyFacts:
    """What a set of contributing strategies decides together."""

    exclusion: list[Window]
    inclusion: list[Window]
    #: the methods every strategy allows
    methods: frozenset[str]
    #: every strategy allows an in-place resize that restarts a container
    restart_ok: bool


def _strategy_facts(ctx: _Context, strategies: list[AutomationStrategySpec]) -> _StrategyFacts:
    """The windows and methods of these strategies, derived once per plan and strategy set
    (strategies are kerf objects, as fixed as the plan; keyed by identity, which is safe
    because the plan's facts hold every strategy they can name)."""
    key = ("strategies", *map(id, strategies))
    found = ctx.plan.memo.get(key)
    if found is None:
        found = ctx.plan.memo[key] = _StrategyFacts(
            exclusion=[w for s in strategies for w in s.scheduling.exclusion_windows],
            inclusion=[w for s in strategies for w in s.scheduling.inclusion_windows],
            methods=_common_methods(strategies),
            restart_ok=all(s.in_place_resize.container_restart for s in strategies),
        )
    return found


def _common_methods(strategies: list[AutomationStrategySpec]) -> frozenset[str]:
    allowed = {"inPlace", "evict"}
    for strategy in strategies:
        if not strategy.in_place_resize.enabled:
            allowed.discard("inPlace")
        if not strategy.pod_eviction.enabled:
            allowed.discard("evict")
    return frozenset(allowed)


def _method(ctx: _Context, strategies: _StrategyFacts) -> str:
    """inPlace when every contributing strategy allows it and the change can be made in
    place; else evict when all allow eviction; else NoCommonMethod."""
    allowed = strategies.methods
    if not allowed:
        _block_regular(ctx, "NoCommonMethod", "the contributing strategies share no method")
        return "inPlace"
    restart_ok = strategies.restart_ok
    in_place = _resizable(ctx) and (restart_ok or not _restarts_container(ctx))
    if "inPlace" in allowed and in_place and not ("evict" in allowed and _restore_outgrows(ctx)):
        return "inPlace"
    if "evict" in allowed:
        return "evict"
    _block_regular(
        ctx, "NoCommonMethod", "the change cannot be made in place and eviction is not allowed"
    )
    return "inPlace"


def _resizable(ctx: _Context) -> bool:
    """Every changed resource can be resized in place (CPU and memory only)."""
    return all(a.target.resource in IN_PLACE_RESOURCES for a in ctx.actions)


def _restarts_container(ctx: _Context) -> bool:
    """An in-place resize would restart a container (its resizePolicy says so)."""
    containers = ctx.containers
    for action in ctx.actions:
        for entry in containers.get(action.target.container, {}).get("resizePolicy") or ():
            if (
                entry.get("resourceName") == action.target.resource
                and entry.get("restartPolicy") == "RestartContainer"
            ):
                return True
    return False
