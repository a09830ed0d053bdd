"""What a real node changes on this machine, and putting it back.

A kubelet and containerd leave traces outside their data directory: mounts (pod volumes,
sandbox network namespaces and shm), the CNI bridge and its veths, iptables chains the
kubelet keeps (`KUBE-FIREWALL`, `KUBE-KUBELET-CANARY`), sysctls it sets (`vm.overcommit_memory`,
`kernel.panic`, ...) or the bridge plugin sets (`net.ipv4.ip_forward`), the `kubepods` cgroups,
and container processes that outlive both (a shim re-parents them). `HostState` is a snapshot of
those taken before the node starts; `restore` stops whatever the node left running and undoes
the difference. A record of the snapshot sits in `RECORDS` while the node runs, so that a
devcluster killed with SIGKILL is cleaned up by the next one that starts (`sweep`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

logger = logging.getLogger("devcluster.host")

#: Where a running real node keeps its record (one JSON file per devcluster process).
RECORDS = Path("/run/kerf-devcluster")
#: The sysctls a kubelet or the CNI bridge plugin may set.
SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.forwarding",
    "net.ipv6.conf.all.forwarding",
)
#: Top-level cgroups the kubelet creates under every v1 hierarchy (cgroupfs driver).
CGROUPS = ("kubepods",)
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Directories outside the data directory that containerd 1.6 and the kubelet create
#: whatever they are told: the shims' sockets (/run/containerd/s), the kubelet's log links,
#: and the defaults of settings devcluster moves (kept here in case one is not moved).
PATHS = (
    "/run/containerd",
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/kubelet",
    "/var/lib/containerd",
    "/var/lib/cni",
    "/run/netns",
)
IPTABLES = ("iptables", "ip6tables")
_MNT_DETACH = 2
_KILL_BOUND_S = 20.0


@dataclass
class HostState:
    """The parts of the machine a node may change, as found before it started."""

    sysctls: dict[str, str] = field(default_factory=dict)
    #: tool -> table -> the table's chains and rules, `iptables-save` lines
    iptables: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    #: hierarchy -> the names in CGROUPS that existed there already
    cgroups: dict[str, list[str]] = field(default_factory=dict)
    #: the PATHS that existed already
    paths: list[str] = field(default_factory=list)

    @classmethod
    def read(cls) -> HostState:
        """The machine as it is now."""
        return cls(
            sysctls={name: value for name in SYSCTLS if (value := read_sysctl(name)) is not None},
            iptables={tool: iptables_tables(tool) for tool in IPTABLES if shutil.which(tool)},
            links=links(),
            mounts=mount_points(),
            cgroups={
                str(h): [n for n in CGROUPS if (h / n).is_dir()] for h in cgroup_hierarchies()
            },
            paths=[p for p in PATHS if os.path.lexists(p)],
        )

    def differences(self, now: HostState) -> list[str]:
        """What `now` has that this snapshot had not (or has other values for), one line
        each; empty when the machine is as it was."""
        lines = [
            f"sysctl {k}: {v!r} -> {now.sysctls.get(k)!r}"
            for k, v in self.sysctls.items()
            if now.sysctls.get(k) != v
        ]
        for tool, tables in now.iptables.items():
            for table, rules in tables.items():
                before = set(self.iptables.get(tool, {}).get(table, []))
                lines += [f"{tool} -t {table}: {r}" for r in rules if r not in before]
        lines += [f"link {name}" for name in now.links if name not in self.links]
        lines += [f"mount {m}" for m in now.mounts if m not in self.mounts]
        for hierarchy, names in now.cgroups.items():
            lines += [
                f"cgroup {hierarchy}/{n}" for n in names if n not in self.cgroups.get(hierarchy, [])
            ]
        lines += [f"path {p}" for p in now.paths if p not in self.paths]
        return lines


@dataclass
class Record:
    """What the cleanup of one node needs: the snapshot, and what is the node's own."""

    owner: int
    #: the owner's start time (clock ticks after boot): tells it from a later process
    #: that got its PID
    owner_started: int
    #: the node's own directory: its processes name it, its mounts are under it
    data_dir: str
    #: the whole cluster's directory, removed when a sweep cleans up after a killed owner
    cluster_dir: str
    bridge: str
    before: HostState

    def write(self) -> Path:
        RECORDS.mkdir(mode=0o700, exist_ok=True)
        path = RECORDS / f"{self.owner}.json"
        path.write_text(json.dumps(asdict(self)))
        return path

    @classmethod
    def load(cls, path: Path) -> Record:
        raw = json.loads(path.read_text())
        return cls(
            owner=raw["owner"],
            owner_started=raw["owner_started"],
            data_dir=raw["data_dir"],
            cluster_dir=raw["cluster_dir"],
            bridge=raw["bridge"],
            before=HostState(**raw["before"]),
        )


def read_sysctl(name: str) -> str | None:
    try:
        return (Path("/proc/sys") / name.replace(".", "/")).read_text().strip()
    except OSError:
        return None


def write_sysctl(name: str, value: str) -> None:
    with contextlib.suppress(OSError):
        (Path("/proc/sys") / name.replace(".", "/")).write_text(value + "\n")


def iptables_tables(tool: str) -> dict[str, list[str]]:
    """Each table's chain declarations (`:NAME`) and rules (`-A ...`), counters left out."""
    try:
        text = subprocess.run(
            [f"{tool}-save"], capture_output=True, text=True, check=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    tables: dict[str, list[str]] = {}
    table: list[str] = []
    for line in text.splitlines():
        if line.startswith("*"):
            table = tables.setdefault(line[1:], [])
        elif line.startswith(":"):
            table.append(line.split()[0])
        elif line.startswith("-A "):
            table.append(line)
    return tables


def links() -> list[str]:
    return sorted(os.listdir("/sys/class/net"))


def mount_points() -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        points.append(line.split()[4].encode().decode("unicode_escape"))
    return points


def cgroup_hierarchies() -> list[Path]:
    """Every cgroup v1 hierarchy (the kubelet makes `kubepods` in named ones too)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ")
        if len(fields) != 2 or not fields[1].startswith("cgroup "):
            continue
        point = Path(line.split()[4])
        if point.parent == CGROUP_ROOT:
            found.append(point)
    return sorted(set(found))


def processes_naming(*paths: str) -> list[int]:
    """Processes whose command line names one of `paths`: containerd, the kubelet, the
    shims (which name containerd's socket)."""
    found = []
    marks = [p.encode() for p in paths]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes()
            if any(mark in cmdline for mark in marks):
                found.append(int(entry.name))
    return found


def cgroup_processes(names: Iterable[str]) -> list[int]:
    """Every process in the node's cgroups (its containers), in any hierarchy."""
    found: set[int] = set()
    for hierarchy in cgroup_hierarchies():
        for name in names:
            for tasks in _walk(hierarchy / name, "cgroup.procs"):
                with contextlib.suppress(OSError, ValueError):
                    found.update(int(p) for p in tasks.read_text().split())
    return sorted(found)


def _walk(top: Path, filename: str) -> Iterator[Path]:
    if not top.is_dir():
        return
    for directory, _, files in os.walk(top):
        if filename in files:
            yield Path(directory) / filename


def kill_all(
    pids_of: Iterable[Callable[[], list[int]]], bound_s: float = _KILL_BOUND_S
) -> list[int]:
    """SIGKILL what the finders find until they find nothing; the PIDs left at the bound."""
    deadline = time.monotonic() + bound_s
    while True:
        pids = sorted({pid for finder in pids_of for pid in finder()})
        if not pids or time.monotonic() > deadline:
            return pids
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def unmount_under(directory: str) -> list[str]:
    """Detach every mount at or below `directory`, deepest first; those that stay."""
    libc = ctypes.CDLL(None, use_errno=True)
    prefix = directory.rstrip("/") + "/"
    for point in sorted((p for p in mount_points() if p.startswith(prefix)), key=len, reverse=True):
        libc.umount2(point.encode(), _MNT_DETACH)
    return [p for p in mount_points() if p.startswith(prefix)]


def restore(record: Record) -> tuple[list[str], list[str]]:
    """Stop what the node left, and put the machine back as `record.before` found it.
    Returns what failed (a process that would not die, a mount that stayed), and what still
    differs from the snapshot (which may be another program's doing), one line each."""
    before = record.before
    names = [n for n in CGROUPS if all(n not in v for v in before.cgroups.values())]
    left = kill_all(
        [
            lambda: processes_naming(record.data_dir),
            lambda: cgroup_processes(names),
        ]
    )
    problems = [f"process {pid} would not die" for pid in left]
    still = unmount_under(record.data_dir)
    problems += [f"mount {p} stayed" for p in still]
    if record.bridge in links() and record.bridge not in before.links:
        subprocess.run(["ip", "link", "delete", record.bridge], capture_output=True, check=False)
    for tool, tables in HostState.read().iptables.items():
        _restore_iptables(tool, before.iptables.get(tool, {}), tables)
    for name, value in before.sysctls.items():
        if read_sysctl(name) != value:
            write_sysctl(name, value)
    for hierarchy in cgroup_hierarchies():
        for name in names:
            _remove_cgroup(hierarchy / name)
    _remove_log_links(record.data_dir)
    for path in PATHS:
        if path not in before.paths and not unmount_under(path):
            shutil.rmtree(path, ignore_errors=True)
    if not still:
        shutil.rmtree(record.data_dir, ignore_errors=True)
    return problems, before.differences(HostState.read())


def _restore_iptables(tool: str, before: dict[str, list[str]], now: dict[str, list[str]]) -> None:
    for table, lines in now.items():
        kept = set(before.get(table, []))
        for line in lines:
            if line.startswith("-A ") and line not in kept:
                args = line.split()
                args[0] = "-D"
                subprocess.run([tool, "-w", "-t", table, *args], capture_output=True, check=False)
        for line in lines:
            if line.startswith(":") and line not in kept:
                chain = line[1:]
                subprocess.run([tool, "-w", "-t", table, "-F", chain], capture_output=True)
                subprocess.run([tool, "-w", "-t", table, "-X", chain], capture_output=True)


def _remove_cgroup(top: Path) -> None:
    """rmdir a cgroup tree, leaves first (a v1 cgroup goes only once it is empty)."""
    if not top.is_dir():
        return
    for directory, _, _ in sorted(os.walk(top), key=lambda w: len(w[0]), reverse=True):
        with contextlib.suppress(OSError):
            os.rmdir(directory)


def _remove_log_links(data_dir: str) -> None:
    """The kubelet links every container's log into /var/log/containers, whatever its
    pod-logs directory: remove the links into this node's."""
    links_dir = Path("/var/log/containers")
    if not links_dir.is_dir():
        return
    for link in links_dir.iterdir():
        with contextlib.suppress(OSError):
            if link.is_symlink() and os.readlink(link).startswith(data_dir):
                link.unlink()


def sweep() -> list[str]:
    """Clean up after every node whose devcluster died without doing it (SIGKILL); what
    failed, one line each (what merely differs from its snapshot is logged)."""
    problems: list[str] = []
    if not RECORDS.is_dir():
        return problems
    for path in sorted(RECORDS.glob("*.json")):
        try:
            record = Record.load(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"{path}: unreadable record ({exc}); removed")
            path.unlink(missing_ok=True)
            continue
        if start_time(record.owner) == record.owner_started:
            continue
        logger.warning("cleaning up after devcluster %d (it did not stop itself)", record.owner)
        failed, differing = restore(record)
        for line in differing:
            logger.warning("after devcluster %d: still differs: %s", record.owner, line)
        problems += failed
        if not failed:
            shutil.rmtree(record.cluster_dir, ignore_errors=True)
        path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        RECORDS.rmdir()
    return problems


def start_time(pid: int) -> int | None:
    """When process `pid` started, in clock ticks after boot; None when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])
