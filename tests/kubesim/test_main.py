"""`python -m kubesim` serves and writes a kubeconfig that clients can use."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from kubernetes_asyncio import client, config

ROOT = Path(__file__).resolve().parents[2]


async def test_standalone_server(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kubesim",
        "--port",
        "0",
        "--kubeconfig",
        str(kubeconfig),
        "--nodes",
        "2",
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("kubesim serving on http://127.0.0.1:")
        configuration = client.Configuration()
        await config.load_kube_config(
            config_file=str(kubeconfig), client_configuration=configuration
        )
        async with client.ApiClient(configuration) as api:
            nodes = await client.CoreV1Api(api).list_node()
        assert [n.metadata.name for n in nodes.items] == ["node-1", "node-2"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
