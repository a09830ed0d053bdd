"""What nodes offer, parsed once per version of the nodes' allocatable."""

from __future__ import annotations

from app.store.allocatable import largest_allocatable, node_allocatable
from app.store.view import ClusterView
from tests.app import builders as b

GI = 1024**3


def test_a_nodes_allocatable_follows_its_changes() -> None:
    v = ClusterView()
    assert node_allocatable(v, "node-a") is None and largest_allocatable(v) is None
    v.apply(b.node(cpu="4", memory="16Gi"))
    assert node_allocatable(v, "node-a") == (4000, 16 * GI)
    v.apply(b.node(cpu="8", memory="16Gi"))
    assert node_allocatable(v, "node-a") == (8000, 16 * GI)
    v.delete("Node", "", "node-a")
    assert node_allocatable(v, "node-a") is None


def test_the_largest_follows_nodes_that_come_and_go() -> None:
    v = ClusterView()
    v.apply(b.node("node-a", cpu="4", memory="32Gi"))
    v.apply(b.node("node-b", cpu="16", memory="8Gi"))
    assert largest_allocatable(v) == (16000, 32 * GI)
    v.delete("Node", "", "node-b")
    assert largest_allocatable(v) == (4000, 32 * GI)
    # A node the kubelet has not reported allocatable for yet offers nothing, and still
    # is a node: the view holds one, so the largest is known.
    v.delete("Node", "", "node-a")
    v.apply({"kind": "Node", "metadata": {"name": "new"}})
    assert largest_allocatable(v) == (0, 0)
    v.delete("Node", "", "new")
    assert largest_allocatable(v) is None


def test_an_allocatable_that_does_not_parse_warns_and_offers_nothing() -> None:
    v = ClusterView()
    v.apply(b.node(cpu="lots"))
    assert node_allocatable(v, "node-a") == (0, 0)
    assert node_allocatable(v, "node-a") == (0, 0)
    assert len([w for w in v.warnings if w.startswith("Node node-a")]) == 1
