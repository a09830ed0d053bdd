"""`kerf reconciler` as a service against an API server that is down, then comes back:
it keeps retrying and says the outage once when it starts, then at most once a minute
(with a count of failed attempts), then once when the server answers again; never once
per resource; and it is not ready meanwhile (issue 36, part 1).

The reconciler runs in-process as `kerf reconciler` runs it (`serve_cluster`), with the
one change that its Reachability reads a clock the test moves, so "a minute" passes
without waiting for one."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import reconciler.main
from app.kube.informer import api_client_from_config
from app.kube.reachability import Reachability, attach, server_of
from kubesim.testing import running_sim
from reconciler.main import Options, serve_cluster
from tests.cluster import eventually, install_crds

API_LOGGER = "kerf.api"


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Records(logging.Handler):
    """Every record of kerf's loggers (whatever their configuration in this process)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def said(self, logger: str = API_LOGGER) -> list[str]:
        return [
            r.getMessage() for r in self.records if r.name == logger and r.levelno >= logging.INFO
        ]

    def warnings(self) -> list[str]:
        return [f"{r.name}: {r.getMessage()}" for r in self.records if r.levelno >= logging.WARNING]


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    kerf = logging.getLogger("kerf")
    saved = kerf.level
    kerf.addHandler(handler)
    kerf.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        kerf.removeHandler(handler)
        kerf.setLevel(saved)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_an_outage_is_said_once_a_minute_and_its_end_once(
    tmp_path: Path, records: Records, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    trackers: list[Reachability] = []

    async def client_on_the_test_clock(kubeconfig: Any) -> Any:
        api_client = await api_client_from_config(kubeconfig)
        trackers.append(attach(api_client, Reachability(server_of(api_client), monotonic=clock)))
        return api_client

    monkeypatch.setattr(reconciler.main, "api_client_from_config", client_on_the_test_clock)
    monkeypatch.setenv("POD_NAMESPACE", "kerf-system")
    monkeypatch.setenv("POD_NAME", "outage-test")
    metrics_port = free_port()
    readyz = f"http://127.0.0.1:{metrics_port}/readyz"
    async with running_sim(tmp_path) as sim, httpx.AsyncClient() as http:
        # The cluster, with kerf's CRDs; then its API server stops answering on its port.
        async with sim.api_client() as api:
            await install_crds(api)
        await sim.add_namespace("kerf-system")
        port = int(sim.url.rsplit(":", 1)[1])
        await sim.stop()
        held = hold_port(port)

        stop = asyncio.Event()
        # One leader: its informers start at once (sharded, they wait for the first
        # claims, and the outage would be told by the shard set's list alone).
        options = Options(
            kubeconfig=sim.kubeconfig_path,
            metrics_host="127.0.0.1",
            metrics_port=metrics_port,
            shards=1,
        )
        service = asyncio.create_task(serve_cluster(options, stop))
        try:
            # Every informer and the leader election fail, again and again.
            await eventually(
                lambda: trackers and trackers[0].failed_attempts >= 100,
                "a hundred failed attempts",
            )
            said = records.said()
            assert len(said) == 1, said
            assert said[0].startswith(f"the API server http://127.0.0.1:{port} is unavailable: ")
            answer = await http.get(readyz)
            assert answer.status_code == 503, answer.text

            # A minute later (on the test's clock), the next failure says it again, with a count.
            clock.now += 60
            await eventually(lambda: len(records.said()) >= 2, "the outage said again")
            still = records.said()[1]
            assert "still unavailable after 1m0s (" in still and "failed attempts)" in still

            # The server comes back: one line, and the view syncs.
            held.close()
            await sim.start(port=port)
            await eventually(lambda: len(records.said()) >= 3, "the end of the outage")
            back = records.said()[2]
            assert back.startswith(f"the API server http://127.0.0.1:{port} answers again")
            assert trackers[0].reachable

            await readiness(http, readyz, 200)

            # Synced and ready, the server goes away again: not ready while it is away.
            await sim.stop()
            held = hold_port(port)
            await eventually(lambda: not trackers[0].reachable, "the second outage")
            answer = await http.get(readyz)
            assert (answer.status_code, answer.text) == (503, "API server unreachable")
            held.close()
            await sim.start(port=port)
            await readiness(http, readyz, 200)
        finally:
            held.close()
            stop.set()
            assert await asyncio.wait_for(service, 60) == 0
    said = records.said()
    assert len(said) == 5, said
    assert "is unavailable" in said[3] and "answers again" in said[4], said
    # Not one line per resource, nor per leader-election retry.
    assert not [w for w in records.warnings() if "list/watch failed" in w or "leader election" in w]


def hold_port(port: int) -> socket.socket:
    """The stopped API server's port, bound and not listening until closed: connections
    to it are refused, and no server a test beside this one starts (on a port the kernel
    picks as free) takes it over and answers the reconciler."""
    sock = socket.socket()
    # The stopped server's closed connections wait out TIME_WAIT on this port.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


async def readiness(http: httpx.AsyncClient, url: str, status: int) -> None:
    """Wait (bounded) until `url` answers `status`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 120
    while (await http.get(url)).status_code != status:
        assert loop.time() < deadline, f"{url} never answered {status}"
        await asyncio.sleep(0.05)
