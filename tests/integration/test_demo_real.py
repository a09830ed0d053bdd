"""`make demo-real` as a user runs it, on the real control plane (marked e2e: `make e2e`
runs them, `make test` does not; skipped when the binaries are not built): it tells the
demo's story and exits 0 on its own; stopped with Ctrl-C it exits 130 and leaves no
process running, the control plane's included. Without the binaries it says how to build
them (in `make test`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.backend import real_available
from harness.wait import wait_until
from tests.integration.narration import leaks

ROOT = Path(__file__).resolve().parents[2]
#: A bound on the whole story on a loaded 2-core machine (about 1.5 min when idle).
STORY_S = 900

needs_real = pytest.mark.skipif(not real_available(), reason="run make cluster-tools")


def demo_real(tmp_path: Path) -> subprocess.Popen[str]:
    """`python -m demo.real` in a process group of its own, every temp file (and so every
    process it starts, which inherits TMPDIR) under `tmp_path`."""
    return subprocess.Popen(
        [sys.executable, "-m", "demo.real"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )


def ours(tmp_path: Path) -> list[int]:
    """Processes whose environment holds this test's TMPDIR: the demo and all it started."""
    marker = f"TMPDIR={tmp_path}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def leftovers(tmp_path: Path) -> list[str]:
    """The demo's temp directory and devcluster's data directory, if still there."""
    return sorted(
        p.name for p in tmp_path.glob("*") if p.name.startswith(("kerf-demo-real-", "devcluster-"))
    )


#: What only a real node shows: cgroups that change in place, the kernel's OOM kill, the
#: manifest's limit back in the cgroup.
ON_THE_REAL_NODE = (
    "python -m devcluster --kubelet real",
    "cpu.shares ",  # the cgroup's values BEFORE and AFTER the resize
    "0 restarts: the kubelet changed the cgroup in place",
    "search's resized in place by the kubelet",
    "memory.limit_in_bytes=256Mi",
    "kerf-load set memory=300Mi",
    "OOMKilled by the kernel, exit 137",
    "memory.limit_in_bytes=512Mi",
)
#: ... and what the node agent plays instead.
ON_THE_AGENT = ("PodResizePending Deferred", "ResizeFallback", "Evicted", "oom-kill=app")


@pytest.mark.e2e
@needs_real
def test_demo_real_tells_the_story_and_exits_0(tmp_path: Path) -> None:
    process = demo_real(tmp_path)
    out, err = process.communicate(timeout=STORY_S)
    assert process.returncode == 0, err
    told = " ".join(out.split())  # the narration wraps its sentences at 100 columns
    for step in (
        "devcluster serving on",
        "Installing kerf as in production",
        "kerf installed: the webhook on https://127.0.0.1:",
        "Running pods resized in place",
        "checkout: SingleReplicaUnsafe",
        "A new pod sized at admission",
        "rollback-state monitoring",
        "RollbackFailedPermanent",
        "deployment-web",
        "Done: the webhook, the reconciler and the control plane are stopped.",
        *(ON_THE_REAL_NODE if "and a real node: kubelet 1.35" in told else ON_THE_AGENT),
    ):
        assert step in told, f"{step!r} missing from the story"
    assert leaks(out) == []
    wait_until(lambda: ours(tmp_path) == [], "every process the demo started to end", 60)
    assert leftovers(tmp_path) == []


@pytest.mark.e2e
@needs_real
def test_an_interrupted_demo_real_stops_everything_it_started(tmp_path: Path) -> None:
    process = demo_real(tmp_path)
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        lines.extend(process.stdout)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    wait_until(lambda: any("kerf installed" in line for line in lines), "kerf to be running")
    assert len(ours(tmp_path)) > 5  # the demo, devcluster, its four binaries, kerf's services
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the terminal
    _, err = process.communicate(timeout=180)
    assert process.returncode == 130, err
    assert "interrupted; everything it started is stopped" in err
    wait_until(lambda: ours(tmp_path) == [], "every process the demo started to end", 60)
    assert leftovers(tmp_path) == []


def test_demo_real_without_the_control_plane_says_how_to_build_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "demo.real"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KERF_CLUSTER_TOOLS": str(tmp_path)},
    )
    assert done.returncode == 2
    assert done.stderr == "demo-real: the real control plane is not built: run make cluster-tools\n"
    assert done.stdout == ""
