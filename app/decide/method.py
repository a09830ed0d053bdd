"""How a change is carried out: in place, by eviction, and whether a resize restarts a
container."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.decide.capacity import restore_outgrows
from app.decide.context import IN_PLACE_RESOURCES, Context, FallbackCase, Result, stop
from app.decide.plan_facts import common_methods
from app.model.kube_types import ContainerDict
from app.model.workloads import oom_looping

IN_PLACE = "inPlace"
_IN_PLACE = Result(method=IN_PLACE)
_EVICT = Result(method="evict")


def choose_method(ctx: Context) -> Result:
    """The method of a running pod's change (SPEC §7): inPlace when every contributing
    strategy allows it and the change can be made in place; else evict when all allow
    eviction; else NoCommonMethod (the rollback restores that stand go on in place)."""
    strategies = ctx.strategy_facts
    assert strategies is not None, "the runner fixes the strategies before the value rules"
    allowed = strategies.methods
    if not allowed:
        held = stop("NoCommonMethod", "the contributing strategies share no method")
        return Result(method=IN_PLACE, block=held)
    restart_ok = strategies.restart_ok
    in_place = _resizable(ctx) and (restart_ok or not resize_restarts(ctx))
    rather_evict = restore_outgrows(ctx) or _resizes_an_oom_loop(ctx)
    if "inPlace" in allowed and in_place and not ("evict" in allowed and rather_evict):
        return _IN_PLACE
    if "evict" in allowed:
        return _EVICT
    held = stop("NoCommonMethod", "the change cannot be made in place and eviction is not allowed")
    return Result(method=IN_PLACE, block=held)


def fallback_method(case: FallbackCase) -> tuple[str, str] | None:
    """A resize that cannot finish falls back to eviction only where every contributing
    strategy allows it; otherwise it is blocked with its cause."""
    if "evict" in common_methods(case.facts.strategies):
        return None
    return case.cause, f"in-place resize failed ({case.cause}) and eviction is not allowed"


def _resizes_an_oom_loop(ctx: Context) -> bool:
    """A memory change of a container in an OOM loop: kubelet 1.35.4 resizes the container's
    cgroup in place but leaves the pod's at the old limit, so the kills go on
    (kubernetes/kubernetes#138760); a replacement pod starts with the new values."""
    looping = oom_looping(ctx.pod)
    return bool(looping) and any(
        a.target.resource == "memory" and a.target.container in looping for a in ctx.actions
    )


def _resizable(ctx: Context) -> bool:
    """Every changed resource can be resized in place (CPU and memory only)."""
    return all(a.target.resource in IN_PLACE_RESOURCES for a in ctx.actions)


def resize_restarts(ctx: Context) -> bool:
    """An in-place resize of the actions standing would restart a container."""
    return restarts_container(
        ctx.containers, ((a.target.container, a.target.resource) for a in ctx.actions)
    )


def restarts_container(
    containers: Mapping[str, ContainerDict], changes: Iterable[tuple[str, str]]
) -> bool:
    """Whether an in-place resize of these (container, resource) changes restarts a
    container: its resizePolicy is RestartContainer for a resource that changes. The
    containers are those kerf sizes (`target_containers`): a native sidecar's resizePolicy
    counts as an app container's does."""
    for container, resource in changes:
        for entry in containers.get(container, {}).get("resizePolicy") or ():
            if (
                entry.get("resourceName") == resource
                and entry.get("restartPolicy") == "RestartContainer"
            ):
                return True
    return False
