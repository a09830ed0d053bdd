"""`kerf reconciler` as a user runs it: over YAML files, once over a cluster (kubesim),
as a dry run, and its health and metrics endpoints."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import orjson
from kubernetes_asyncio import client

from app.cli import main
from reconciler.metrics import reconciler_metrics
from reconciler.service import health_app, serving
from tests.reconciler.harness import create, deployment, running_kerf, static_policy

ROOT = Path(__file__).resolve().parents[2]
TARGET = {"cpu": "250m", "memory": "256Mi"}


def test_state_dir_prints_what_it_would_do(capsys: Any) -> None:
    assert main(["reconciler", "--state-dir", str(ROOT / "examples" / "storefront")]) == 0
    lines = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    actions = [
        (line["action"], line.get("pod") or line.get("workload") or line.get("name"))
        for line in lines
    ]
    assert ("resize", "shop/web-7d4b9-abcde") in actions
    assert ("patch annotations", "Deployment/shop/web") in actions
    resize = next(line for line in lines if line["action"] == "resize" and "web" in line["pod"])
    assert resize["containers"]["app"]["requests"] == TARGET


def test_bad_options_exit_2(tmp_path: Path, capsys: Any) -> None:
    assert main(["reconciler", "--state-dir", str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["reconciler", "--kubeconfig", str(tmp_path / "nope")]) == 2
    assert main(["reconciler", "--eviction-rate", "0"]) == 2
    capsys.readouterr()


def test_leader_timings_that_allow_two_leaders_exit_2(capsys: Any) -> None:
    # A renew deadline not shorter than the Lease: the leader could still write after a
    # follower took over.
    assert main(["reconciler", "--lease-duration", "6", "--renew-deadline", "6"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--renew-deadline (6s) < --lease-duration (6s)" in err
    assert main(["reconciler", "--lease-duration", "6", "--retry-period", "5"]) == 2
    assert "--retry-period (5s)" in capsys.readouterr().err


async def run_kerf(kubeconfig: Path, *flags: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        "reconciler",
        "--kubeconfig",
        str(kubeconfig),
        "--metrics-port",
        "0",
        "--metrics-host",
        "127.0.0.1",
        *flags,
        cwd=ROOT,
        env={**os.environ, "POD_NAMESPACE": "kerf-system", "POD_NAME": "cli-test"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode()


async def test_once_makes_one_pass_and_exits(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=2)
        )
        await kerf.settle()
        pods = await kerf.pods("web")
        assert all(p["spec"]["containers"][0]["resources"]["requests"] == TARGET for p in pods)
        # Pods sized at admission: one pass records that and writes the recommendation.
        code, out = await run_kerf(kerf.sim.kubeconfig_path, "--once")
        assert code == 0, out
        record = await kerf.recommendation("deployment-web")
        assert record["status"]["phase"] == "Applied"
        assert record["status"]["lastApplied"]["method"] == "admission"


async def test_dry_run_logs_actions_and_writes_nothing(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, webhook=False) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=2)
        )
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))
        await kerf.settle()
        version = kerf.sim.store.resource_version
        code, out = await run_kerf(kerf.sim.kubeconfig_path, "--dry-run", "--once")
        assert code == 0, out
        assert "would resize" in out
        assert kerf.sim.store.resource_version == version  # not one write
        assert await kerf.recommendation("deployment-web") is None


async def test_health_and_metrics_endpoints() -> None:
    metrics = reconciler_metrics()
    ready = [False]
    app = health_app(metrics, ready=lambda: ready[0])
    async with serving(app, "127.0.0.1", 0) as port, httpx.AsyncClient() as http:
        base = f"http://127.0.0.1:{port}"
        assert (await http.get(f"{base}/healthz")).status_code == 200
        assert (await http.get(f"{base}/readyz")).status_code == 503
        ready[0] = True
        assert (await http.get(f"{base}/readyz")).status_code == 200
        assert "kerf_reconciler_queue_depth" in (await http.get(f"{base}/metrics")).text
