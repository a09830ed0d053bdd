"""Two `kerf recommend` replicas on kubesim against a real Prometheus (issue 18): only the
holder of the Lease `kerf-recommender` queries Prometheus and writes the recommendations
ConfigMap (kubesim's log of the writes it received, by token), and when the leader is
killed the other replica takes the Lease over and writes; stopped, it releases the Lease.
Sharded (issue 37), each replica writes the ConfigMaps of its buckets' namespaces only."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml
from kubernetes_asyncio import client

from app.model.shards import bucket_lease_name, bucket_of
from app.recommend.rows import CONFIGMAP_NAME
from harness.services import free_port
from kubesim.requestlog import ServedWrite
from kubesim.sim import Simulator
from kubesim.testing import running_sim
from tests.integration.reconciler.harness import LEASES
from tests.recommender.history import MI, Replica, constant, openmetrics
from tests.recommender.prometheus import backfill, needs_prometheus, running_prometheus
from tests.recommender.scene import DAY, NAMESPACE, deployment, stamp

pytestmark = needs_prometheus
ROOT = Path(__file__).resolve().parents[2]
CONFIGMAPS = ("", "configmaps")
#: Short enough for a fail-over within the test, long enough for a loaded machine.
LEASE_DURATION = "6"


@dataclass
class Recommender:
    """A `kerf recommend` process with its own token."""

    identity: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def token(self) -> str:
        return f"recommender-{self.identity}"

    async def metric(self, name: str) -> float | None:
        """The sum of a metric's samples (None while it does not answer)."""
        try:
            async with httpx.AsyncClient() as http:
                answer = await http.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5)
        except httpx.HTTPError:
            return None
        total = 0.0
        for line in answer.text.splitlines():
            if line.startswith(name) and not line.startswith("#"):
                total += float(line.rsplit(" ", 1)[1])
        return total


def start(
    sim: Simulator, tmp: Path, identity: str, prometheus: str, end: float, shards: int
) -> Recommender:
    kubeconfig = tmp / f"{identity}.kubeconfig"
    config = yaml.safe_load(sim.write_kubeconfig(kubeconfig).read_text())
    config["users"][0]["user"]["token"] = f"recommender-{identity}"
    kubeconfig.write_text(yaml.safe_dump(config))
    port = free_port()
    log = tmp / f"{identity}.log"
    argv = [sys.executable, "-m", "kerf", "recommend", "--kubeconfig", str(kubeconfig)]
    argv += ["--prometheus", prometheus, "--now", stamp(end), "--interval", "1h"]
    argv += ["--rate-window", "15m", "--learning-period", "48h"]
    argv += ["--lease-duration", LEASE_DURATION, "--shards", str(shards)]
    argv += ["--metrics-host", "127.0.0.1", "--metrics-port", str(port)]
    env = {**os.environ, "POD_NAMESPACE": "kerf-system", "POD_NAME": identity}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
        )
    return Recommender(identity, process, port, log)


@contextlib.asynccontextmanager
async def recommenders(
    sim: Simulator, tmp: Path, prometheus: str, end: float, shards: int = 1
) -> AsyncIterator[tuple[Recommender, Recommender]]:
    a, b = (start(sim, tmp, name, prometheus, end, shards) for name in ("a", "b"))
    try:
        yield a, b
    finally:
        for replica in (a, b):
            if replica.process.poll() is None:
                os.killpg(replica.process.pid, signal.SIGKILL)
                replica.process.wait()


def holder(sim: Simulator) -> str | None:
    lease = sim.store.get(LEASES, "kerf-system", "kerf-recommender")
    return ((lease or {}).get("spec") or {}).get("holderIdentity")


def configmap_writes(sim: Simulator, replica: Recommender) -> list[ServedWrite]:
    return [
        w
        for w in sim.http.requests.writes
        if w.token == replica.token and w.resource == "configmaps"
    ]


async def wait_for(
    check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 90.0
) -> None:
    """Poll `check` until it holds; fail naming `what` past the bound."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def history(root: Path, end: float, namespaces: tuple[str, ...] = (NAMESPACE,)) -> Path:
    """Two days of a steady Deployment's two replicas in each namespace (gone from the
    cluster by now: their generated names map them to it), as TSDB blocks."""
    replicas = [
        Replica(
            namespace,
            f"steady-5f7c9-{suffix}",
            "app",
            constant(0.2),
            constant(300 * MI),
            end - 2 * DAY,
            end,
        )
        for namespace in namespaces
        for suffix in ("aaaaa", "bbbbb")
    ]
    backfill(openmetrics(replicas), root / "tsdb")
    return root / "tsdb"


async def test_only_the_leader_writes_and_the_other_takes_over(tmp_path: Path) -> None:
    # An hour back, on the hour: the history ends before Prometheus's own head block.
    end = (time.time() // 3600) * 3600 - 3600
    storage = history(tmp_path, end)
    with running_prometheus(storage) as url:
        async with running_sim(tmp_path) as sim, sim.api_client() as api:
            for namespace in ("kerf-system", NAMESPACE):
                await sim.add_namespace(namespace)
            steady = deployment("steady", 0, {"cpu": "500m", "memory": "512Mi"}, {"memory": "1Gi"})
            await client.AppsV1Api(api).create_namespaced_deployment(NAMESPACE, steady)
            await sim.settle()
            sim.http.requests.enable()
            async with recommenders(sim, tmp_path, url, end) as (a, b):

                async def written() -> bool:
                    return sim.store.get(CONFIGMAPS, NAMESPACE, CONFIGMAP_NAME) is not None

                await wait_for(written, "the leader's ConfigMap")
                first = holder(sim)
                leader, follower = (a, b) if first == "a" else (b, a)

                async def follower_ready() -> bool:
                    return await follower.metric("kerf_recommender_leader") == 0

                await wait_for(follower_ready, "the follower's metrics")
                assert configmap_writes(sim, follower) == []
                assert [w.verb for w in configmap_writes(sim, leader)] == ["create"]
                assert await leader.metric("kerf_recommender_leader") == 1
                # The follower does not even ask Prometheus.
                assert await follower.metric("kerf_recommender_runs_total") == 0

                await client.CoreV1Api(api).delete_namespaced_config_map(CONFIGMAP_NAME, NAMESPACE)
                os.killpg(leader.process.pid, signal.SIGKILL)
                leader.process.wait()
                killed = len(sim.http.requests.writes)

                await wait_for(written, "the new leader's ConfigMap")
                assert holder(sim) == follower.identity
                late = [w for w in configmap_writes(sim, follower) if w.seq >= killed]
                assert [w.verb for w in late] == ["create"]
                assert configmap_writes(sim, follower) == late
                assert await follower.metric("kerf_recommender_leader") == 1

                # SIGTERM: the leader gives the Lease up (empty holder) as it stops.
                follower.process.send_signal(signal.SIGTERM)
                assert await asyncio.to_thread(follower.process.wait, 60) == 0
                assert holder(sim) == ""


#: namespaces of different buckets of 8 (bucket_of)
SHARDED = ("mail", "payments", "search")


async def test_sharded_replicas_write_only_their_buckets_namespaces(tmp_path: Path) -> None:
    end = (time.time() // 3600) * 3600 - 3600
    storage = history(tmp_path, end, SHARDED)
    with running_prometheus(storage) as url:
        async with running_sim(tmp_path) as sim, sim.api_client() as api:
            await sim.add_namespace("kerf-system")
            for namespace in SHARDED:
                await sim.add_namespace(namespace)
                steady = deployment(
                    "steady", 0, {"cpu": "500m", "memory": "512Mi"}, {"memory": "1Gi"}
                )
                steady["metadata"]["namespace"] = namespace
                await client.AppsV1Api(api).create_namespaced_deployment(namespace, steady)
            await sim.settle()
            sim.writes.enabled = True
            async with recommenders(sim, tmp_path, url, end, shards=8) as (a, b):

                async def written() -> bool:
                    return all(
                        sim.store.get(CONFIGMAPS, ns, CONFIGMAP_NAME) is not None for ns in SHARDED
                    )

                await wait_for(written, "every namespace's ConfigMap")
                writers: set[str] = set()
                for write in sim.writes.entries:
                    if write.resource != "configmaps":
                        continue
                    lease = "kerf-system/" + bucket_lease_name(
                        "recommender", bucket_of(write.namespace, 8), 8
                    )
                    assert f"recommender-{write.lease_holders.get(lease)}" == write.user, write
                    writers.add(write.user)
                assert len(writers) >= 1

                async def split() -> bool:
                    held = [await r.metric("kerf_recommender_buckets_held") for r in (a, b)]
                    return held == [4, 4]

                await wait_for(split, "the buckets split four and four")
                # weighed by the Namespaces (kerf-system's too), listed before the claims
                held = [await r.metric("kerf_recommender_bucket_namespaces_held") for r in (a, b)]
                assert sum(h or 0 for h in held) >= len(SHARDED) + 1, held
                assert sim.store.get(LEASES, "kerf-system", "kerf-recommender") is None
