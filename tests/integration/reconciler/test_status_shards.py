"""`kerf status --shards` over the Leases real sharded reconcilers keep on kubesim: two
replicas each show half the buckets, disjoint, with none free or expired; one that stops
(SIGTERM) leaves the table and the other shows every bucket.

The table is computed in this process, at the simulator's (fake) time, from the Leases
`kerf status --shards` reads (the command itself, on real Leases, is
tests/integration/test_status_shards.py): the renewal times the replicas write are the
simulator's, not this machine's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kerf.records_api import Records
from kerf.shard_status import shard_rows
from tests.integration.reconciler.harness import FAST, Kerf, running_kerf, wait_for

BUCKETS = 8
A, B = "kerf-reconciler-a", "kerf-reconciler-b"


async def table(kerf: Kerf) -> list[list[str]]:
    """What `kerf status --shards` prints under its header, now."""
    leases = await Records(kerf.api, 30.0).shard_leases("kerf-system")
    return shard_rows(leases, kerf.sim.clock.now())


def buckets_in(ranges: str) -> set[int]:
    """`00-02,05` → {0, 1, 2, 5}."""
    found: set[int] = set()
    for run in ranges.split(","):
        first, _, last = run.partition("-")
        found.update(range(int(first), int(last or first) + 1))
    return found


async def test_status_shards_follows_replicas_joining_and_leaving(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, webhook=False) as kerf:
        options = replace(FAST, shards=BUCKETS)
        await kerf.start_reconciler(options, identity=A)
        second = await kerf.start_reconciler(options, identity=B)

        async def shared() -> list[list[str]] | None:
            rows = await table(kerf)
            split = [row[:3] for row in rows] == [
                ["reconciler", A, str(BUCKETS // 2)],
                ["reconciler", B, str(BUCKETS // 2)],
            ]
            return rows if split else None

        rows = await wait_for(kerf, shared, "two replicas holding half the buckets each")
        mine, theirs = buckets_in(rows[0][3]), buckets_in(rows[1][3])
        assert not mine & theirs and mine | theirs == set(range(BUCKETS))
        assert all(row[4].endswith("s ago") for row in rows), rows

        await second.shutdown()

        async def alone() -> list[list[str]] | None:
            rows = await table(kerf)
            return rows if [row[:4] for row in rows] == [["reconciler", A, "8", "00-07"]] else None

        await wait_for(kerf, alone, "the remaining replica holding every bucket")
