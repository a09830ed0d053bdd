"""The reconciler benches end a phase on quiet, never before every workload was passed over."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks import reconciler as bench
from reconciler.memory import Inventory


class _Queue:
    idle = True

    def __len__(self) -> int:
        return 0

    def scheduled_within(self, seconds: float) -> bool:
        return False


def _service(keys: list[tuple[str, str, str]], memory: Inventory) -> Any:
    workloads = [SimpleNamespace(ref=SimpleNamespace(key=key)) for key in keys]
    view = SimpleNamespace(lock=threading.RLock(), workloads=lambda: workloads, pods=lambda: [])
    metrics = SimpleNamespace(calls=None)
    return SimpleNamespace(
        view=view, queue=_Queue(), reconciler=SimpleNamespace(memory=memory), metrics=metrics
    )


async def test_a_phase_waits_for_every_workload_and_a_complete_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looks = [0]

    def writes(metrics: Any) -> float:
        looks[0] += 1
        return 0.0

    async def looked_again() -> None:
        """The loop went round three more times, its deadline past each time."""
        until = looks[0] + 3
        while looks[0] < until:
            await asyncio.sleep(0.01)

    monkeypatch.setattr(bench, "_writes", writes)
    monkeypatch.setattr(bench, "WRITES_QUIET_S", 0.0)
    # an idle queue with every pod at its target ends on QUIET_S: out of the way
    monkeypatch.setattr(bench, "resizing_pods", lambda view: 1)
    keys = [("Deployment", "team-1", "a"), ("Deployment", "team-2", "b")]
    memory, complete = Inventory(), asyncio.Event()
    quiet = asyncio.create_task(bench._quiet(_service(keys, memory), complete))
    memory.get(keys[0])
    complete.set()
    await looked_again()  # the second workload was never passed
    assert not quiet.done()
    complete.clear()
    memory.get(keys[1])
    await looked_again()  # every workload passed, the view not complete (a relist)
    assert not quiet.done()
    complete.set()
    ended = await asyncio.wait_for(quiet, 30)
    assert ended[:2] == (bench.WRITES_QUIET_S, "no writes")
    assert ended.check_cpu_seconds > 0  # its walks of the view, counted apart


async def test_a_quiet_queue_is_not_the_end_before_every_workload_was_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bench, "_writes", lambda metrics: 0.0)
    monkeypatch.setattr(bench, "WRITES_QUIET_S", 1e9)  # the deadline out of the way
    keys = [("Deployment", "team-1", "a"), ("Deployment", "team-2", "b")]
    memory, complete = Inventory(), asyncio.Event()
    complete.set()
    memory.get(keys[0])  # the other one's bucket was lost and is listed again
    quiet = asyncio.create_task(bench._quiet(_service(keys, memory), complete))
    await asyncio.sleep(bench.QUIET_S + 0.5)
    assert not quiet.done()
    memory.get(keys[1])
    ended = await asyncio.wait_for(quiet, 30)
    assert ended[:2] == (bench.QUIET_S, "quiet")
    assert ended.check_cpu_seconds > 0
