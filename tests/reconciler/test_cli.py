"""`kerf reconciler` as a user runs it: over YAML files, once over a cluster (kubesim),
as a dry run, and its health and metrics endpoints."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import orjson
from kubernetes_asyncio import client

from app.kube.informer import ClusterFeed
from app.model.annotations import PAUSE_UNTIL
from app.runtime.health import health_app, serving
from app.store.view import ClusterView
from kerf.cli import main
from reconciler.dryrun import run_dry
from reconciler.metrics import reconciler_metrics
from reconciler.service import RECONCILER_RESOURCES
from tests.cluster import strategy
from tests.integration.reconciler.harness import (
    create,
    deployment,
    running_kerf,
    static_policy,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
TARGET = {"cpu": "250m", "memory": "256Mi"}
#: the dry run's three deployments and what it would do with each of their pods
APPS = {"web": "resize", "batch": "evict", "held": "blocked"}


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
    summary = lines[-1]
    assert summary["action"] == "summary"
    assert summary["wouldResizeInPlace"] == sum(line["action"] == "resize" for line in lines)
    assert summary["message"].startswith("dry run: ")


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
        "kerf",
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


def json_lines(out: str) -> list[dict[str, Any]]:
    """The JSON lines of a run's output (its logs)."""
    lines = []
    for text in out.splitlines():
        try:
            line = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if isinstance(line, dict):
            lines.append(line)
    return lines


async def test_dry_run_covers_every_pod_says_only_would_and_sums_up(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, webhook=False) as kerf:
        apps = client.AppsV1Api(kerf.api)
        held = deployment("held", replicas=2)
        held["metadata"]["annotations"] = {PAUSE_UNTIL: "infinite"}
        for body in (deployment("web", replicas=2), deployment("batch", replicas=2), held):
            await apps.create_namespaced_deployment("shop", body)
        evict_only = strategy("evict-only", "shop")
        evict_only["spec"]["inPlaceResize"] = {"enabled": False}
        await create(kerf, "automationstrategies", evict_only)
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))
        await create(
            kerf,
            "staticpolicies",
            static_policy("batch", "batch", TARGET, strategy_name="evict-only"),
        )
        await create(kerf, "staticpolicies", static_policy("held", "held", TARGET))
        await kerf.settle()
        pods = {app: [p["metadata"]["name"] for p in await kerf.pods(app)] for app in APPS}
        version = kerf.sim.store.resource_version
        code, out = await run_kerf(kerf.sim.kubeconfig_path, "--dry-run", "--once")
        assert code == 0, out
        assert kerf.sim.store.resource_version == version  # not one write
        lines = [line for line in json_lines(out) if line.get("dryRun")]
        by_pod = {line["pod"]: line for line in lines if "pod" in line}
        for app, action in APPS.items():
            for name in pods[app]:
                assert by_pod[f"shop/{name}"]["action"] == action, (name, by_pod)
        assert all(by_pod[f"shop/{n}"]["reason"] == "Paused" for n in pods["held"])
        resize = by_pod[f"shop/{pods['web'][0]}"]
        assert resize["containers"]["app"]["requests"] == TARGET
        assert resize["msg"] == f"dry run: would resize pod shop/{pods['web'][0]} in place"
        # Nothing is said to be done: every line about an action says "would".
        said = [str(line.get("msg")) for line in json_lines(out)]
        assert not [m for m in said if m.startswith(("resized", "evicted", "published"))], said
        summary = [line["summary"] for line in lines if "summary" in line]
        assert summary == [
            {
                "wouldResizeInPlace": 2,
                "wouldEvict": 2,
                "blocked": {"Paused": 2},
                "unchanged": 0,
                "wouldPublish": 3,
                "pods": 6,
                "workloads": 3,
            }
        ]
        last = next(line for line in lines if "summary" in line)
        assert last["msg"].startswith(
            "dry run: 2 would resize in place, 2 would evict, 2 blocked (Paused 2)"
        )


async def test_health_and_metrics_endpoints() -> None:
    metrics = reconciler_metrics()
    ready = [False]
    app = health_app(metrics.registry, ready=lambda: ready[0])
    async with serving(app, "127.0.0.1", 0) as port, httpx.AsyncClient() as http:
        base = f"http://127.0.0.1:{port}"
        assert (await http.get(f"{base}/healthz")).status_code == 200
        assert (await http.get(f"{base}/readyz")).status_code == 503
        ready[0] = True
        assert (await http.get(f"{base}/readyz")).status_code == 200
        assert "kerf_reconciler_queue_depth" in (await http.get(f"{base}/metrics")).text


class Records(logging.Handler):
    """Keeps the records a logger emits (whatever `kerf`'s logging was configured to)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_a_dry_run_without_once_passes_again_each_interval(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, webhook=False) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=2)
        )
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))
        await kerf.settle()
        view = ClusterView(own_namespace="kerf-system")
        feed = ClusterFeed(kerf.api, view, RECONCILER_RESOURCES)
        stop = asyncio.Event()
        records = Records()
        logger = logging.getLogger("kerf.reconciler")
        logger.addHandler(records)
        level = logger.level
        logger.setLevel(logging.INFO)
        run = asyncio.create_task(
            run_dry(feed, view, stop=stop, once=False, interval_s=0.05, clock=kerf.sim.clock.now)
        )

        def summaries() -> list[dict[str, Any]]:
            found = [getattr(r, "fields", {}) for r in records.records]
            return [f["summary"] for f in found if "summary" in f]

        async def two_passes() -> bool:
            return len(summaries()) >= 2

        try:
            await wait_for(kerf, two_passes, "a second dry-run pass")
        finally:
            stop.set()
            logger.removeHandler(records)
            logger.setLevel(level)
        assert await asyncio.wait_for(run, 10) == 0
        assert all(s["wouldResizeInPlace"] == 2 for s in summaries())
