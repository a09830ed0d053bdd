"""What nodes offer: each node's allocatable CPU and memory, and the largest of them.

Parsed from the view's Node objects and kept by the view's decision caches under the
node-allocatable input's version (`app.store.inputs.NODES`): a Node that comes, goes or
changes its allocatable gives that input a new version, which drops them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.model.quantities import QuantityError, parse_resource
from app.store.inputs import NODES, check_read

if TYPE_CHECKING:
    from app.store.view import ClusterView

#: the version key of every node's allocatable (one version for the cluster)
_STAMP = (NODES.name, ())
_LARGEST = ("largest",)


def node_allocatable(view: ClusterView, name: str) -> tuple[int, int] | None:
    """(cpu millicores, memory bytes) a node offers, or None when the view holds no such
    node."""
    node = view.get("Node", "", name)
    if node is None:
        return None
    found: tuple[int, int] | None = view.caches.derived(_STAMP, name)
    if found is None:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        try:
            found = (
                parse_resource("cpu", allocatable.get("cpu", "0")),
                parse_resource("memory", allocatable.get("memory", "0")),
            )
        except QuantityError as exc:
            view.warnings.append(f"Node {name}: {exc}")
            found = (0, 0)
        view.caches.keep_derived(_STAMP, name, found)
    return found


def largest_allocatable(view: ClusterView) -> tuple[int, int] | None:
    """The largest (cpu millicores, memory bytes) any node offers (each the largest over
    the nodes), or None when the view holds no node."""
    if view.check_reads:
        check_read(view.reading, NODES)
    found: tuple[int, int] | None = view.caches.derived(_STAMP, _LARGEST)
    if found is None:
        names = [str((n.get("metadata") or {}).get("name")) for n in view.objects("Node")]
        amounts = [a for a in (node_allocatable(view, n) for n in names) if a is not None]
        if not amounts:
            return None
        found = (max(a[0] for a in amounts), max(a[1] for a in amounts))
        view.caches.keep_derived(_STAMP, _LARGEST, found)
    return found
