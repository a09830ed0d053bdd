"""What a node's kubelet registers and reports: the Node object, its status, its Lease.

Pure functions; the agent (devcluster/agent.py) writes what they return.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubesim.clock import rfc3339
from kubesim.conditions import set_condition

Obj = dict[str, Any]
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_S = 40
KUBELET_VERSION = "v1.35.4"
#: The address nodes report. Loopback on purpose: anything that follows it (kubectl logs,
#: exec) reaches this machine and is refused, never another host.
NODE_IP = "127.0.0.1"
_CONDITIONS = (
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


@dataclass(frozen=True)
class NodeShape:
    """The capacity a node gets when nothing else says (e.g. a Node created through the
    API without status)."""

    cpu: str = "4"
    memory: str = "8Gi"
    pods: str = "110"
    #: a kubelet reports its root filesystem's size; without it the scheduler refuses any
    #: pod that asks for ephemeral storage (Insufficient ephemeral-storage)
    ephemeral_storage: str = "100Gi"


def new_node(name: str) -> Obj:
    """The Node a kubelet registers (status follows with `desired_status`)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
            },
        },
        "spec": {},
    }


def desired_status(node: Obj, shape: NodeShape, now: datetime, heartbeat: bool) -> Obj:
    """The node's status as its kubelet reports it: capacity kept if set (else `shape`),
    allocatable = capacity, healthy conditions; `heartbeat` refreshes the conditions'
    lastHeartbeatTime (otherwise the status is unchanged once reported, so no write)."""
    status = copy.deepcopy(node.get("status") or {})
    stamp = rfc3339(now)
    capacity = status.get("capacity") or {
        "cpu": shape.cpu,
        "memory": shape.memory,
        "ephemeral-storage": shape.ephemeral_storage,
        "pods": shape.pods,
    }
    status["capacity"] = capacity
    status["allocatable"] = status.get("allocatable") or dict(capacity)
    for ctype, value, reason, message in _CONDITIONS:
        current = next((c for c in status.get("conditions") or [] if c["type"] == ctype), None)
        beat = (current or {}).get("lastHeartbeatTime")
        fresh = current is None or current.get("status") != value or heartbeat or not beat
        set_condition(
            status,
            ctype,
            value,
            stamp,
            reason,
            message,
            lastHeartbeatTime=stamp if fresh else beat,
        )
    status["addresses"] = [
        {"type": "InternalIP", "address": NODE_IP},
        {"type": "Hostname", "address": node["metadata"]["name"]},
    ]
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
    status["nodeInfo"] = {
        "machineID": "",
        "systemUUID": "",
        "bootID": "",
        "kernelVersion": "",
        "osImage": "devcluster node agent",
        "containerRuntimeVersion": "devcluster://1.0",
        "kubeletVersion": KUBELET_VERSION,
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }
    return status


def _micro(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease(node: Obj, now: datetime, current: Obj | None) -> Obj:
    """The node's Lease in kube-node-lease renewed at `now` (owned by the Node, so the
    garbage collector removes it with the node)."""
    name = node["metadata"]["name"]
    body = (
        copy.deepcopy(current)
        if current
        else {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": LEASE_NAMESPACE,
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "name": name,
                        "uid": node["metadata"]["uid"],
                    }
                ],
            },
            "spec": {},
        }
    )
    body["spec"].update(
        holderIdentity=name, leaseDurationSeconds=LEASE_DURATION_S, renewTime=_micro(now)
    )
    return body
