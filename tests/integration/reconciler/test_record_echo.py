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
    cooldown: one status write recorded the step (`lastApplied`) and the cooldown."""
    async with running_kerf(tmp_path) as kerf:
        replica = await start_stepped_decrease(kerf)
        await wait_for(kerf, lambda: status_with_reason(kerf, "Cooldown"), "the cooldown")
        await wait_for(kerf, idle(replica), "the reconciler to settle")
        yield kerf, replica


def _cooldowns(replica: Any) -> int:
    return _decided(replica).get(("blocked", "Cooldown"), 0)


def _status_writes(replica: Any) -> int:
    return sum(
        int(sample.value)
        for metric in replica.service.metrics.api_calls.collect()
        for sample in metric.samples
        if sample.name.endswith("_total")
        and sample.labels["resource"] == "rightsizingrecommendations/status"
    )


def _unchanged(replica: Any) -> int:
    return int(replica.service.metrics.unchanged_passes._value.get())


async def test_the_echo_of_a_write_that_changed_what_decisions_read_is_decided_again(
    tmp_path: Path,
) -> None:
    async with _cooling_down(tmp_path) as (kerf, replica):
        # The pass that wrote the status decided each pod as the status would read
        # (the cooldown from the step it recorded); its echo changed `lastApplied`, so
        # it was decided again, found the same and wrote nothing.
        async def echo_decided() -> bool:
            return _cooldowns(replica) == 4

        # Under load the queue can be idle before the echo's watch event arrives.
        await wait_for(kerf, echo_decided, "the pass over the echo of the status write")
        await wait_for(kerf, idle(replica), "the reconciler to settle")
        assert _status_writes(replica) == 1


async def test_a_status_another_writer_changes_is_written_back(tmp_path: Path) -> None:
    async with _cooling_down(tmp_path) as (kerf, replica):

        async def echo_decided() -> bool:
            return _cooldowns(replica) == 4

        await wait_for(kerf, echo_decided, "the echo decided")
        written = await status_of(kerf)
        unchanged = _unchanged(replica)
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

        # The echo of that status-only write finds nothing the decisions read changed.
        async def echo_quiet() -> bool:
            return _unchanged(replica) > unchanged

        await wait_for(kerf, echo_quiet, "the echo's quiet pass")
        await wait_for(kerf, idle(replica), "the reconciler to settle")
        assert await status_of(kerf) == written
        assert _cooldowns(replica) == 6  # each pod once more
