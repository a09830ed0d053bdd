"""The two clusters kerf runs on locally, started the same way and answering the same
kubectl:

- `kubesim`: the project's API simulator (`python -m kubesim --real-clock`), its own
  process, on the wall clock like a real cluster; it accepts any bearer token and enforces
  no RBAC.
- `real`: kube-apiserver, etcd, kube-controller-manager and kube-scheduler 1.35
  (`python -m devcluster`; `make cluster-tools` builds them); it issues ServiceAccount
  tokens and enforces kerf's RBAC. Its node is played by the node agent
  (`kubelet="agent"`), or is a real kubelet and containerd on this machine
  (`kubelet="real"`, where `real_node_missing()` says one can run).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from devcluster import realnode
from devcluster.host import RECORDS
from devcluster.kerfimage import docker_reference
from devcluster.processes import MissingBinary, find_binaries, find_images
from harness.errors import HarnessError

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("kubesim", "real")
#: how long a backend may take to start (a bound, not an expectation)
START_TIMEOUT_S = 300.0
#: how long a backend may take to stop after SIGTERM before it is killed
STOP_TIMEOUT_S = 60.0


class BackendFailed(HarnessError):
    """The backend did not start; the message ends with the last lines it printed."""


def tools_dir() -> Path:
    """Where the control-plane binaries are (`make cluster-tools` puts them there)."""
    return Path(os.environ.get("KERF_CLUSTER_TOOLS") or ROOT / ".tools" / "bin")


def real_available() -> bool:
    """The control-plane binaries are built."""
    names = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd")
    return all((tools_dir() / name).exists() for name in names)


def real_node_missing() -> str:
    """Why `python -m devcluster --kubelet real` cannot run here ('' when it can): root,
    containerd, runc and the CNI plugins (`make node-tools`), the kubelet (`make
    cluster-tools`) and the node images (`make node-images`)."""
    why = realnode.tools_missing()
    if why:
        return why
    try:
        find_binaries(tools_dir(), with_kubelet=True)
        find_images()
    except MissingBinary as exc:
        return f"{exc.path} is missing (make cluster-tools node-images)"
    return ""


@dataclass
class Backend:
    """A running cluster: its kind, kubeconfig, and the process that serves it."""

    kind: str
    kubeconfig: Path
    process: subprocess.Popen[str]
    log: list[str]
    #: the API server's audit log of every write (JSON lines of audit.k8s.io/v1 Events)
    audit_log: Path
    #: who runs the pods: "kubesim" (its own kubelet), "agent" (the node agent) or "real"
    #: (a real kubelet and containerd: containers, cgroups, OOM kills and cAdvisor are real)
    kubelet: str = "agent"

    @property
    def real(self) -> bool:
        return self.kind == "real"

    @property
    def real_kubelet(self) -> bool:
        """Pods run for real: images must exist on the node (kerf-load), and the fault
        annotations of kubesim/fault_annotations.py do nothing."""
        return self.kubelet == "real"

    def tag_image(self, source: str, target: str) -> None:
        """Name an image of the real node's containerd `target` too, as pushing `source`
        under that name to a registry and pulling it would (there is no registry here)."""
        if not self.real_kubelet:
            raise HarnessError("only a real node has images")
        socket = RECORDS / str(self.process.pid) / "containerd.sock"
        result = subprocess.run(
            [str(realnode.CTR), "--address", str(socket), "--namespace", "k8s.io"]
            + ["images", "tag", "--force", docker_reference(source), docker_reference(target)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if result.returncode != 0:
            raise HarnessError(f"ctr images tag {source} {target}: {result.stderr.strip()}")

    @property
    def cadvisor(self) -> str:
        """Where its cAdvisor-style metrics are scraped ("host:port/path"): kubesim's own
        `/metrics/cadvisor`, the node agent's endpoint on the real one (both from the pods'
        usage annotations); with a real kubelet, its cAdvisor through the API server's node
        proxy ("https://host:port/path", which takes the kubeconfig's client certificate)."""
        line = next(line for line in self.log if " serving on " in line)
        if self.real:
            url = line.rsplit("cadvisor metrics ", 1)[1]
        else:
            url = line.split(" serving on ", 1)[1].split(",", 1)[0] + "/metrics/cadvisor"
        return url.removeprefix("http://")


def _command(
    kind: str,
    kubeconfig: Path,
    audit_log: Path,
    nodes: int,
    cpu: str,
    memory: str,
    kubelet: str,
    images: tuple[Path, ...],
) -> list[str]:
    module = "devcluster" if kind == "real" else "kubesim"
    argv = [sys.executable, "-m", module, "--kubeconfig", str(kubeconfig), "--nodes", str(nodes)]
    argv += ["--node-cpu", cpu, "--node-memory", memory, "--audit-log", str(audit_log)]
    if kind == "kubesim":
        return [*argv, "--real-clock"]
    return [*argv, "--kubelet", kubelet, *(f"--image={tarball}" for tarball in images)]


def stop_group(process: subprocess.Popen[str] | subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM the process's group (a graceful stop), SIGKILL past `timeout_s`."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def running_backend(
    kind: str,
    workdir: Path,
    *,
    nodes: int = 2,
    cpu: str = "4",
    memory: str = "8Gi",
    kubelet: str = "agent",
    images: tuple[Path, ...] = (),
    start_timeout_s: float = START_TIMEOUT_S,
) -> Iterator[Backend]:
    """Start a backend in a session of its own, wait until it says it serves (at most
    `start_timeout_s`), stop it (SIGTERM) on exit. A real node also imports `images`."""
    kubeconfig = workdir / f"{kind}.kubeconfig"
    audit_log = workdir / f"{kind}-audit.log"
    process = subprocess.Popen(
        _command(kind, kubeconfig, audit_log, nodes, cpu, memory, kubelet, images),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    log: list[str] = []
    serving = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            log.append(line.rstrip("\n"))
            if "serving on" in line:
                serving.set()
        serving.set()  # the process ended: stop waiting

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # The reader also wakes the wait when the process ends, possibly before it is
        # reaped: only the line says it started.
        serving.wait(start_timeout_s)
        if not any("serving on" in line for line in log) or process.poll() is not None:
            raise BackendFailed(f"{kind} did not start:\n" + "\n".join(log[-30:]))
        yield Backend(
            kind, kubeconfig, process, log, audit_log, kubelet if kind == "real" else kind
        )
    finally:
        stop_group(process, STOP_TIMEOUT_S)
        reader.join(timeout=10)
