"""Building blocks of the end-to-end scenarios: a namespace with kerf's strategy in it,
Deployments, policies, and what a test reads back (pods, the record, events)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.services import Kerf
from harness.wait import wait_until

GROUP_VERSION = "rightsizing.kubex.ai/v1alpha1"
FAULT = "sim.kerf.dev"


@dataclass
class Namespace:
    """One test's namespace on the shared backend."""

    kerf: Kerf
    name: str

    def get(self, *args: str) -> Any:
        """`kubectl get ARGS -n NS -o json`."""
        return self.kerf.kubectl.json("-n", self.name, *args)

    def apply(self, obj: dict[str, Any]) -> None:
        """Apply an object into this namespace."""
        obj.setdefault("metadata", {})["namespace"] = self.name
        self.kerf.kubectl.apply(obj)

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
    """A container with requests (and whatever else is given)."""
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
