"""`kerf approve` and `kerf status` against kubesim, with the real reconciler: a large
decrease in audit mode shows its schedule, `--target` approves every step, each goes a
cooldown after the last, and `kubectl get rsrec` shows the values at each point."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from app.model.annotations import APPROVE, APPROVE_TARGET
from app.model.owners import WorkloadRef
from tests.cluster import table_cells
from tests.integration.reconciler.harness import (
    Kerf,
    RunningReconciler,
    create,
    deployment,
    requests_of,
    running_kerf,
    static_policy,
    status_of,
    wait_for,
)
from tests.webhook.test_manifests import kubectl

ROOT = Path(__file__).resolve().parents[3]
#: 1 CPU down to 200m at maxChangePercent 50: 500m, 250m, 200m.
ASKED = {"cpu": "200m", "memory": "1Gi"}


async def run(*argv: str) -> subprocess.CompletedProcess[str]:
    """A command in a fresh process (kerf's CLI, kubectl), off the event loop."""
    return await asyncio.to_thread(
        subprocess.run, list(argv), capture_output=True, text=True, timeout=60, cwd=ROOT
    )


async def kerf_cli(kerf: Kerf, *argv: str) -> subprocess.CompletedProcess[str]:
    config = str(kerf.sim.kubeconfig_path)
    return await run(sys.executable, "-m", "kerf", *argv, "--kubeconfig", config)


async def kubectl_get(kerf: Kerf, *extra: str) -> list[dict[str, str]]:
    """`kubectl get rsrec -n shop`: a dict per row, column → cell."""
    config = str(kerf.sim.kubeconfig_path)
    done = await run(kubectl(), "--kubeconfig", config, "get", "rsrec", "-n", "shop", *extra)
    assert done.returncode == 0, done.stderr
    return table_cells(done.stdout)


async def cpu_is(kerf: Kerf, value: str) -> bool:
    pods = await kerf.pods("web")
    return bool(pods) and all(requests_of(p)["cpu"] == value for p in pods)


async def next_day(kerf: Kerf, replica: RunningReconciler) -> None:
    """A cooldown (24h) later on the reconciler's clock, and the workload looked at again
    (what its requeue timer does; the queue runs on the event loop's clock)."""
    await kerf.sim.advance(timedelta(hours=24).total_seconds())
    replica.service.queue.add(WorkloadRef("Deployment", "shop", "web"))


async def test_approve_target_takes_every_step_a_cooldown_apart(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=2, cpu="1", memory="1Gi")
        )
        await kerf.settle()
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", ASKED, mode="audit"))

        async def proposed() -> dict[str, Any] | None:
            status = await status_of(kerf)
            return status if status.get("phase") == "Proposed" else None

        status = await wait_for(kerf, proposed, "an audited proposal")
        proposal = status["proposal"]
        assert (proposal["steps"], proposal["cooldown"]) == (3, "24h0m0s")
        assert "nextAt" not in proposal  # no change yet: the first step may go at once
        assert status["summary"] == {
            "cpu": "1→200m",
            "memory": "1Gi",
            "reason": "Audit",
            "policy": "StaticPolicy/web",
        }
        (row,) = await kubectl_get(kerf)
        assert list(row) == ["NAME", "CPU", "MEMORY", "PHASE", "REASON", "AGE"]
        assert list(row.values())[:5] == ["deployment-web", "1→200m", "1Gi", "Proposed", "Audit"]

        listed = await kerf_cli(kerf, "approve")
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert lines[0].split()[:3] == ["NAMESPACE", "WORKLOAD", "STEPS"]
        assert lines[1].split()[:3] == ["shop", "deployment/web", "3"]
        assert "app cpu 1→500m" in lines[1] and "app cpu 1→200m" in lines[1]

        approved = await kerf_cli(kerf, "approve", "deploy/web", "-n", "shop", "--target")
        assert approved.returncode == 0, approved.stderr
        assert "approved every step of deployment/web in shop" in approved.stdout
        assert "3 step(s), the first now" in approved.stdout
        record = await kerf.recommendation("deployment-web")
        assert record is not None
        annotations = record["metadata"]["annotations"]
        assert annotations[APPROVE_TARGET] == proposal["targetId"]
        assert APPROVE not in annotations

        await wait_for(kerf, lambda: cpu_is(kerf, "500m"), "the first step")

        async def held() -> dict[str, Any] | None:
            status = await status_of(kerf)
            shown = status.get("proposal") or {}
            return status if status.get("reason") == "Cooldown" and shown.get("steps") else None

        status = await wait_for(kerf, held, "the second step held by the cooldown")
        assert status["phase"] == "Applied"
        assert status["proposal"]["steps"] == 2
        assert status["proposal"]["nextAt"] == status["nextAllowedAt"]
        assert status["summary"]["cpu"] == "500m→200m"
        assert status["summary"]["reason"] == "Cooldown"

        shown = await kerf_cli(kerf, "status", "-n", "shop")
        assert shown.returncode == 0, shown.stderr
        head, line = shown.stdout.splitlines()
        assert head.split()[:4] == ["NAMESPACE", "WORKLOAD", "PHASE", "REASON"]
        assert line.split()[:4] == ["shop", "deployment/web", "Applied", "Cooldown"]
        assert "  app cpu 500m→200m memory 1Gi  " in line
        # (the simulator's clock is not the command's: when the step goes is not asserted)
        assert "approved step " in line and "then 1 more a cooldown (24h0m0s) apart" in line
        assert "{" not in line and "'" not in line  # no Python reprs

        await next_day(kerf, replica)
        await wait_for(kerf, lambda: cpu_is(kerf, "250m"), "the second step a day later")
        await next_day(kerf, replica)
        await wait_for(kerf, lambda: cpu_is(kerf, "200m"), "the last step a day after that")

        async def reached() -> dict[str, Any] | None:
            status = await status_of(kerf)
            done = status.get("phase") == "Applied" and "proposal" not in status
            return status if done else None

        status = await wait_for(kerf, reached, "the target reached")
        assert status["summary"]["reason"] == "Resized"
        (row,) = await kubectl_get(kerf, "-o", "wide")
        assert row == {
            "NAME": "deployment-web",
            "CPU": "200m",
            "MEMORY": "1Gi",
            "PHASE": "Applied",
            "REASON": "Resized",
            "CPU-LIMIT": "",  # the Deployment sets no limits
            "MEMORY-LIMIT": "",
            "POLICY": "StaticPolicy/web",
            "NEXT": "",
            "AGE": row["AGE"],
        }


async def test_approve_says_in_one_line_what_it_cannot_approve(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=1)
        )
        await kerf.settle()
        await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", {"cpu": "250m"}))

        async def applied() -> bool:
            return (await status_of(kerf)).get("phase") == "Applied"

        await wait_for(kerf, applied, "the change applied")
        missing = await kerf_cli(kerf, "approve", "deployment/api", "-n", "shop")
        assert missing.returncode == 1
        assert missing.stderr.splitlines() == [
            "kerf approve: no RightsizingRecommendation deployment-api in namespace shop: kerf "
            "does not manage deployment/api there (`kerf approve` lists what awaits approval)"
        ]
        nothing = await kerf_cli(kerf, "approve", "deployment/web", "-n", "shop")
        assert nothing.returncode == 1
        assert len(nothing.stderr.splitlines()) == 1
        assert "shows no proposal to approve (phase Applied, reason Resized)" in nothing.stderr
        listed = await kerf_cli(kerf, "approve")
        assert (listed.returncode, listed.stdout) == (0, "")
        assert listed.stderr == "kerf approve: nothing awaits approval\n"


async def test_status_watch_prints_a_line_per_change(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=1, cpu="1", memory="1Gi")
        )
        await kerf.settle()
        await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", ASKED, mode="audit"))

        async def proposed() -> bool:
            return (await status_of(kerf)).get("phase") == "Proposed"

        await wait_for(kerf, proposed, "an audited proposal")
        config = str(kerf.sim.kubeconfig_path)
        watcher = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kerf",
            "status",
            "-w",
            "--kubeconfig",
            config,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert watcher.stdout is not None
            header = await asyncio.wait_for(watcher.stdout.readline(), 60)
            assert header.decode().split()[:2] == ["NAMESPACE", "WORKLOAD"]
            first = (await asyncio.wait_for(watcher.stdout.readline(), 60)).decode()
            assert "Proposed" in first and "approve: kerf approve deployment/web -n shop" in first
            done = await kerf_cli(kerf, "approve", "deployment/web", "-n", "shop")
            assert done.returncode == 0, done.stderr
            # The annotation, then the step's statuses: a line each, until the step is in.
            while True:
                line = (await asyncio.wait_for(watcher.stdout.readline(), 60)).decode()
                assert line, "the watch ended"
                if "Applied" in line:
                    break
            assert "app cpu 500m→200m" in line
        finally:
            watcher.send_signal(signal.SIGINT)
            _, err = await asyncio.wait_for(watcher.communicate(), 60)
        assert watcher.returncode == 130
        assert b"Traceback" not in err
