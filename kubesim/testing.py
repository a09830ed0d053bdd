"""Test helpers: start a simulator for the length of a test.

async with running_sim(tmp_path) as sim:
    async with sim.api_client() as api:
        ...
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from kubesim.clock import Clock
from kubesim.sim import Simulator


@contextlib.asynccontextmanager
async def running_sim(
    directory: str | Path | None = None,
    *,
    clock: Clock | None = None,
    seed: int = 0,
    history: int = 5000,
    auto_settle: bool = True,
    service_addresses: dict[tuple[str, str], str] | None = None,
    bookmark_interval: float = 60.0,
) -> AsyncIterator[Simulator]:
    """A started `Simulator` on 127.0.0.1 (free port), stopped on exit.

    With `directory`, a kubeconfig is written there (`sim.kubeconfig_path`).
    `service_addresses` maps webhook `clientConfig.service` (namespace, name) to "host:port".
    """
    sim = Simulator(
        clock=clock,
        seed=seed,
        history=history,
        auto_settle=auto_settle,
        bookmark_interval=bookmark_interval,
    )
    sim.service_addresses.update(service_addresses or {})
    await sim.start()
    try:
        if directory is not None:
            sim.write_kubeconfig(Path(directory) / "kubeconfig")
        yield sim
    finally:
        await sim.stop()
