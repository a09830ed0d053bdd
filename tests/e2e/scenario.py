"""Building blocks of the end-to-end scenarios: a namespace with kerf's strategy in it,
Deployments, policies, and what a test reads back (pods, the record, events).

The same manifests run on every backend. kubesim and the node agent run no container, so
the images are made-up names; on a real kubelet `Namespace.apply` makes every container
run kerf-load (docs/devcluster.md), idle, or using what the pod's `kubesim.kerf.dev/usage`
annotation says. What the simulators play from a fault annotation is done for real there:
`oom_kill` and `hold_memory`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.model.quantities import to_bytes
from devcluster import fit
from harness.loadimage import cgroup_values, runnable
from harness.services import Kerf
from harness.wait import wait_until
from kubesim.fault_annotations import OOM_KILL

GROUP_VERSION = "rightsizing.kubex.ai/v1alpha1"
FAULT = "sim.kerf.dev"
MIB = 2**20


@dataclass
class Namespace:
    """One test's namespace on the shared backend."""

    kerf: Kerf
    name: str

    def get(self, *args: str) -> Any:
        """`kubectl get ARGS -n NS -o json`."""
        return self.kerf.kubectl.json("-n", self.name, *args)

    def apply(self, obj: dict[str, Any]) -> None:
        """Apply an object into this namespace (on a real kubelet, its containers made to
        run kerf-load: `runnable`)."""
        obj.setdefault("metadata", {})["namespace"] = self.name
        if self.kerf.backend.real_kubelet:
            obj = runnable(obj)
        self.kerf.kubectl.apply(obj)

    def exec(self, pod: str, container: str, *argv: str) -> str:
        """`kubectl exec POD -c CONTAINER -- ARGV` (a real kubelet only)."""
        return str(self.kerf.kubectl("-n", self.name, "exec", pod, "-c", container, "--", *argv))

    def pods(self, app: str) -> list[dict[str, Any]]:
        """Live pods labelled app=<app>, by name."""
        items = self.get("pods", "-l", f"app={app}")["items"]
        live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return sorted(live, key=lambda p: p["metadata"]["name"])

    def running(self, app: str, count: int) -> list[dict[str, Any]]:
        """Wait until `count` pods of `app` are Running and Ready; return them."""

        def ready() -> list[dict[str, Any]] | None:
            pods = self.pods(app)
            ok = len(pods) == count and all(is_ready(p) for p in pods)
            return pods if ok else None

        return wait_until(ready, f"{count} Ready pod(s) of {app} in {self.name}")

    def record(self, name: str = "deployment-web") -> dict[str, Any] | None:
        """The RightsizingRecommendation `name`, or None."""
        found = self.get("rightsizingrecommendations")["items"]
        return next((r for r in found if r["metadata"]["name"] == name), None)

    def status(self, name: str = "deployment-web") -> dict[str, Any]:
        """The record's status ({} until there is one)."""
        return (self.record(name) or {}).get("status") or {}

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        """events.k8s.io Events in this namespace (of one reason)."""
        items = self.get("events.v1.events.k8s.io")["items"]
        return [e for e in items if reason is None or e.get("reason") == reason]

    def annotate_pod(self, pod: str, key: str, value: str) -> None:
        """Set one annotation on a pod."""
        self.kerf.kubectl("-n", self.name, "annotate", "pod", pod, f"{key}={value}", "--overwrite")


def container_status(pod: dict[str, Any], name: str = "app") -> dict[str, Any]:
    """The status of one of a pod's containers (app or sidecar); {} before there is one."""
    status = pod.get("status") or {}
    entries = (*status.get("containerStatuses", ()), *status.get("initContainerStatuses", ()))
    return next((e for e in entries if e["name"] == name), {})


def oom_killed(pod: dict[str, Any], name: str = "app") -> bool:
    """The container's last run ended in an OOM kill."""
    last = (container_status(pod, name).get("lastState") or {}).get("terminated") or {}
    return last.get("reason") == "OOMKilled"


def oom_kill(ns: Namespace, pod: str, name: str = "app") -> None:
    """OOM-kill a running container once, and wait for its status to say so. On a real
    kubelet kerf-load is told to use twice its memory limit (`kerf-load set`) and the
    kernel kills it; its next run starts idle again (the control file lived in the killed
    container). Elsewhere the fault annotation `sim.kerf.dev/oom-kill` plays the kill."""
    if ns.kerf.backend.real_kubelet:
        limits = (container_status(ns.get("pod", pod), name).get("resources") or {}).get(
            "limits"
        ) or {}
        assert "memory" in limits, f"{pod}/{name} has no memory limit to be OOM-killed at"
        memory = 2 * to_bytes(limits["memory"]) // MIB
        ns.exec(pod, name, "kerf-load", "set", f"memory={memory}Mi")
    else:
        ns.annotate_pod(pod, OOM_KILL, name)
    wait_until(lambda: oom_killed(ns.get("pod", pod), name), f"{pod}/{name} OOM-killed")


def cgroup(ns: Namespace, pod: str, name: str = "app") -> dict[str, int]:
    """The container's cgroup limits and counters, read inside it (`kerf-load cgroup`
    through exec; a real kubelet only)."""
    return cgroup_values(ns.exec(pod, name, "kerf-load", "cgroup"))


def hold_memory(ns: Namespace, pod: str, memory: str, name: str = "app") -> None:
    """A real kubelet's container uses `memory` for real (`kerf-load set`), waited for in
    its cgroup's usage."""
    ns.exec(pod, name, "kerf-load", "set", f"memory={memory}")
    wanted = to_bytes(memory)
    wait_until(
        lambda: cgroup(ns, pod, name).get("memory.usage_in_bytes", 0) >= wanted,
        f"{pod}/{name} to hold {memory}",
    )


def free_millicores(kerf: Kerf, node: str) -> int:
    """The CPU a node has left, as its kubelet counts it: allocatable less what its
    non-terminal pods were granted (devcluster/fit.py, the kubelet's rule)."""
    pods = kerf.kubectl.json("pods", "-A")["items"]
    taken = sum(
        fit.pod_requests(p, "allocated").get("cpu", 0)
        for p in pods
        if p["spec"].get("nodeName") == node
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )
    left = fit.allocatable(kerf.kubectl.json("node", node))["cpu"] - taken
    return int(left * 1000)


def delete_namespace(kerf: Kerf, name: str) -> None:
    """Delete a test's namespace and wait until it is gone, with its pods (they hold node
    room the next tests need). Its Deployments go first, so kerf forgets their workloads
    (and their records go with them) before the namespace terminates: the API server
    refuses a write into a terminating namespace with 403, which would read as a call
    kerf's RBAC forbade."""
    kerf.kubectl("-n", name, "delete", "deployments", "--all", "--timeout=120s")
    kerf.kubectl("delete", "namespace", name, "--ignore-not-found", "--timeout=120s")


def is_ready(pod: dict[str, Any]) -> bool:
    """The pod's Ready condition is True."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def make_namespace(kerf: Kerf, name: str, strategy: dict[str, Any] | None = None) -> Namespace:
    """Create the namespace and its AutomationStrategy `default`."""
    kerf.kubectl("create", "namespace", name)
    ns = Namespace(kerf, name)
    wait_until(
        lambda: ns.get("serviceaccounts")["items"] if kerf.backend.real else True,
        f"the default ServiceAccount of {name}",
    )
    spec = strategy or {"inPlaceResize": {"enabled": True}, "podEviction": {"enabled": True}}
    ns.apply(
        {
            "apiVersion": GROUP_VERSION,
            "kind": "AutomationStrategy",
            "metadata": {"name": "default"},
            "spec": spec,
        }
    )
    return ns


def container(name: str, cpu: str = "100m", memory: str = "128Mi", **extra: Any) -> dict[str, Any]:
    """A container with requests (and whatever else is given). Its image is a made-up
    name, which `Namespace.apply` replaces with kerf-load on a real kubelet."""
    return {
        "name": name,
        "image": f"shop/{name}:1.0",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
        **extra,
    }


def deployment(
    name: str = "web",
    replicas: int = 2,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A Deployment labelled app=<name>."""
    labels = {"app": name}
    spec: dict[str, Any] = {"containers": containers or [container("app")]}
    if init_containers:
        spec["initContainers"] = init_containers
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def static_policy(
    values: dict[str, dict[str, Any]],
    app: str = "web",
    name: str = "web",
    guardrails: dict[str, Any] | None = None,
    mode: str | None = None,
) -> dict[str, Any]:
    """A StaticPolicy for the Deployment labelled app=<app>: `values` maps a container
    name to its {requests, limits}."""
    spec: dict[str, Any] = {
        "automationStrategyRef": {"name": "default"},
        "scope": {"labelSelector": {"matchLabels": {"app": app}}, "workloadTypes": ["Deployment"]},
        "resources": {"containers": values},
    }
    if guardrails:
        spec["guardrails"] = guardrails
    if mode:
        spec["mode"] = mode
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "StaticPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def requests(pod: dict[str, Any], name: str = "app") -> dict[str, str]:
    """The spec requests of one of a pod's containers (app or sidecar)."""
    spec = pod["spec"]
    for entry in (*spec.get("containers", ()), *spec.get("initContainers", ())):
        if entry["name"] == name:
            return dict((entry.get("resources") or {}).get("requests") or {})
    raise KeyError(name)


def running_requests(pod: dict[str, Any], name: str = "app") -> dict[str, str]:
    """What the kubelet reports a container runs with (status resources)."""
    status = pod.get("status") or {}
    for entry in (*status.get("containerStatuses", ()), *status.get("initContainerStatuses", ())):
        if entry["name"] == name:
            return dict((entry.get("resources") or {}).get("requests") or {})
    return {}


def uids(pods: list[dict[str, Any]]) -> set[str]:
    """The pods' uids."""
    return {p["metadata"]["uid"] for p in pods}


def refused_then_blocked(ns: Namespace, pod: str) -> dict[str, Any]:
    """Wait for kerf to show the kubelet's refusal of a resize (`ResizeError` with the
    kubelet's message), then for the fallback's verdict once `fallbackAfter` has passed
    (`Blocked`: the tests turn eviction off); the pod then, checked not resized again."""
    status = wait_until(
        lambda: ns.status() if ns.status().get("reason") == "ResizeError" else None,
        "kerf to show the kubelet's refusal",
    )
    blocked = {c["type"]: c for c in status["conditions"]}["Blocked"]
    assert "below current usage" in blocked["message"]
    generation = ns.get("pod", pod)["metadata"]["generation"]
    final = wait_until(
        lambda: ns.status() if ns.status().get("reason") not in (None, "ResizeError") else None,
        "the fallback's verdict after fallbackAfter",
    )
    assert final["phase"] == "Blocked"
    live: dict[str, Any] = ns.get("pod", pod)
    assert live["metadata"]["generation"] == generation
    notes = [e["note"] for e in ns.events("Blocked")]
    assert any("below current usage" in n for n in notes)
    return live


def rollback_policy(monitoring_period: str) -> dict[str, Any]:
    """RollbackPolicy `web`: back to the manifest's values after one failed turn."""
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "RollbackPolicy",
        "metadata": {"name": "web"},
        "spec": {
            "monitoringPeriod": monitoring_period,
            "rollbackTarget": "manifest",
            "adoptionThresholdPercent": 50,
            "backoff": {"timePeriod": "5s", "multiplyByTurn": 1, "maxAttempts": 1},
        },
    }
