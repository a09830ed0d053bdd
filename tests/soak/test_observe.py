"""The soak's observer judges each write with the store as the write left it."""

from __future__ import annotations

from pathlib import Path

from kubesim.sim import Simulator
from kubesim.testing import running_sim
from kubesim.writes import Write
from soak.observe import Observer
from soak.workloads import NAMESPACE, WORKLOADS

WEB = next(w for w in WORKLOADS if w.name == "web")


async def _web(sim: Simulator) -> list[str]:
    await sim.add_node("node-1", cpu="8", memory="16Gi")
    await sim.add_namespace(NAMESPACE)
    api = sim.api
    await api.create(api.resource("apps", "v1", "deployments"), NAMESPACE, WEB.deployment())
    pdb = WEB.pdb()
    assert pdb is not None
    await api.create(api.resource("policy", "v1", "poddisruptionbudgets"), NAMESPACE, pdb)
    await sim.settle()
    return sorted(p["metadata"]["name"] for p in sim.store.iter(("", "pods"), NAMESPACE))


def _write(name: str, subresource: str, user: str = "t0") -> Write:
    return Write(0, "create", "", "pods", NAMESPACE, name, subresource, user, 201, {})


async def test_an_eviction_that_leaves_the_pdb_short_is_a_break(tmp_path: Path) -> None:
    async with running_sim(tmp_path) as sim:
        names = await _web(sim)
        observer = Observer(sim.store, {"t0": "r0"}, {"web": ("app",)})
        observer.start()
        pods = sim.api.resource("", "v1", "pods")
        # The first eviction leaves two healthy of three, as minAvailable 2 allows; the
        # second (past the budget, as a broken server would allow) leaves one.
        for name in names[:2]:
            await sim.api.delete(pods, NAMESPACE, name)
            observer.on_write(_write(name, "eviction"))
        observer.close()
    assert observer.seen.evictions == {"web": 2}
    assert len(observer.seen.pdb_breaks) == 1
    assert "left web 1 healthy, PDB requires 2" in observer.seen.pdb_breaks[0]


async def test_a_resize_is_a_change_once_per_distinct_values(tmp_path: Path) -> None:
    async with running_sim(tmp_path) as sim:
        names = await _web(sim)
        observer = Observer(sim.store, {"t0": "r0"}, {"web": ("app",)})
        observer.start()
        pods = sim.api.resource("", "v1", "pods")
        body = {
            "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "200m"}}}]}
        }
        for name in names:
            await sim.api.patch(
                pods, NAMESPACE, name, "application/strategic-merge-patch+json", body,
                subresource="resize",
            )  # fmt: skip
            observer.on_write(_write(name, "resize"))
        observer.on_write(_write(names[0], "resize", user="someone-else"))
        observer.close()
    assert len(observer.seen.changes["web"]) == 1
    assert observer.seen.over_limit == []
