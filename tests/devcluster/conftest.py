"""Fixtures for the devcluster tests: a running `python -m devcluster` and kubectl over it.

Tests marked `e2e` need the control-plane binaries (`make cluster-tools`, or
KERF_CLUSTER_TOOLS=/dir); without them they are skipped.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from devcluster.processes import MissingBinary, find_binaries, tools_dir

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")
#: Bound on a cold start to a written kubeconfig (about 9 s on a 2-core machine).
START_S = 120
STOP_S = 30


def _binaries_missing() -> str:
    try:
        find_binaries(tools_dir())
    except MissingBinary as exc:
        return str(exc.path)
    return ""


def _kubectl_path() -> str:
    return os.environ.get("KUBECTL") or str(ROOT / ".tools" / "bin" / "kubectl")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the e2e tests, cleanly, when a binary (or kubectl) is missing."""
    missing = _binaries_missing()
    reason = f"run make cluster-tools ({missing} is missing)" if missing else ""
    if not reason and shutil.which(_kubectl_path()) is None:
        reason = "run make tools (kubectl is missing)"
    if not reason:
        return
    for item in items:
        if item.get_closest_marker("e2e") is not None:  # not the keyword: tests/e2e is a package
            item.add_marker(pytest.mark.skip(reason=reason))


def wait_for(check: Callable[[], T], what: str, timeout_s: float = 30.0) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` after the bound."""
    deadline = time.monotonic() + timeout_s
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)
    return result


@dataclass
class Cluster:
    """A running devcluster: its process, kubeconfig and temp dir."""

    process: subprocess.Popen[str]
    kubeconfig: Path
    tmpdir: Path
    first_line: str

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """Run kubectl against the cluster; its stdout (stderr too when check fails)."""
        result = subprocess.run(
            [_kubectl_path(), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr}")
        return result.stdout + ("" if check else result.stderr)

    def get(self, *args: str) -> Any:
        """`kubectl get ... -o json`, decoded."""
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def apply(self, obj: dict[str, Any]) -> None:
        """Create or update an object."""
        self.kubectl("apply", "-f", "-", stdin=json.dumps(obj))

    def children(self) -> list[int]:
        """Pids of the processes devcluster started."""
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.process.pid:
                found.append(int(stat.parent.name))
        return found

    def stop(self) -> int:
        """SIGTERM and wait; the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(STOP_S)


def start_cluster(base: Path, *args: str) -> Cluster:
    """Start `python -m devcluster` with its own TMPDIR under `base`; return once it has
    printed its line (the kubeconfig is then written)."""
    tmpdir = base / "tmp"
    tmpdir.mkdir(parents=True)
    kubeconfig = base / "kubeconfig"
    # stderr to a file: a pipe nobody drains would block devcluster once full.
    errors = base / "stderr.txt"
    mode = [] if "--kubelet" in args else ["--kubelet", "agent"]
    with errors.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "devcluster", "--kubeconfig", str(kubeconfig), *mode, *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, "TMPDIR": str(tmpdir)},
        )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], START_S)
    line = process.stdout.readline() if ready else ""
    if not line:
        process.kill()
        process.wait(STOP_S)
        how = "exited" if ready else f"did not start within {START_S} s"
        raise AssertionError(f"devcluster {how} (code {process.returncode}): {errors.read_text()}")
    return Cluster(process, kubeconfig, tmpdir, line.strip())


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One devcluster (1 node, 4 cpu, 8Gi) shared by the e2e tests."""
    running = start_cluster(tmp_path_factory.mktemp("devcluster"))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own, deleted after it (without waiting)."""
    name = "t-" + request.node.name.removeprefix("test_").replace("_", "-")[:50].rstrip("-")
    cluster.kubectl("create", "namespace", name)
    wait_for(
        lambda: (
            cluster.kubectl("get", "serviceaccount", "default", "-n", name, check=False)
            .strip()
            .startswith("NAME")
        ),
        f"the default ServiceAccount in {name}",
    )
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")
