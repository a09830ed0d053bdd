"""retainGuaranteedQoS: a Guaranteed container's request and limit change together."""

from __future__ import annotations

from dataclasses import replace

from app.decide.context import Action, Context
from app.decide.plan_facts import QOS_RESOURCES, Prepared
from app.decide.pod_facts import is_guaranteed
from app.policy.enablement import Switches, apply_switches
from app.policy.selection import Target

#: A change dropped because it would leave a Guaranteed container's request ≠ its limit.
GUARANTEED_QOS = "GuaranteedQoS"


def may_pin(ctx: Context) -> bool:
    """A cheap first look (it runs for every decision, and most pods have no CPU limit):
    could a container whose strategy retains QoS be Guaranteed?"""
    current = ctx.current
    for container in ctx.facts.qos_containers:
        resources = current[container]
        cpu = resources["requests"].get("cpu")
        if cpu is not None and cpu == resources["limits"].get("cpu"):
            return True
    return False


def pinned_items(ctx: Context) -> dict[tuple[str, str], dict[str, Prepared]]:
    """The regular items on the CPU/memory pairs of Guaranteed containers whose strategy
    retains the QoS class, by (container, resource) then field. A pair with a rollback
    restore is left to the restore (restores are exempt from every check)."""
    current = ctx.current
    guaranteed = [c for c in ctx.facts.qos_containers if is_guaranteed(current[c])]
    if not guaranteed:
        return {}  # the common case: no Guaranteed container to keep
    pairs: dict[tuple[str, str], dict[str, Prepared]] = {}
    restored: set[tuple[str, str]] = set()
    for item in ctx.facts.items:
        target = item.target
        if target.container not in guaranteed or target.resource not in QOS_RESOURCES:
            continue
        key = (target.container, target.resource)
        if item.restore:
            restored.add(key)
        elif item.strategy is not None:
            pairs.setdefault(key, {})[target.field] = item
    return {
        key: by_field
        for key, by_field in pairs.items()
        if key not in restored and any(i.retain_qos for i in by_field.values())
    }


def add_pair(
    ctx: Context,
    by_field: dict[str, Prepared],
    actions: list[Action],
    dropped: list[tuple[Target, str]],
) -> None:
    """Both values of a Guaranteed container's pair, set to one value, onto the actions
    being built: the selected limit when there is one (the bound its policy allows), else
    the selected request. The value is clamped into the bounds of both fields and must be
    allowed by both fields' switches; when it cannot be, neither changes (`dropped`)."""
    lead = by_field.get("limits") or by_field["requests"]
    container, resource = lead.target.container, lead.target.resource
    items = {fld: by_field.get(fld) or _partner_item(lead, fld) for fld in ("requests", "limits")}
    switches: dict[str, Switches] = {}
    for fld, item in items.items():
        # CPU and memory always have switches; a pair is built only under a strategy.
        assert item.switches is not None
        switches[fld] = item.switches
    floors = [sw.floor for sw in switches.values() if sw.floor is not None]
    ceilings = [sw.ceiling for sw in switches.values() if sw.ceiling is not None]
    floor, ceiling = max(floors, default=None), min(ceilings, default=None)
    if floor is not None and ceiling is not None and floor > ceiling:
        # The requests' and limits' bounds do not overlap: no equal pair fits both.
        dropped.extend((i.target, GUARANTEED_QOS) for i in items.values())
        return
    baseline = ctx.baseline[container]
    enabled = {
        fld: apply_switches(
            Switches(sw.upsize, sw.downsize, sw.set_from_unspecified, floor, ceiling),
            current=baseline[fld].get(resource),
            desired=lead.candidate.amount,
        )
        for fld, sw in switches.items()
    }
    # Both fields clamp the same value into the same bounds: they agree unless one refuses.
    value = enabled["limits"].value
    if value is None or enabled["requests"].value is None:
        dropped.extend(
            (items[fld].target, (e.reason or "NotEnabled") if e.value is None else GUARANTEED_QOS)
            for fld, e in enabled.items()
        )
        return
    request, limit = (
        Action(items[fld], baseline[fld].get(resource), value) for fld in ("requests", "limits")
    )
    request.partner, limit.partner = limit, request
    actions.extend((request, limit))


def _partner_item(lead: Prepared, fld: str) -> Prepared:
    """The other field of the lead's pair, under the lead's policy and strategy."""
    target = Target(lead.target.container, fld, lead.target.resource)
    return replace(lead, target=target, switches=lead.partner_switches)
