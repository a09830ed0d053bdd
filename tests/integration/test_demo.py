"""`make demo` as a user runs it: it tells the whole story, in kubectl's notation with no
Python reprs, JSON or second time format, and exits 0 on its own; stopped with Ctrl-C it
exits at once and leaves nothing running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.narration import leaks

ROOT = Path(__file__).resolve().parents[2]


def demo(**kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "demo"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: nothing may be left in it
        **kwargs,  # type: ignore[arg-type]
    )


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_demo_tells_the_story_and_exits_0() -> None:
    process = demo()
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    for step in (
        "Running pods resized in place",
        "checkout: SingleReplicaUnsafe",
        "A new pod sized at admission",
        "Deferred: the node is busy",
        "ResizeFallback",
        "Evicted",
        "rollback-state monitoring",
        "RollbackFailedPermanent",
        "deployment-web",
        "What kerf saves",
        "RECLAIM USD/MO",
        "Done:",
    ):
        assert step in out, f"{step!r} missing from the demo's story"
    for told in (
        "400m → 250m",  # web's requests, the manifest's → the pod's
        "memory limit 512Mi → 256Mi (2 pods)",  # cart's bad downsize
        "(adoption threshold 50%)",  # an Event note, whole
    ):
        assert told in out, f"{told!r} missing from the demo's story"
    assert leaks(out) == []
    assert not group_alive(process.pid)


def test_an_interrupted_demo_leaves_nothing_running() -> None:
    process = demo()
    assert process.stdout is not None
    for line in process.stdout:  # interrupt once kerf is up
        if "kerf installed" in line:
            break
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode in (130, -signal.SIGINT), err
    deadline = time.monotonic() + 30
    while group_alive(process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not group_alive(process.pid)
