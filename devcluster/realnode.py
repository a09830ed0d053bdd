"""One real node: containerd (Debian's) and the kubelet built from the pinned modules, on
this machine, with pods on a private bridge.

Every file is under the node's directory, `/run/kerf-devcluster/<devcluster's pid>`:
containerd's root, state and sockets, the kubelet's root and pod logs, the CNI
configuration and its address store. What cannot live there (mounts, the bridge, iptables chains, sysctls, the `kubepods` cgroups) is put
back by `devcluster.host` when the node stops, or by the next devcluster if this one was
killed.

The settings that this machine kind needs (cgroup v1, root without CAP_SYS_RESOURCE, no
systemd) are the ones docs/devcluster.md lists; each is commented where it is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from app.model.quantities import to_bytes, to_millicores
from devcluster import certs, kubeconfig
from devcluster.host import RECORDS, HostState, Record, restore, start_time, sweep
from devcluster.images import PAUSE_IMAGE, import_images
from devcluster.network import KUBERNETES_SERVICE_IP, machine_address
from devcluster.processes import Component, ComponentError, free_port, start

NODE_NAME = "devcluster-node"
BRIDGE = "kerfdev0"
#: Pods' addresses: a private range on the bridge only (no NAT, nothing routes it out).
POD_SUBNET = "10.244.0.0/24"
CNI_BIN_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
CONTAINERD = Path("/usr/bin/containerd")
CTR = Path("/usr/bin/ctr")
RUNC = Path("/usr/bin/runc")
#: What the kubelet keeps back when no size is asked: a real node's system share.
DEFAULT_RESERVED_CPU_M = 200
DEFAULT_RESERVED_MEMORY_MI = 512
#: The kubelet's hard eviction threshold for memory; allocatable is capacity less it.
EVICTION_MEMORY_MI = 100
CONTAINERD_READY_S = 30
#: The nat chain that plays kube-proxy for the one Service pods need, `kubernetes`.
SERVICES_CHAIN = "KERF-DEVCLUSTER-SERVICES"


def tools_missing() -> str:
    """Why a real node cannot run here ('' when it can): root and the Debian packages."""
    if os.geteuid() != 0:
        return "not root (a kubelet and containerd need root)"
    for tool in (CONTAINERD, CTR, RUNC):
        if not tool.exists():
            return f"{tool} is missing (make node-tools)"
    if cni_bin_dir() is None:
        return "the CNI plugins are missing (make node-tools)"
    if machine_address() is None:
        return "this machine has no address but loopback (the kubelet refuses loopback)"
    return ""


def cni_bin_dir() -> Path | None:
    for directory in CNI_BIN_DIRS:
        if (directory / "bridge").exists() and (directory / "host-local").exists():
            return directory
    return None


@dataclass(frozen=True)
class NodeSize:
    """The kubelet's reservations: capacity less these is the node's allocatable."""

    kube_reserved_cpu_m: int
    kube_reserved_memory_mi: int

    @classmethod
    def of(cls, cpu: str | None, memory: str | None) -> NodeSize:
        """Reservations that leave `cpu` and `memory` allocatable (ValueError when the
        machine has less), or the default reserve where one is not given."""
        capacity_m = (os.cpu_count() or 1) * 1000
        capacity_mi = _mem_total_mi()
        reserved_m = DEFAULT_RESERVED_CPU_M
        reserved_mi = DEFAULT_RESERVED_MEMORY_MI
        if cpu is not None:
            reserved_m = capacity_m - to_millicores(cpu)
            if reserved_m < 0:
                raise ValueError(f"--node-cpu {cpu}: the machine has {capacity_m}m")
        if memory is not None:
            asked_mi = to_bytes(memory) // 2**20
            reserved_mi = capacity_mi - asked_mi - EVICTION_MEMORY_MI
            if reserved_mi < 0:
                raise ValueError(
                    f"--node-memory {memory}: the machine has {capacity_mi}Mi, "
                    f"less {EVICTION_MEMORY_MI}Mi the kubelet keeps for eviction"
                )
        return cls(reserved_m, reserved_mi)


def _mem_total_mi() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("/proc/meminfo has no MemTotal")


class RealNode:
    """containerd and one kubelet; `start()` then `stop()` (always)."""

    def __init__(
        self,
        data_dir: Path,
        kubelet: Path,
        server: str,
        pki: certs.Pki,
        size: NodeSize,
        images: list[Path],
    ) -> None:
        self.cluster_dir = data_dir
        # Not under the cluster's temp dir: a unix socket's path (containerd's, the kubelet's
        # pod-resources and device plugins) is limited to 108 bytes.
        self.dir = RECORDS / str(os.getpid())
        self.kubelet_binary = kubelet
        self.server = server
        self.pki = pki
        self.size = size
        self.images = images
        self.address = machine_address() or ""
        self.components: list[Component] = []
        self.record: Record | None = None
        self.record_path: Path | None = None
        self.containerd_socket = self.dir / "containerd.sock"
        self.kubelet_port = 0

    async def start(self) -> list[Component]:
        """Clean up after a killed devcluster, snapshot the machine, then start containerd,
        import the images and start the kubelet; the started components."""
        for problem in sweep():
            raise ComponentError(f"could not clean up after an earlier devcluster: {problem}")
        for other in RECORDS.glob("*.json"):
            # One kubelet per machine: a second would share the bridge and `kubepods`.
            raise ComponentError(f"devcluster {other.stem} runs a real node here already")
        for hierarchy, names in HostState.read().cgroups.items():
            if names:
                raise ComponentError(f"{hierarchy}/{names[0]} exists: another kubelet runs here")
        before = HostState.read()
        owner = os.getpid()
        self.record = Record(
            owner,
            start_time(owner) or 0,
            str(self.dir),
            str(self.cluster_dir),
            BRIDGE,
            before,
        )
        self.record_path = self.record.write()
        self.dir.mkdir(mode=0o700)
        await asyncio.to_thread(self._route_kubernetes_service)
        await self._start_containerd()
        await asyncio.to_thread(import_images, CTR, self.containerd_socket, self.images)
        await self._start_kubelet()
        return self.components

    def _route_kubernetes_service(self) -> None:
        """In-cluster clients (kerf's own pods) call the API server at the `kubernetes`
        Service's address. There is no kube-proxy here: one DNAT rule from the pod network
        to the server's port on this machine does its job for that one Service; the
        machine's snapshot removes it on stop."""
        port = urlsplit(self.server).port
        to = f"{self.address}:{port}"
        rules = (
            ["-N", SERVICES_CHAIN],
            ["-A", SERVICES_CHAIN, "-d", f"{KUBERNETES_SERVICE_IP}/32", "-p", "tcp"]
            + ["--dport", "443", "-j", "DNAT", "--to-destination", to],
            ["-A", "PREROUTING", "-s", POD_SUBNET, "-j", SERVICES_CHAIN],
        )
        for rule in rules:
            result = subprocess.run(
                ["iptables", "-w", "-t", "nat", *rule], capture_output=True, text=True, timeout=30
            )
            if result.returncode != 0:
                command = " ".join(["iptables -t nat", *rule])
                raise ComponentError(f"{command} failed: {result.stderr.strip()}")

    async def _start_containerd(self) -> Component:
        base = self.dir / "containerd"
        cni_dir = self.dir / "cni"
        cni_dir.mkdir(parents=True)
        (cni_dir / "10-kerfdev.conflist").write_text(json.dumps(self._cni_config(), indent=2))
        config = base / "config.toml"
        base.mkdir(exist_ok=True)
        config.write_text(self._containerd_config(base, cni_dir))
        component = await self._launch("containerd", [CONTAINERD, "--config", config])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONTAINERD_READY_S
        while not self.containerd_socket.exists():
            if not component.running:
                raise ComponentError("containerd exited", component.log_tail())
            if loop.time() > deadline:
                raise ComponentError("containerd did not open its socket", component.log_tail())
            await asyncio.sleep(0.1)
        return component

    def _containerd_config(self, base: Path, cni_dir: Path) -> str:
        cni_bin = cni_bin_dir()
        return f"""version = 2
root = "{base / "root"}"
state = "{base / "state"}"
# Nothing but the CRI's needs: no plugin that writes outside the data directory.
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{self.containerd_socket}"

[ttrpc]
  address = "{self.dir / "containerd.ttrpc.sock"}"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{base / "opt"}"

[plugins."io.containerd.grpc.v1.cri"]
  # No registry here: the sandbox image is imported from a local tarball.
  sandbox_image = "{PAUSE_IMAGE}"
  # Root on this machine lacks CAP_SYS_RESOURCE: without this every sandbox fails with
  # "can't get final child's PID from pipe: EOF" (runc may not lower oom_score_adj).
  restrict_oom_score_adj = true
  # The sandboxes' network namespaces under the state directory, not /var/run/netns.
  netns_mounts_under_state_dir = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # cgroupfs, as the kubelet's driver: there is no systemd.
        SystemdCgroup = false
        # runc's state beside containerd's, not in /run/containerd/runc.
        Root = "{base / "runc"}"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_dir}"
"""

    def _cni_config(self) -> dict[str, object]:
        return {
            "cniVersion": "0.4.0",
            "name": "kerf-devcluster",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    # Pods talk to this machine and each other, and nothing leaves it.
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.dir / "cni-ipam"),
                    },
                }
            ],
        }

    async def _start_kubelet(self) -> Component:
        node = certs.issue_node(self.pki, NODE_NAME, self.address)
        config_path = self.dir / "kubelet.kubeconfig"
        kubeconfig.write(
            config_path,
            kubeconfig.render(self.server, self.pki.ca.cert, node.client, NODE_NAME),
        )
        self.kubelet_port = free_port()
        config = self.dir / "kubelet-config.json"
        config.write_text(json.dumps(self._kubelet_config(node), indent=2))
        root = self.dir / "kubelet"
        return await self._launch(
            "kubelet",
            [
                self.kubelet_binary,
                f"--config={config}",
                f"--kubeconfig={config_path}",
                f"--root-dir={root}",
                f"--cert-dir={root / 'pki'}",
                f"--hostname-override={NODE_NAME}",
                # The kubelet refuses loopback: the machine's address on its default route.
                f"--node-ip={self.address}",
                # Deprecated, and still the only way cAdvisor finds containerd's containers:
                # without it there are pod-level series only.
                f"--containerd={self.containerd_socket}",
                # cAdvisor refreshes a container's figures every 2 s (default 10 s, backing off
                # to 15 s): a scrape sees new points in seconds, not a quarter of a minute.
                "--housekeeping-interval=2s",
                "--v=1",
            ],
        )

    def _kubelet_config(self, node: certs.NodePki) -> dict[str, object]:
        socket = f"unix://{self.containerd_socket}"
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.address,
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 0,
            "tlsCertFile": str(node.serving.cert),
            "tlsPrivateKeyFile": str(node.serving.key),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.pki.ca.cert)},
            },
            "authorization": {"mode": "Webhook"},
            # cgroup v1 on this machine: 1.35 refuses to start on it unless told not to.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "failSwapOn": False,
            "containerRuntimeEndpoint": socket,
            "imageServiceEndpoint": socket,
            # No registry to pull a collected image back from.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": f"{EVICTION_MEMORY_MI}Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            "kubeReserved": {
                "cpu": f"{self.size.kube_reserved_cpu_m}m",
                "memory": f"{self.size.kube_reserved_memory_mi}Mi",
            },
            "podLogsDir": str(self.dir / "pod-logs"),
            "resolvConf": "",
            "clusterDomain": "cluster.local",
            "serializeImagePulls": False,
            # Projected files (a downward-API annotation) follow the pod within seconds.
            "syncFrequency": "5s",
            "nodeStatusUpdateFrequency": "5s",
            "makeIPTablesUtilChains": False,
            "staticPodPath": "",
        }

    async def _launch(self, name: str, argv: list[str | Path]) -> Component:
        component = await start(name, argv, self.dir / f"{name}.log")
        self.components.append(component)
        return component

    async def stop(self) -> list[str]:
        """Stop the kubelet, then containerd, then everything they left, and put the
        machine back; what could not be put back, one line each."""
        for component in reversed(self.components):
            await component.stop()  # the kubelet first: it would restart what is stopped
        if self.record is None:
            return []
        failed, differing = await asyncio.to_thread(restore, self.record)
        if self.record_path is not None:
            self.record_path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            RECORDS.rmdir()  # only when no other record is left in it
        return failed + differing
