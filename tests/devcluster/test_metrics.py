"""The node agent's cAdvisor endpoint: kubesim's series over the pods it is given."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp

from devcluster.metrics import MetricsServer
from kubesim.clock import rfc3339
from kubesim.usage import USAGE

Obj = dict[str, Any]


def _pod(name: str, phase: str, usage: Obj | None) -> Obj:
    started = rfc3339(datetime.now(UTC) - timedelta(seconds=100))
    annotations = {USAGE: json.dumps(usage)} if usage is not None else {}
    return {
        "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
        "spec": {
            "containers": [
                {"name": "app", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}}
            ]
        },
        "status": {
            "phase": phase,
            "containerStatuses": [
                {"name": "app", "restartCount": 0, "state": {"running": {"startedAt": started}}}
            ],
        },
    }


def _samples(text: str, name: str) -> dict[str, float]:
    """{pod: value} of one series."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('pod="', 1)[1].split('"', 1)[0]] = float(value)
    return out


async def test_a_scrape_renders_the_running_pods_usage_at_that_moment() -> None:
    pods = [
        _pod("web", "Running", {"app": {"cpu": "800m", "memory": "200Mi"}}),
        _pod("idle", "Running", None),
        _pod("new", "Pending", {"app": {"cpu": "100m", "memory": "10Mi"}}),
    ]
    server = MetricsServer(lambda: pods)
    url = await server.start()
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as answer:
            assert answer.status == 200
            assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            first = await answer.text()
        pods.append(_pod("late", "Running", {"app": {"cpu": "100m", "memory": "10Mi"}}))
        async with aiohttp.ClientSession() as session, session.get(url) as answer:
            second = await answer.text()
    finally:
        await server.stop()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics/cadvisor")
    assert _samples(first, "container_memory_working_set_bytes") == {"web": 200 * 2**20}
    # The CPU it gets is its limit (not the 800m it wants), for the 100 s since it started.
    cpu = _samples(first, "container_cpu_usage_seconds_total")["web"]
    assert 50 <= cpu < 80
    throttled = _samples(first, "container_cpu_cfs_throttled_periods_total")["web"]
    periods = _samples(first, "container_cpu_cfs_periods_total")["web"]
    assert abs(throttled / periods - 0.375) < 1e-9
    assert set(_samples(second, "container_memory_working_set_bytes")) == {"web", "late"}
