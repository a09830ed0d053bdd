"""A bad in-place downsize on the simulator: kubesim's usage model OOM-kills the pods and
the rollback state machine, reading the same pod objects, rolls back, backs off and waits
for the next turn. (The reconciler's I/O is not part of this test: the resizes it would
make are made here through the real `pods/resize` subresource.)"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from app.policy.rollback import RollbackState
from app.policy.rollback_health import Applied
from app.policy.rollback_monitor import MonitorInputs, Step, step
from kubesim.sim import Simulator
from kubesim.testing import running_sim
from kubesim.usage import USAGE
from tests.app import builders as b

MANIFEST = {"app": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}}


def deployment() -> dict[str, Any]:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": labels},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {USAGE: '{"app": {"cpu": "50m", "memory": "300Mi"}}'},
                },
                "spec": {
                    "containers": [{"name": "app", "image": "nginx", "resources": MANIFEST["app"]}]
                },
            },
        },
    }


def pods(sim: Simulator) -> list[dict[str, Any]]:
    return [p for p in sim.store.list(("", "pods")) if p["metadata"]["namespace"] == "default"]


async def resize_all(sim: Simulator, core: client.CoreV1Api, memory_limit: str) -> None:
    for pod in pods(sim):
        await core.patch_namespaced_pod_resize(
            pod["metadata"]["name"],
            "default",
            {
                "spec": {
                    "containers": [
                        {"name": "app", "resources": {"limits": {"memory": memory_limit}}}
                    ]
                }
            },
        )
    await sim.settle()


async def test_an_oom_killing_downsize_is_rolled_back_to_the_manifest(tmp_path: Path) -> None:
    policy = b.kerf(
        "RollbackPolicy",
        "rb",
        {
            "monitoringPeriod": "5m",
            "rollbackTarget": "manifest",
            "adoptionThresholdPercent": 50,
            "backoff": {"timePeriod": "1m", "multiplyByTurn": 2, "maxAttempts": 2},
        },
        namespace="default",
    )
    async with running_sim(tmp_path) as sim:
        await sim.add_node("n1")
        async with sim.api_client() as api:
            core = client.CoreV1Api(api)
            await client.AppsV1Api(api).create_namespaced_deployment("default", deployment())
            await sim.settle()
            record: dict[str, Applied] = {}

            def advance(state: RollbackState | None) -> Step:
                given = MonitorInputs(
                    policy,  # type: ignore[arg-type]
                    "f1",
                    pods(sim),
                    replicas=2,
                    manifest=MANIFEST,
                    applied=record.get("lastApplied"),
                )
                return step(state, given, sim.clock.now())

            # Nothing applied yet: the recommendation waits.
            assert advance(None).state.mode == "idle"  # type: ignore[union-attr]
            await resize_all(sim, core, "256Mi")  # below the 300Mi the app uses
            assert advance(None).state.mode == "idle"  # type: ignore[union-attr]
            # The reconciler records what it applied; now the pods carry the recommendation.
            record["lastApplied"] = Applied(
                "f1", sim.clock.now(), {"app": {"limits": {"memory": "256Mi"}}}
            )
            started = advance(None)
            assert started.state is not None and started.state.mode == "monitoring"

            await sim.advance(300)
            killed = [p["status"]["containerStatuses"][0] for p in pods(sim)]
            assert all(s["lastState"]["terminated"]["reason"] == "OOMKilled" for s in killed)
            verdict = advance(started.state)
            assert verdict.state is not None
            assert (verdict.state.mode, verdict.state.failure_reason) == (
                "rollingBack",
                "oomKilled",
            )
            assert verdict.restore == MANIFEST
            assert verdict.last_rollback is not None and verdict.last_rollback.resources == [
                "memory"
            ]

            # The restore (the reconciler's resize back to the manifest) stops the kills.
            await resize_all(sim, core, "512Mi")
            await sim.advance(60)
            counts = [p["status"]["containerStatuses"][0]["restartCount"] for p in pods(sim)]
            backing = advance(verdict.state)
            assert backing.state is not None and backing.state.mode == "backingOff"
            assert backing.requeue_at == sim.clock.now() + timedelta(minutes=2)

            await sim.advance(120)
            assert [
                p["status"]["containerStatuses"][0]["restartCount"] for p in pods(sim)
            ] == counts
            retry = advance(backing.state)
            assert retry.state is not None
            assert (retry.state.mode, retry.state.turn) == ("idle", 2)
            assert retry.restore is None
