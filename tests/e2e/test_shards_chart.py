"""The chart's sharded reconciler on the real control plane (kube-apiserver 1.35, kerf's
RBAC enforced): two `kerf reconciler --shards 4` processes running as the chart's
ServiceAccount share the buckets on their Leases, which `kerf status --shards` (as the
admin) shows one line per replica; one stopped with SIGTERM gives its buckets to the
other at once. Neither is refused anything by the API server."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from harness.backend import real_available, running_backend
from harness.install import service_kubeconfig
from harness.kubectl import Kubectl
from harness.wait import wait_until
from tests.e2e.backends import selected
from tests.e2e.test_helm import CHART, NAMESPACE, run_block

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
BUCKETS = 4


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def reconciler(kubeconfig: Path, identity: str, log: Path) -> Iterator[subprocess.Popen[str]]:
    """`kerf reconciler --shards 4` as the replica `identity`, its log in `log`; stopped
    with SIGTERM (and waited for) on exit if still running."""
    env = {**os.environ, "POD_NAME": identity, "POD_NAMESPACE": NAMESPACE}
    argv = [sys.executable, "-m", "kerf", "reconciler", "--kubeconfig", str(kubeconfig)]
    argv += [f"--shards={BUCKETS}", "--lease-duration=6", f"--metrics-port={free_port()}"]
    with log.open("w") as out:
        process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
        )
        try:
            yield process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=60)


def buckets_in(ranges: str) -> set[int]:
    """`00-01,03` → {0, 1, 3}."""
    found: set[int] = set()
    for run in ranges.split(","):
        first, _, last = run.partition("-")
        found.update(range(int(first), int(last or first) + 1))
    return found


def shard_table(kubeconfig: Path) -> list[list[str]]:
    """`kerf status --shards` as the admin: its rows, split into cells."""
    done = subprocess.run(
        [sys.executable, "-m", "kerf", "status", "--shards", "--kerf-namespace", NAMESPACE]
        + ["--kubeconfig", str(kubeconfig)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [re.split(r"\s{2,}", line) for line in done.stdout.splitlines()[1:]]


def test_two_replicas_of_the_chart_share_the_buckets_and_status_shows_them(
    tmp_path: Path,
) -> None:
    if selected() != "real":
        pytest.skip("the chart's RBAC is enforced on the real control plane (make e2e)")
    if not real_available():
        pytest.skip("the real control plane is not built: run make cluster-tools")
    with running_backend("real", tmp_path, nodes=1) as backend:
        admin = Kubectl(backend.kubeconfig)
        run_block(
            backend.kubeconfig,
            f"helm install kerf {CHART} --namespace {NAMESPACE} --create-namespace "
            f"--set reconciler.replicas=1 --set reconciler.shards={BUCKETS}",
        )
        account = service_kubeconfig(
            backend, admin, "kerf-reconciler", tmp_path / "reconciler.kubeconfig"
        )
        logs = {name: tmp_path / f"{name}.log" for name in ("shard-a", "shard-b")}
        with ExitStack() as stack:
            first = stack.enter_context(reconciler(account, "shard-a", logs["shard-a"]))
            second = stack.enter_context(reconciler(account, "shard-b", logs["shard-b"]))

            def shared() -> list[list[str]] | None:
                # shared by the namespaces in the buckets (a column of their own), so
                # not necessarily half the buckets each
                rows = shard_table(backend.kubeconfig)
                both = [row[:2] for row in rows] == [
                    ["reconciler", "shard-a"],
                    ["reconciler", "shard-b"],
                ]
                return rows if both and all(row[2] != "0" for row in rows) else None

            rows = wait_until(shared, "two replicas holding buckets each", 120)
            mine, theirs = buckets_in(rows[0][4]), buckets_in(rows[1][4])
            assert not mine & theirs and mine | theirs == set(range(BUCKETS)), rows
            namespaces = admin.json("namespaces")["items"]
            assert int(rows[0][3]) + int(rows[1][3]) == len(namespaces), rows
            assert all(re.fullmatch(r"\d+s ago", row[5]) for row in rows), rows

            second.send_signal(signal.SIGTERM)
            assert second.wait(timeout=60) == 0

            def alone() -> list[list[str]] | None:
                rows = shard_table(backend.kubeconfig)
                return (
                    rows
                    if [row[:3] + row[4:5] for row in rows]
                    == [["reconciler", "shard-a", "4", "00-03"]]
                    else None
                )

            wait_until(alone, "the remaining replica holding every bucket", 60)
            assert first.poll() is None
        for name, log in logs.items():
            text = log.read_text()
            assert "forbidden" not in text.lower(), f"{name}: {text[-2000:]}"
