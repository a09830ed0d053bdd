"""Values no node can hold (`Infeasible`): more CPU or memory than the largest node's
allocatable. A pod with such a value could never be scheduled nor resized, whatever the
cluster does meanwhile, so the value is wrong rather than early."""

from __future__ import annotations

from app.model.crd import KerfResource, StaticPolicy
from app.model.quantities import QuantityError, format_resource, parse_resource

#: (cpu millicores, memory bytes): the largest of each over the nodes
Largest = tuple[int, int]


def too_large(resource: str, amount: int, largest: Largest) -> bool:
    """Whether an amount of CPU or memory is more than any node offers."""
    if resource == "cpu":
        return amount > largest[0]
    if resource == "memory":
        return amount > largest[1]
    return False


def describe_largest(largest: Largest) -> str:
    """`cpu 64, memory 256Gi`."""
    return (
        f"cpu {format_resource('cpu', largest[0])}, memory {format_resource('memory', largest[1])}"
    )


def infeasible_policy_values(policy: KerfResource, largest: Largest) -> list[str]:
    """The values of a static policy that no node can hold, as `container.field.resource
    quantity`."""
    if not isinstance(policy, StaticPolicy):
        return []
    found: list[str] = []
    for container, values in sorted(policy.spec.resources.containers.items()):
        for field in ("limits", "requests"):  # the order the decision's message has
            for resource, quantity in sorted(getattr(values, field).items()):
                try:
                    amount = parse_resource(resource, quantity)
                except QuantityError:
                    continue  # the model has already refused what does not parse
                if too_large(resource, amount, largest):
                    found.append(f"{container}.{field}.{resource} {quantity}")
    return found
