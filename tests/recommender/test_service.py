"""`kerf recommend` as a service on kubesim: it syncs its view, runs, serves its health and
metrics, logs JSON lines, and stops on SIGTERM. Its Prometheus is down, which the run
reports (and no Prometheus needs installing)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import orjson

from kubesim.testing import running_sim
from tests.recommender.prometheus import free_port, wait_until

KERF = str(Path(sys.executable).parent / "kerf")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, OSError):
        return 0, ""


async def test_the_service_reports_an_unreachable_prometheus_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    async with running_sim(tmp_path) as sim:
        await sim.add_namespace("shop")
        # Its Lease goes in its own namespace (kerf-system when no POD_NAMESPACE says).
        await sim.add_namespace("kerf-system")
        port = free_port()
        down = f"http://127.0.0.1:{free_port()}"
        process = subprocess.Popen(
            [
                KERF,
                "recommend",
                "--kubeconfig",
                str(sim.kubeconfig_path),
                "--prometheus",
                down,
                "--metrics-host",
                "127.0.0.1",
                "--metrics-port",
                str(port),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            metrics = f"http://127.0.0.1:{port}/metrics"

            def ran() -> str | None:
                status, text = get(metrics)
                marker = 'kerf_recommender_runs_total{result="PrometheusUnreachable"} 1.0'
                return text if status == 200 and marker in text else None

            await asyncio.to_thread(wait_until, ran, "a run to be counted")
            assert (await asyncio.to_thread(get, f"http://127.0.0.1:{port}/readyz"))[0] == 200
            process.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.to_thread(process.communicate, timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 0, stderr
    lines = [orjson.loads(line) for line in stderr.splitlines()]
    [warning] = [line for line in lines if line["msg"] == "no recommendations this run"]
    assert warning["level"] == "warning" and warning["reason"] == "PrometheusUnreachable"
    assert down in warning["detail"]


async def test_once_says_an_unreachable_prometheus_once(tmp_path: Path) -> None:
    """Two workloads, Prometheus down: one line on stderr, the table names both."""
    from kubernetes_asyncio import client

    from tests.integration.reconciler.harness import deployment

    async with running_sim(tmp_path) as sim:
        await sim.add_namespace("shop")
        async with sim.api_client() as api:
            for name in ("api", "web"):
                await client.AppsV1Api(api).create_namespaced_deployment("shop", deployment(name))
        down = f"http://127.0.0.1:{free_port()}"
        argv = [KERF, "recommend", "--once", "--kubeconfig", str(sim.kubeconfig_path)]
        done = await asyncio.to_thread(
            subprocess.run,
            [*argv, "--prometheus", down],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("PrometheusUnreachable") == 1, done.stderr
    assert done.stderr.splitlines()[-1].startswith("kerf recommend: PrometheusUnreachable: ")
    assert done.stdout.count("PrometheusUnreachable") == 1, done.stdout
    assert "2 workloads: PrometheusUnreachable" in done.stdout
    assert down not in done.stdout
