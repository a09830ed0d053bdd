"""kerf's services as the soak runs them: local processes, each with its own log and
kubeconfig, that the chaos kills (SIGKILL), stops (SIGSTOP) and restarts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import ssl
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

#: how long a graceful stop (SIGTERM) may take before SIGKILL (a bound, not an expectation)
STOP_TIMEOUT_S = 30.0


@dataclass
class KerfProcess:
    """One kerf service: how to start it, the running process, its log."""

    name: str
    argv: list[str]
    env: dict[str, str]
    workdir: Path
    port: int
    tls: ssl.SSLContext | None = None
    process: asyncio.subprocess.Process | None = None
    paused: bool = False
    starts: int = 0
    logs: list[Path] = field(default_factory=list)

    async def start(self) -> None:
        """Start (or restart) the process; each run logs to its own file."""
        self.starts += 1
        log = self.workdir / f"{self.name}.{self.starts}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                env=self.env,
                cwd=self.workdir,
                start_new_session=True,
            )
        self.paused = False

    @property
    def running(self) -> bool:
        """Started and not exited."""
        return self.process is not None and self.process.returncode is None

    def _signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    async def kill(self) -> None:
        """SIGKILL, as a crashed or OOM-killed pod; returns once it has exited."""
        self._signal(signal.SIGKILL)
        if self.process is not None:
            await self.process.wait()
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: the process keeps its connections and state but runs nothing."""
        self._signal(signal.SIGSTOP)
        self.paused = self.running

    def resume(self) -> None:
        """SIGCONT after `pause`."""
        self._signal(signal.SIGCONT)
        self.paused = False

    async def stop(self) -> None:
        """A graceful stop (SIGCONT, SIGTERM), SIGKILL past a bound."""
        if not self.running:
            return
        assert self.process is not None
        self.resume()
        self._signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            await self.kill()

    def log_text(self) -> str:
        """Everything every run of it has logged."""
        return "".join(p.read_text(errors="replace") for p in self.logs if p.exists())

    def url(self, path: str) -> str:
        """Its health and metrics endpoint `path`."""
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    async def fetch(self, session: aiohttp.ClientSession, path: str) -> str | None:
        """GET `path` from it: the body, or None when it does not answer 200."""
        if not self.running or self.paused:
            return None
        try:
            async with session.get(
                self.url(path), ssl=self.tls or False, timeout=aiohttp.ClientTimeout(total=5)
            ) as answer:
                return await answer.text() if answer.status == 200 else None
        except (aiohttp.ClientError, TimeoutError):
            return None

    async def ready(self, session: aiohttp.ClientSession) -> bool:
        """/readyz answers 200."""
        return await self.fetch(session, "/readyz") is not None

    async def is_leader(self, session: aiohttp.ClientSession) -> bool | None:
        """What its `kerf_reconciler_leader` gauge says (None when it does not answer)."""
        value = await self.gauge(session, "kerf_reconciler_leader")
        return None if value is None else value == 1.0

    async def gauge(self, session: aiohttp.ClientSession, name: str) -> float | None:
        """The sum of a metric's samples, 0 without any (None when it does not answer)."""
        text = await self.fetch(session, "/metrics")
        if text is None:
            return None
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith((name + " ", name + "{"))
        )
