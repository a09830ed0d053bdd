"""What a status write invalidates: its echo is a quiet pass unless the write changed a
field the decisions read; a status another writer changes is written back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.cluster import GROUP, VERSION, custom
from tests.integration.reconciler.harness import (
    MERGE_PATCH,
    Kerf,
    RunningReconciler,
    idle,
    running_kerf,
    start_stepped_decrease,
    status_of,
    status_with_reason,
    wait_for,
)

TARGET = {"cpu": "250m", "memory": "256Mi"}


def _decided(replica: Any) -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = {}
    for metric in replica.service.metrics.decisions.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                key = (sample.labels["outcome"], sample.labels["reason"])
                found[key] = int(sample.value)
    return found


@asynccontextmanager
async def _cooling_down(tmp_path: Path) -> AsyncIterator[tuple[Kerf, RunningReconciler]]:
    """Both pods at the first step of a stepped decrease, the next one waiting out its
    cooldown: the status recording the step changed `lastApplied`, the one reporting the
    cooldown only the reason, a condition and the Event's dedup key."""
    async with running_kerf(tmp_path) as kerf:
        replica = await start_stepped_decrease(kerf)
        await wait_for(kerf, lambda: status_with_reason(kerf, "Cooldown"), "the cooldown")
        await wait_for(kerf, idle(replica), "the reconciler to settle")
        yield kerf, replica


async def test_the_echo_of_a_status_only_write_decides_nothing(tmp_path: Path) -> None:
    async with _cooling_down(tmp_path) as (kerf, replica):
        # The echo of the status recording the step was decided again: it is what
        # found the cooldown. The pass that found it decided each pod once; the echo of
        # its status write found nothing the decisions read changed.
        async def echo_passed() -> bool:
            return bool(replica.service.metrics.unchanged_passes._value.get())

        # Under load the queue can be idle before the echo's watch event arrives.
        await wait_for(kerf, echo_passed, "the pass over the echo of the status write")
        assert _decided(replica)[("blocked", "Cooldown")] == 2


async def test_a_status_another_writer_changes_is_written_back(tmp_path: Path) -> None:
    async with _cooling_down(tmp_path) as (kerf, replica):
        written = await status_of(kerf)
        # Nothing a decision reads: the plan stands, but the status is not the one the
        # last pass wrote, so the pass over it reports again.
        await custom(kerf.api).patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            "shop",
            "rightsizingrecommendations",
            "deployment-web",
            {"status": {"phase": "Failed", "reason": "EditedByHand"}},
            _content_type=MERGE_PATCH,
        )
        await wait_for(kerf, lambda: status_with_reason(kerf, "Cooldown"), "the status again")
        await wait_for(kerf, idle(replica), "the reconciler to settle")
        assert await status_of(kerf) == written
        assert _decided(replica)[("blocked", "Cooldown")] == 4  # each pod once more
