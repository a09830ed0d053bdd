"""A paused leader (issue 15 part 6): two `kerf reconciler` processes on kubesim; the
leader is SIGSTOPped in the middle of its work for longer than its Lease, the other
replica takes over, the old leader is SIGCONTed, and kubesim's log of the writes it
received, by token, shows that the old leader sent nothing after the takeover."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml
from kubernetes_asyncio import client

from harness.services import free_port
from kubesim.clock import Clock
from kubesim.requestlog import ServedWrite
from kubesim.sim import Simulator
from kubesim.testing import running_sim
from reconciler.defaults import DEFAULT_WORKERS
from tests.cluster import GROUP, VERSION, custom, install_crds, strategy
from tests.integration.reconciler.harness import (
    LEASES,
    deployment,
    requests_of,
    static_policy,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[3]
TARGET = {"cpu": "250m", "memory": "256Mi"}
APPS = [f"app{i}" for i in range(6)]


@dataclass
class Replica:
    """A `kerf reconciler` process with its own token."""

    identity: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def token(self) -> str:
        return f"replica-{self.identity}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    async def metric(self, name: str) -> float | None:
        try:
            async with httpx.AsyncClient() as http:
                answer = await http.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5)
        except httpx.HTTPError:
            return None
        total = None
        for line in answer.text.splitlines():
            if line.startswith(name) and not line.startswith("#"):
                total = (total or 0.0) + float(line.rsplit(" ", 1)[1])
        return total


def start(sim: Simulator, tmp: Path, identity: str) -> Replica:
    config = yaml.safe_load(sim.write_kubeconfig(tmp / f"{identity}.kubeconfig").read_text())
    config["users"][0]["user"]["token"] = f"replica-{identity}"
    kubeconfig = tmp / f"{identity}.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    port = free_port()
    log = tmp / f"{identity}.log"
    argv = [sys.executable, "-m", "kerf", "reconciler", "--kubeconfig", str(kubeconfig)]
    argv += ["--metrics-host", "127.0.0.1", "--metrics-port", str(port)]
    argv += ["--lease-duration", "3", "--resync-interval", "3600", "--shards", "1"]
    env = {**os.environ, "POD_NAMESPACE": "kerf-system", "POD_NAME": identity}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
        )
    return Replica(identity, process, port, log)


@contextlib.asynccontextmanager
async def replicas(sim: Simulator, tmp: Path) -> AsyncIterator[tuple[Replica, Replica]]:
    a, b = start(sim, tmp, "a"), start(sim, tmp, "b")
    try:
        yield a, b
    finally:
        for replica in (a, b):
            if replica.process.poll() is None:
                os.killpg(replica.process.pid, signal.SIGCONT)
                os.killpg(replica.process.pid, signal.SIGKILL)
                replica.process.wait()


def holder(sim: Simulator) -> str | None:
    lease = sim.store.get(LEASES, "kerf-system", "kerf-reconciler")
    return (lease or {}).get("spec", {}).get("holderIdentity") if lease else None


def writes_of(sim: Simulator, replica: Replica) -> list[ServedWrite]:
    return [w for w in sim.http.requests.writes if w.token == replica.token]


async def test_a_leader_resumed_after_its_lease_expired_writes_nothing(tmp_path: Path) -> None:
    async with running_sim(tmp_path, clock=Clock()) as sim, sim.api_client() as api:
        await install_crds(api)
        for namespace in ("kerf-system", "shop"):
            await sim.add_namespace(namespace)
        await sim.add_node("node-a", cpu="16", memory="32Gi")
        await custom(api).create_namespaced_custom_object(
            GROUP, VERSION, "shop", "automationstrategies", strategy("default", "shop")
        )
        apps = client.AppsV1Api(api)
        for app in APPS:
            await apps.create_namespaced_deployment("shop", deployment(app, replicas=2))
        await sim.settle()
        sim.http.requests.enable()
        async with replicas(sim, tmp_path) as (a, b):

            async def leads() -> str | None:
                return holder(sim)

            first = await wait_for(sim, leads, "a leader", 60)
            leader, follower = (a, b) if first == "a" else (b, a)

            async def follower_ready() -> bool:
                return await follower.metric("kerf_reconciler_view_synced") == 1

            await wait_for(sim, follower_ready, "the follower's view to be synced", 60)
            for app in APPS:
                await custom(api).create_namespaced_custom_object(
                    GROUP, VERSION, "shop", "staticpolicies", static_policy(app, app, TARGET)
                )

            async def leader_resized() -> bool:
                return any(w.subresource == "resize" for w in writes_of(sim, leader))

            # Paused in the middle of its work: rollouts under way, their reports queued.
            await wait_for(sim, leader_resized, "the leader's first resize", 60)
            os.killpg(leader.process.pid, signal.SIGSTOP)
            paused = len(sim.http.requests.writes)

            async def taken_over() -> bool:
                return holder(sim) == follower.identity

            await wait_for(sim, taken_over, "the follower to take the Lease over", 60)
            # A follower writes the Lease only to take it: its first write after the pause.
            takeover = next(
                w.seq
                for w in sim.http.requests.writes[paused:]
                if w.token == follower.token and w.resource == "leases"
            )
            os.killpg(leader.process.pid, signal.SIGCONT)

            async def stepped_down() -> bool:
                return "lost the leader Lease" in leader.text()

            await wait_for(sim, stepped_down, "the old leader to notice", 60)

            async def converged() -> bool:
                for app in APPS:
                    pods = [p for p in sim.store.iter(("", "pods")) if app in p["metadata"]["name"]]
                    if len(pods) != 2 or any(requests_of(p) != TARGET for p in pods):
                        return False
                    record = sim.store.get(
                        (GROUP, "rightsizingrecommendations"), "shop", f"deployment-{app}"
                    )
                    if ((record or {}).get("status") or {}).get("phase") != "Applied":
                        return False
                return await leader.metric("kerf_reconciler_queue_depth") == 0

            await wait_for(sim, converged, "the new leader to finish every change", 120)
            late = [w for w in writes_of(sim, leader) if w.seq > takeover]
            # The one window the fence leaves: a write checked before the pause leaves
            # after it (one per pass under way), counted as the old leader hears its answer.
            outlived = await leader.metric("kerf_reconciler_writes_outlived_lease_total") or 0
            assert len(late) <= outlived <= DEFAULT_WORKERS, (
                f"the old leader wrote after the takeover: {late}"
            )
            assert await leader.metric("kerf_reconciler_leader") == 0
            assert any(w.seq > takeover for w in writes_of(sim, follower))
            withheld = await leader.metric("kerf_reconciler_writes_withheld_total")
            print(
                f"the resumed leader: {len(late)} late, {outlived:g} outlived, "
                f"{withheld or 0:g} withheld"
            )
