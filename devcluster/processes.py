"""The control-plane binaries: where they are, free ports, starting and stopping them."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
KUBELET = "kubelet"
TOOLS_ENV = "KERF_CLUSTER_TOOLS"
IMAGES_ENV = "KERF_NODE_IMAGES"
#: How long a component gets to exit after SIGTERM before it is killed.
STOP_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1


class ComponentError(Exception):
    """A component failed to start or stopped on its own; the message names it (and
    `log_tail` says why)."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


class MissingBinary(Exception):
    """A control-plane binary is not where devcluster looks for it."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.path = path


def tools_dir() -> Path:
    """`$KERF_CLUSTER_TOOLS`, else `<repo root>/.tools/bin`."""
    override = os.environ.get(TOOLS_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1] / ".tools" / "bin"


def images_dir() -> Path:
    """`$KERF_NODE_IMAGES`, else `<repo root>/.tools/images` (`make node-images`)."""
    override = os.environ.get(IMAGES_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1] / ".tools" / "images"


#: the tarballs a real node imports at start (devcluster/images.py builds them); the kerf
#: image (300 MB) is imported by whoever runs kerf's pods on the node, not by every start
NODE_TARBALLS = ("pause.tar", "kerf-load.tar")


def find_images(names: Iterable[str] = NODE_TARBALLS, directory: Path | None = None) -> list[Path]:
    """The tarballs of these names that are built; MissingBinary names the pause image's
    when it is absent (no pod can start without it)."""
    directory = directory or images_dir()
    found = sorted(p for p in (directory / n for n in names) if p.is_file())
    if not any(p.name.startswith("pause") for p in found):
        raise MissingBinary(directory / "pause.tar")
    return found


def find_binaries(directory: Path, *, with_kubelet: bool = False) -> dict[str, Path]:
    """Every control-plane binary in `directory` (and the kubelet, when asked);
    MissingBinary names the first absent."""
    found = {}
    for name in (*BINARIES, KUBELET) if with_kubelet else BINARIES:
        path = directory / name
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise MissingBinary(path)
        found[name] = path
    return found


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick; a race with other programs is
    possible but the start then fails loudly, naming the component)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    # If devcluster itself is killed (SIGKILL, a crash), the kernel ends the components
    # too instead of leaving them holding ports.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Component:
    """One running control-plane process and its log file."""

    name: str
    log: Path
    process: asyncio.subprocess.Process
    _stopped: bool = field(default=False, repr=False)

    @property
    def running(self) -> bool:
        """Whether the process has not exited."""
        return self.process.returncode is None

    def log_tail(self, lines: int = 20) -> str:
        """The last `lines` lines of the component's log."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    async def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM, then SIGKILL once `grace_s` has passed."""
        if self._stopped:
            return
        self._stopped = True
        if self.running:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), grace_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                await self.process.wait()


async def start(name: str, argv: Sequence[str | Path], log: Path) -> Component:
    """Start one component with its output (both streams) appended to `log`."""
    with log.open("ab") as out:
        process = await asyncio.create_subprocess_exec(
            *[str(a) for a in argv],
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            # Its own session: a terminal's Ctrl-C reaches devcluster only, which then
            # stops the components in order (scheduler and controller manager first).
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    return Component(name, log, process)
