"""The recommender as a service with a leader: every replica keeps its view warm, and only
the holder of the Lease `kerf-recommender` runs (so only it queries Prometheus and writes),
at once when it becomes the leader and then every interval.

Every ConfigMap write asks the fence first (`app.kube.leader.write_fence`): a replica that has
not renewed the Lease within its renew deadline (paused, cut off) sends nothing, and its
run is dropped, not retried; whoever leads runs again from fresh data.

Sharded (`--shards` above 1, `run_sharded`), every replica runs, over the workloads of
the buckets it holds (its view keeps no others, `app.kube.shardview`), each write fenced on
the bucket of its namespace: at once when it gains buckets and the view has their
objects, and then every interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from app.kube.leader import Fence, LeaderElector, NotLeading, write_fence
from app.kube.leadertimings import LeaderTimings
from app.kube.shardleases import ShardedReplicas, ShardLeases
from app.kube.transport import Requester
from recommender.metrics import RecommenderMetrics

logger = logging.getLogger("kerf.recommender")

LEASE_NAME = "kerf-recommender"
#: the shard set's name in its Leases (`app.model.shards`)
SHARD_SET = "recommender"
Run = Callable[[Fence], Awaitable[object]]
#: A run of its own, every so many seconds (asked again after each run)
Periodic = tuple[Run, Callable[[], float]]


async def _first(*waits: Coroutine[Any, Any, Any]) -> int:
    """Wait for the first of `waits` to finish (the others are cancelled); its index."""
    tasks = [asyncio.create_task(w) for w in waits]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return min(tasks.index(task) for task in done)


async def _run_once(run: Run, fence: Fence, identity: str) -> None:
    try:
        await run(fence)
    except NotLeading:
        logger.warning(
            "dropped the run: no longer the leader", extra={"fields": {"identity": identity}}
        )


async def _every(
    run: Run,
    interval_s: Callable[[], float],
    fence: Fence,
    stop: asyncio.Event,
    lost: asyncio.Event,
    identity: str,
) -> None:
    """`run` at once and then every `interval_s()` while leading (cancelled when not)."""
    while not stop.is_set() and not lost.is_set():
        await _run_once(run, fence, identity)
        await _first(stop.wait(), lost.wait(), asyncio.sleep(interval_s()))


async def run_leading(
    requester: Requester,
    run: Run,
    metrics: RecommenderMetrics,
    *,
    namespace: str,
    identity: str,
    timings: LeaderTimings,
    interval_s: float,
    stop: asyncio.Event,
    also: Sequence[Periodic] = (),
) -> None:
    """Elect a leader on the Lease; while this replica leads, `run` at once and then every
    `interval_s`, its writes through the fence, and each of `also` beside it on its own
    interval (the GPU reactive evaluation). On `stop` (between runs of `run`) the Lease is
    released, so another replica takes over without waiting for it to expire."""
    lost = asyncio.Event()

    def on_change(leading: bool) -> None:
        metrics.leader.set(1 if leading else 0)
        if not leading:
            lost.set()

    elector = LeaderElector(
        requester,
        namespace,
        identity,
        name=LEASE_NAME,
        logger=logging.getLogger("kerf.recommender.leader"),
        timings=timings,
        on_change=on_change,
        # `--shards` lowered to 1 in a rolling update: not while sharded replicas write
        may_acquire=ShardedReplicas(
            requester,
            namespace,
            identity,
            shard_set=SHARD_SET,
            mismatch_gauge=metrics.bucket_count_mismatch,
            logger=logging.getLogger("kerf.recommender.leader"),
        ).absent,
    )
    fence = write_fence(elector, metrics.writes_withheld)
    election = asyncio.create_task(elector.run(), name="leader")
    try:
        while not stop.is_set():
            if await _first(stop.wait(), elector.elected.wait()) == 0:
                break
            lost.clear()
            beside = [
                asyncio.create_task(_every(r, every, fence, stop, lost, identity))
                for r, every in also
            ]
            try:
                await _run_once(run, fence, identity)
                await _first(stop.wait(), lost.wait(), asyncio.sleep(interval_s))
            finally:
                for task in beside:
                    task.cancel()
                await asyncio.gather(*beside, return_exceptions=True)
    finally:
        election.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await election
    await elector.release()


async def run_sharded(
    shards: ShardLeases,
    run: Run,
    metrics: RecommenderMetrics,
    *,
    complete: asyncio.Event,
    gained: asyncio.Event,
    interval_s: float,
    stop: asyncio.Event,
    also: Sequence[Periodic] = (),
) -> None:
    """While this replica holds buckets, `run` once the view has their objects
    (`complete`), again as soon as it `gained` more, and every `interval_s`; each of
    `also` beside it on its own interval. Writes go through the bucket fence. The shard
    set runs (and is released) outside: its first claims come before the view is listed."""
    fence = shards.fence(metrics.writes_withheld)
    never = asyncio.Event()
    beside = [
        asyncio.create_task(_every(r, every, fence, stop, never, shards.identity))
        for r, every in also
    ]
    try:
        while not stop.is_set():
            if await _first(stop.wait(), complete.wait()) == 0:
                break
            gained.clear()
            if shards.held():
                await _run_once(run, fence, shards.identity)
            await _first(stop.wait(), gained.wait(), asyncio.sleep(interval_s))
    finally:
        for task in beside:
            task.cancel()
        await asyncio.gather(*beside, return_exceptions=True)
