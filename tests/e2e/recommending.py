"""Helpers of the tests that have a real Prometheus scrape a backend's cAdvisor-style
metrics and run `kerf recommend` over them: a workload with a usage annotation (on a real
kubelet, the use kerf-load really makes: harness/loadimage.py `runnable`), the wait for
its scrapes, one short run."""

from __future__ import annotations

import base64
import json
import subprocess
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from harness.services import KERF
from kubesim.usage import USAGE

#: Seconds of scraped history the run analyses (Prometheus scrapes every second).
SCRAPES = 8


def usage_deployment(usage: dict[str, str]) -> dict[str, Any]:
    """Deployment `web`: two replicas using `usage` under a 500m CPU and 1Gi memory limit
    (8 × the memory request)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {
                    "labels": {"app": "web"},
                    "annotations": {USAGE: json.dumps({"app": usage})},
                },
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "shop/web:1",
                            "resources": {
                                # Small: the pods stay on the shared e2e cluster.
                                "requests": {"cpu": "100m", "memory": "128Mi"},
                                # A CPU limit below the usage: throttled in the share
                                # (800m - 500m) / 800m of its CFS periods.
                                "limits": {"cpu": "500m", "memory": "1Gi"},
                            },
                        }
                    ]
                },
            },
        },
    }


def query(url: str, promql: str) -> list[dict[str, Any]]:
    """An instant query's result."""
    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    ) as answer:
        return list(json.load(answer)["data"]["result"])


def scraped(url: str, namespace: str, points: int = SCRAPES) -> bool:
    """Both replicas in `namespace` have at least `points` points of their `app`
    container's working set (a real kubelet's cAdvisor has pod-level series too)."""
    series = f'container_memory_working_set_bytes{{namespace="{namespace}",container="app"}}'
    found = query(url, f"count_over_time({series}[1m])")
    return len(found) == 2 and all(float(s["value"][1]) >= points for s in found)


def tls_files(kubeconfig: Path, directory: Path) -> dict[str, Path]:
    """The kubeconfig's CA and client certificate as files, for a Prometheus scraping a
    real kubelet's cAdvisor through the API server's node proxy."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    files = {
        "ca_file": ("ca.crt", cluster["certificate-authority-data"]),
        "cert_file": ("client.crt", user["client-certificate-data"]),
        "key_file": ("client.key", user["client-key-data"]),
    }
    written = {}
    for key, (name, data) in files.items():
        path = directory / name
        path.write_bytes(base64.b64decode(data))
        written[key] = path
    return written


def recommend_once(
    kubeconfig: Path, url: str, now: datetime, *extra: str
) -> subprocess.CompletedProcess[str]:
    """`kerf recommend --once -o json` over the SCRAPES seconds before `now` (whole
    seconds), with `extra` flags."""
    return subprocess.run(
        [
            KERF,
            "recommend",
            "--kubeconfig",
            str(kubeconfig),
            "--prometheus",
            url,
            "--once",
            "-o",
            "json",
            "--now",
            now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "--window",
            f"{SCRAPES}s",
            "--step",
            "1s",
            "--rate-window",
            "3s",
            "--max-gap",
            "4s",
            "--learning-period",
            f"{SCRAPES}s",
            "--full-samples",
            "10",
            "--log-level",
            "warning",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
