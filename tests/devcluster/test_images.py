"""The node images (devcluster/images.py) and their programs (devcluster/nodeimages):
the Go unit tests, the docker-archive tarballs, kerf-load run on this host, and an import
into a private containerd."""

from __future__ import annotations

import ctypes
import hashlib
import io
import json
import os
import queue
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.images import (
    LOAD_IMAGE,
    MODULE,
    PAUSE_IMAGE,
    STAMP,
    build_all,
    build_binaries,
    find_go,
    host_arch,
    import_images,
    write_image,
)
from devcluster.processes import ComponentError
from tests.devcluster.conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
GO = find_go()
needs_go = pytest.mark.skipif(GO is None, reason="go is not installed (it builds the node images)")
CONTAINERD = Path("/usr/bin/containerd")
CTR = Path("/usr/bin/ctr")
MiB = 1 << 20
CGROUP_KEYS = {
    "cpu.cfs_quota_us",
    "cpu.cfs_period_us",
    "cpu.shares",
    "memory.limit_in_bytes",
    "memory.usage_in_bytes",
    "cpu.nr_throttled",
    "cpu.throttled_time",
}


@pytest.fixture(scope="module")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if GO is None:
        pytest.skip("go is not installed (it builds the node images)")
    return build_binaries(tmp_path_factory.mktemp("bin"))


@needs_go
def test_the_go_unit_tests_pass() -> None:
    assert GO is not None
    result = subprocess.run(
        [str(GO), "test", "-mod=readonly", "./..."],
        cwd=MODULE,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CGO_ENABLED": "0"},
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _read_archive(path: Path) -> tuple[list[tarfile.TarInfo], dict[str, bytes]]:
    with tarfile.open(path) as tar:
        members = tar.getmembers()
        data = {}
        for member in members:
            if member.isfile():
                extracted = tar.extractfile(member)
                assert extracted is not None
                data[member.name] = extracted.read()
    return members, data


def test_write_image_is_a_deterministic_docker_archive(tmp_path: Path) -> None:
    program = tmp_path / "prog"
    program.write_bytes(b"\x7fELF not really")
    other = tmp_path / "other"
    other.write_bytes(b"second file")
    files = {"/usr/local/bin/prog": program, "/other": other}
    write_image(tmp_path / "a.tar", "kerf.local/test:1", files, ["/usr/local/bin/prog", "run"])
    # Other mtimes and modes on the inputs, and the files given in another order.
    os.utime(program, (1, 1))
    program.chmod(0o600)
    write_image(
        tmp_path / "b.tar",
        "kerf.local/test:1",
        dict(reversed(files.items())),
        ["/usr/local/bin/prog", "run"],
    )
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    write_image(tmp_path / "c.tar", "kerf.local/test:1", files, ["/usr/local/bin/prog"])
    assert (tmp_path / "c.tar").read_bytes() != (tmp_path / "a.tar").read_bytes()

    members, data = _read_archive(tmp_path / "a.tar")
    names = [member.name for member in members]
    assert names == sorted(names)
    assert all(member.mtime == 0 for member in members)
    manifest = json.loads(data["manifest.json"])
    assert len(manifest) == 1
    (entry,) = manifest
    assert entry["RepoTags"] == ["kerf.local/test:1"]
    config_bytes = data[entry["Config"]]
    # The config's name is its digest; the layer's diff_id is the digest of its tar.
    assert entry["Config"] == hashlib.sha256(config_bytes).hexdigest() + ".json"
    (layer_name,) = entry["Layers"]
    layer = data[layer_name]
    layer_digest = hashlib.sha256(layer).hexdigest()
    assert layer_name == f"{layer_digest}/layer.tar"
    assert set(names) == {f"{layer_digest}", layer_name, entry["Config"], "manifest.json"}
    config = json.loads(config_bytes)
    assert config["architecture"] == host_arch() and config["os"] == "linux"
    assert config["config"]["Entrypoint"] == ["/usr/local/bin/prog", "run"]
    assert config["rootfs"] == {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]}

    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        entries = {m.name: m for m in tar.getmembers()}
        contents = {
            name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for name, m in entries.items()
            if m.isfile()
        }
    assert list(entries) == sorted(entries)
    dirs = {name: m.mode for name, m in entries.items() if m.isdir()}
    assert dirs == {
        "dev": 0o755,
        "etc": 0o755,
        "proc": 0o755,
        "sys": 0o755,
        "tmp": 0o1777,
        "usr": 0o755,
        "usr/local": 0o755,
        "usr/local/bin": 0o755,
    }
    assert contents == {"other": b"second file", "usr/local/bin/prog": b"\x7fELF not really"}
    assert {entries[name].mode for name in contents} == {0o755}
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in entries.values())


@needs_go
def test_build_all_builds_both_images_once(tmp_path: Path) -> None:
    out = tmp_path / "images"
    tarballs = build_all(out)
    assert set(tarballs) == {PAUSE_IMAGE, LOAD_IMAGE}
    first = {name: path.read_bytes() for name, path in tarballs.items()}
    mtimes = {name: path.stat().st_mtime_ns for name, path in tarballs.items()}
    # The stamp matches: nothing is rebuilt.
    assert build_all(out) == tarballs
    assert {name: path.stat().st_mtime_ns for name, path in tarballs.items()} == mtimes
    # A stale stamp: rebuilt, to the same bytes (the Go build is reproducible too).
    (out / STAMP).write_text("stale\n")
    build_all(out)
    assert {name: path.read_bytes() for name, path in tarballs.items()} == first
    assert (out / STAMP).read_text() != "stale\n"
    assert sorted(p.name for p in out.iterdir()) == sorted([STAMP, "kerf-load.tar", "pause.tar"])

    for name, tarball in tarballs.items():
        _, data = _read_archive(tarball)
        config = json.loads(data[json.loads(data["manifest.json"])[0]["Config"]])
        expected = ["/pause"] if name == PAUSE_IMAGE else ["/usr/local/bin/kerf-load"]
        assert config["config"]["Entrypoint"] == expected

    # The command, into a relative directory: built afresh, to the same bytes.
    result = subprocess.run(
        [sys.executable, "-m", "devcluster.images", "--out", "cli"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    lines = []
    for name, path in tarballs.items():
        built = Path("cli", path.name)
        assert (tmp_path / built).read_bytes() == first[name]
        lines.append(f"{name} {built} {len(first[name])} bytes")
    assert result.stdout.splitlines() == lines


class Load:
    """A kerf-load run on this host, its own spec and control files, its output lines."""

    def __init__(self, binary: Path, tmp: Path, *args: str) -> None:
        self.binary = binary
        self.spec = tmp / "spec"
        self.control = tmp / "control"
        self.process = subprocess.Popen(
            [str(binary), "run", "--spec", str(self.spec), "--control", str(self.control), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stdout: queue.Queue[str] = queue.Queue()
        self.stderr: queue.Queue[str] = queue.Queue()
        for stream, lines in (
            (self.process.stdout, self.stdout),
            (self.process.stderr, self.stderr),
        ):
            threading.Thread(target=self._pump, args=(stream, lines), daemon=True).start()

    @staticmethod
    def _pump(stream: io.TextIOWrapper, lines: queue.Queue[str]) -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))

    def line(self, lines: queue.Queue[str], timeout_s: float = 10.0) -> str:
        try:
            return lines.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"no line within {timeout_s} s") from None

    def set(self, *spec: str) -> None:
        subprocess.run(
            [str(self.binary), "set", "--control", str(self.control), *spec],
            check=True,
            timeout=10,
        )

    def rss(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        (line,) = [line for line in status.splitlines() if line.startswith("VmRSS:")]
        return int(line.split()[1]) * 1024

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(10)


@pytest.fixture
def load_binary(binaries: dict[str, Path]) -> Path:
    return binaries["kerf-load"]


def _write_atomically(path: Path, text: str, mtime: float) -> None:
    # As the kubelet projects a file: the reader sees the old content or the new, whole.
    aside = path.with_name(path.name + ".new")
    aside.write_text(text)
    os.utime(aside, (mtime, mtime))
    os.replace(aside, path)


def test_kerf_load_holds_memory_burns_cpu_and_is_told_again(
    load_binary: Path, tmp_path: Path
) -> None:
    load = Load(load_binary, tmp_path, "--cpu", "200m", "--memory", "64Mi")
    try:
        assert load.line(load.stdout) == "kerf-load: cpu=200m memory=64Mi"
        wait_for(lambda: load.rss() >= 64 * MiB, "64 MiB resident", 10)
        assert load.rss() < 64 * MiB + 32 * MiB

        # About 200m: 0.3 s of CPU takes it some 1.5 s (at least 0.05 cores: the bound).
        start_cpu, start = load.cpu_s(), time.monotonic()
        wait_for(lambda: load.cpu_s() - start_cpu >= 0.3, "0.3 s of CPU used", 6)
        cores = (load.cpu_s() - start_cpu) / (time.monotonic() - start)
        assert cores < 0.6, f"{cores:.2f} cores used for 200m"

        load.set("cpu=100m", "memory=128Mi")
        assert load.line(load.stdout) == "kerf-load: cpu=100m memory=128Mi"
        wait_for(lambda: load.rss() >= 128 * MiB, "128 MiB resident", 10)

        # Shrinking gives the memory back to the OS.
        load.set("memory=16Mi")
        assert load.line(load.stdout) == "kerf-load: cpu=100m memory=16Mi"
        wait_for(lambda: load.rss() < 16 * MiB + 32 * MiB, "the memory given back", 10)
        assert load.stderr.empty()
    finally:
        code = load.stop()
    assert code == 0


def test_kerf_load_keeps_its_amounts_on_a_bad_spec(load_binary: Path, tmp_path: Path) -> None:
    load = Load(load_binary, tmp_path, "--cpu", "50m", "--memory", "8Mi")
    try:
        assert load.line(load.stdout) == "kerf-load: cpu=50m memory=8Mi"
        now = time.time()
        _write_atomically(load.control, "cpu=lots memory=1Gi\n", now)
        assert load.line(load.stderr) == (
            f'kerf-load: {load.control}: "lots" is not a quantity; keeping cpu=50m memory=8Mi'
        )
        # One line, not one per poll (every 0.5 s): none in the next three polls.
        with pytest.raises(queue.Empty):
            load.stderr.get(timeout=1.6)
        assert load.process.poll() is None and load.stdout.empty()

        # The spec file (the annotation's) newer than the control file: it wins.
        _write_atomically(load.spec, "cpu=100m memory=16Mi", now + 1)
        assert load.line(load.stdout) == "kerf-load: cpu=100m memory=16Mi"
        wait_for(lambda: load.rss() >= 16 * MiB, "16 MiB resident", 10)
    finally:
        code = load.stop()
    assert code == 0


def test_kerf_load_cgroup_cat_and_usage(load_binary: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [str(load_binary), "cgroup"], capture_output=True, text=True, timeout=10, check=True
    )
    values = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert values and set(values) <= CGROUP_KEYS, result.stdout
    assert all(value.lstrip("-").isdigit() for value in values.values()), result.stdout
    if Path("/sys/fs/cgroup/memory/memory.usage_in_bytes").exists():  # cgroup v1, as here
        assert int(values["memory.usage_in_bytes"]) > 0
        assert int(values["cpu.cfs_period_us"]) > 0

    (tmp_path / "f").write_text("a\nb\n")
    result = subprocess.run(
        [str(load_binary), "cat", str(tmp_path / "f")], capture_output=True, text=True, timeout=10
    )
    assert (result.returncode, result.stdout) == (0, "a\nb\n")
    result = subprocess.run(
        [str(load_binary), "cat", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1

    result = subprocess.run(
        [str(load_binary), "set", "--control", str(tmp_path / "c"), "cpu=1", "memory=3m"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert result.returncode == 2
    assert result.stderr == 'kerf-load: set: "3m" is in millibytes; did you mean 3Mi?\n'
    assert not (tmp_path / "c").exists()


def test_pause_reaps_its_children_and_exits_0_on_sigterm(binaries: dict[str, Path]) -> None:
    # The shell's background child becomes pause's when the shell execs it, as an orphan
    # becomes the child of a sandbox's PID 1.
    pause = subprocess.Popen(
        ["/bin/sh", "-c", f"sleep 0.2 & echo $!; exec {binaries['pause']}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert pause.stdout is not None
        child = Path(f"/proc/{int(pause.stdout.readline())}")
        # Unreaped, it would stay in /proc as a zombie.
        wait_for(lambda: not child.exists(), "the exited child reaped", 10)
        assert pause.poll() is None
    finally:
        pause.send_signal(signal.SIGTERM)
        code = pause.wait(10)
    assert code == 0


def _mounts_under(path: Path) -> list[str]:
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == str(path) or p.startswith(f"{path}/")]


@pytest.fixture
def containerd(tmp_path: Path) -> Iterator[Path]:
    """A private containerd (root, state, sockets, opt under tmp_path); its socket."""
    if os.geteuid() != 0:
        pytest.skip("not root: containerd needs root")
    if not (CONTAINERD.exists() and CTR.exists()):
        pytest.skip(f"{CONTAINERD} or {CTR} is missing (Debian's containerd package)")
    socket = tmp_path / "c.sock"
    config = tmp_path / "config.toml"
    config.write_text(
        f"""version = 2
root = "{tmp_path}/root"
state = "{tmp_path}/state"
# Snapshotters that cannot work here, kept from probing.
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{tmp_path}/c.ttrpc.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "{tmp_path}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "{PAUSE_IMAGE}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{tmp_path}/cni/bin"
    conf_dir = "{tmp_path}/cni/conf"
"""
    )
    log = tmp_path / "containerd.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(CONTAINERD), "--config", str(config)], stdout=out, stderr=subprocess.STDOUT
        )
    try:

        def answers() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"containerd exited ({process.returncode}): {log.read_text()}")
            version = [str(CTR), "--address", str(socket), "version"]
            return subprocess.run(version, capture_output=True, timeout=10).returncode == 0

        wait_for(answers, "containerd's socket", 20)
        yield socket
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        left = _mounts_under(tmp_path)
        libc = ctypes.CDLL(None, use_errno=True)
        for point in reversed(left):
            libc.umount2(point.encode(), 2)  # MNT_DETACH: tmp_path can then be removed
    assert process.returncode == 0, log.read_text()
    assert left == [], f"left mounted: {left}"


@needs_go
def test_the_images_import_into_containerd_for_cri(containerd: Path, tmp_path: Path) -> None:
    tarballs = build_all(tmp_path / "images")
    started = time.monotonic()
    import_images(CTR, containerd, tarballs.values())
    imported_s = time.monotonic() - started

    def ctr(*args: str) -> str:
        command = [str(CTR), "--address", str(containerd), "--namespace", "k8s.io", *args]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout

    assert {PAUSE_IMAGE, LOAD_IMAGE} <= set(ctr("images", "ls", "-q").split())
    # Unpacked into the CRI plugin's snapshotter: a committed snapshot per layer (for one
    # layer, its key is the layer's diff_id).
    snapshots = ctr("snapshots", "--snapshotter", "overlayfs", "ls")
    for tarball in tarballs.values():
        _, data = _read_archive(tarball)
        config = json.loads(data[json.loads(data["manifest.json"])[0]["Config"]])
        (diff_id,) = config["rootfs"]["diff_ids"]
        assert diff_id in snapshots, snapshots
    # The CRI plugin saw them (its image store follows containerd's events).
    log = (tmp_path / "containerd.log").read_text()
    for name in (PAUSE_IMAGE, LOAD_IMAGE):
        assert any("ImageCreate event" in line and name in line for line in log.splitlines())
    assert imported_s < 20

    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"not a tarball")
    with pytest.raises(ComponentError) as error:
        import_images(CTR, containerd, [bad])
    message = str(error.value)
    assert message.startswith(f"ctr images import {bad} failed (exit 1): ") and "\n" not in message
    assert error.value.log_tail


def test_no_go_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("devcluster.images.find_go", lambda: None)
    with pytest.raises(ComponentError, match="go is not installed"):
        build_binaries(tmp_path)
