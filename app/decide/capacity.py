"""Node capacity: values no node can hold, and increases the pod's node has no room for."""

from __future__ import annotations

from collections.abc import Iterable

from app.decide.context import IN_PLACE_RESOURCES, PASS, Action, Context, Result, block, stop
from app.decide.qos_pairs import GUARANTEED_QOS
from app.model.kube_types import node_name
from app.model.quantities import format_resource, parse_resource
from app.policy.feasibility import describe_largest, too_large
from app.policy.selection import Target
from app.store.allocatable import largest_allocatable, node_allocatable

#: A value to set is more than any node's allocatable.
INFEASIBLE = "Infeasible"

#: the headroom when no strategy says (Kubex's defaults of safetyChecks.nodeCpuHeadroom and
#: nodeMemoryHeadroom)
CPU_HEADROOM = "10%"
MEMORY_HEADROOM = "200Mi"


def check_feasible(ctx: Context) -> Result:
    """Block the plan when a value to set is more CPU or memory than any node's allocatable
    (a pod with it could never be scheduled or resized: Infeasible by definition). Not
    judged while the view holds no node."""
    largest = largest_allocatable(ctx.view)
    if largest is None:
        return PASS
    over = [
        f"{a.target.container}.{a.target.field}.{a.target.resource} "
        f"{format_resource(a.target.resource, a.desired)}"
        for a in ctx.regular()
        if too_large(a.target.resource, a.desired, largest)
    ]
    if not over:
        return PASS
    return block(
        INFEASIBLE,
        f"{', '.join(over)} is more than any node's allocatable (the largest: "
        f"{describe_largest(largest)})",
    )


def _request_increases(ctx: Context, actions: Iterable[Action]) -> dict[str, list[Action]]:
    """The actions that raise a CPU or memory request, by resource."""
    increases: dict[str, list[Action]] = {}
    for a in actions:
        t = a.target
        if (
            t.field == "requests"
            and t.resource in IN_PLACE_RESOURCES
            and a.desired > (a.current or 0)
        ):
            increases.setdefault(t.resource, []).append(a)
    return increases


def _node_room(ctx: Context) -> dict[str, int] | None:
    """What the pod's node has left for increases (allocatable minus headroom minus the
    requests of its non-terminal pods); None when the node is unknown."""
    node = node_name(ctx.pod)
    if not node:
        return None
    allocatable = node_allocatable(ctx.view, node)
    if allocatable is None:
        return None
    used_cpu, used_memory = ctx.view.node_requests(node)
    cpu_headroom, memory_headroom = _headroom(ctx, allocatable[0])
    return {
        "cpu": allocatable[0] - cpu_headroom - used_cpu,
        "memory": allocatable[1] - memory_headroom - used_memory,
    }


def _headroom(ctx: Context, allocatable_cpu: int) -> tuple[int, int]:
    """The CPU (millicores) and memory (bytes) kept free on the node: the largest the
    strategies behind the change ask (`safetyChecks.nodeCpuHeadroom`, a percent of the
    node's allocatable or an amount, and `nodeMemoryHeadroom`)."""
    strategies = ctx.strategies()
    cpu = [s.safety_checks.node_cpu_headroom for s in strategies] or [CPU_HEADROOM]
    memory = [s.safety_checks.node_memory_headroom for s in strategies] or [MEMORY_HEADROOM]
    return (
        max(_cpu_amount(text, allocatable_cpu) for text in cpu),
        max(parse_resource("memory", text) for text in memory),
    )


def _cpu_amount(text: str, allocatable_cpu: int) -> int:
    if text.endswith("%"):
        return allocatable_cpu * int(text[:-1]) // 100
    return parse_resource("cpu", text)


def _increase_delta(ctx: Context, resource: str, actions: Iterable[Action]) -> int:
    return sum(
        a.desired - (ctx.current[a.target.container]["requests"].get(resource) or 0)
        for a in actions
    )


def restore_outgrows(ctx: Context) -> bool:
    """A rollback restore raises a request beyond what the pod's node has left. Node
    capacity is physics, not a guardrail: the restore is not filtered like an increase of a
    recommendation, and an in-place resize would only be deferred by the kubelet, so the
    pod is evicted and its replacement scheduled where it fits."""
    restores = [a for a in ctx.actions if a.item.restore] if ctx.has_restores else []
    increases = _request_increases(ctx, restores)
    room = _node_room(ctx) if increases else None
    if room is None:
        return False
    return any(_increase_delta(ctx, r, acts) > room[r] for r, acts in increases.items())


def filter_node_capacity(ctx: Context) -> Result:
    """Increases that do not fit the node are filtered (never an eviction), unless every
    strategy behind them says `safetyChecks.requireNodeAllocatable: false`."""
    if not ctx.check_on("require_node_allocatable"):
        return PASS
    increases = _request_increases(ctx, ctx.regular())
    room = _node_room(ctx) if increases else None
    if room is None:
        return PASS
    node = node_name(ctx.pod)
    standing = ctx.actions
    dropped: list[tuple[Target, str]] = []
    for resource, actions in increases.items():
        delta = _increase_delta(ctx, resource, actions)
        if delta > room[resource]:
            dropped.extend((a.target, "InsufficientNodeCapacity") for a in actions)
            # A Guaranteed pair changes together: its limit stays when its request must.
            partners = [a.partner for a in actions if a.partner is not None]
            dropped.extend((p.target, GUARANTEED_QOS) for p in partners)
            standing = [a for a in standing if a not in actions and a not in partners]
    if standing:
        return Result(standing, tuple(dropped)) if dropped else PASS
    return Result(
        standing,
        tuple(dropped),
        block=stop("InsufficientNodeCapacity", f"node {node} has no room for the increase"),
    )
