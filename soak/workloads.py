"""What the soak runs kerf over: one namespace of Deployments, their PDBs, two
AutomationStrategies and a StaticPolicy per Deployment whose values change once midway
(phase A, then phase B), so each workload sees two changes under chaos."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GROUP_VERSION = "rightsizing.kubex.ai/v1alpha1"
NAMESPACE = "soak"
Resources = dict[str, dict[str, str]]
#: container -> {"requests": {...}, "limits": {...}}
Values = dict[str, Resources]


def _values(cpu: str, memory: str, cpu_limit: str, memory_limit: str) -> Resources:
    return {
        "requests": {"cpu": cpu, "memory": memory},
        "limits": {"cpu": cpu_limit, "memory": memory_limit},
    }


INITIAL = _values("100m", "128Mi", "400m", "512Mi")
PHASE_A = _values("150m", "192Mi", "500m", "640Mi")
PHASE_B = _values("200m", "256Mi", "600m", "768Mi")


@dataclass(frozen=True)
class Workload:
    """One Deployment of the soak and how kerf may change it."""

    name: str
    replicas: int
    containers: tuple[str, ...]
    #: the AutomationStrategy its policy names: "in-place" or "evict"
    strategy: str
    #: the PDB's minAvailable, or None for no PDB
    min_available: int | None
    #: the chaos may scale it between 1 and `max_replicas`
    scalable: bool

    def deployment(self) -> dict[str, Any]:
        """The Deployment, every container at the initial values."""
        labels = {"app": self.name}
        containers = [
            {"name": c, "image": f"soak/{c}:1.0", "resources": INITIAL} for c in self.containers
        ]
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": self.name, "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "replicas": self.replicas,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": containers}},
            },
        }

    def pdb(self) -> dict[str, Any] | None:
        """Its PodDisruptionBudget, if it has one."""
        if self.min_available is None:
            return None
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": self.name, "namespace": NAMESPACE},
            "spec": {
                "minAvailable": self.min_available,
                "selector": {"matchLabels": {"app": self.name}},
            },
        }

    def values(self, phase: Resources) -> Values:
        """The policy's values in a phase, for each of its containers."""
        return {c: phase for c in self.containers}

    def policy(self, phase: Resources) -> dict[str, Any]:
        """Its StaticPolicy with a phase's values (no cooldown, so phase B follows A)."""
        return {
            "apiVersion": GROUP_VERSION,
            "kind": "StaticPolicy",
            "metadata": {"name": self.name, "namespace": NAMESPACE},
            "spec": {
                "automationStrategyRef": {"name": self.strategy},
                "scope": {
                    "labelSelector": {"matchLabels": {"app": self.name}},
                    "workloadTypes": ["Deployment"],
                },
                "resources": {"containers": self.values(phase)},
                "guardrails": {"cooldown": "0s"},
            },
        }


WORKLOADS = (
    Workload("web", 3, ("app",), "in-place", 2, scalable=True),
    Workload("worker", 2, ("app", "log"), "in-place", None, scalable=True),
    Workload("api", 2, ("app",), "evict", 1, scalable=False),
    # One replica that may only be evicted: kerf must say why it leaves it alone.
    Workload("cache", 1, ("app",), "evict", None, scalable=False),
)
MAX_REPLICAS = 4


def strategies() -> list[dict[str, Any]]:
    """`in-place` resizes without restarts; `evict` only evicts."""
    specs = {
        "in-place": {"inPlaceResize": {"enabled": True}, "podEviction": {"enabled": True}},
        "evict": {"inPlaceResize": {"enabled": False}, "podEviction": {"enabled": True}},
    }
    return [
        {
            "apiVersion": GROUP_VERSION,
            "kind": "AutomationStrategy",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec,
        }
        for name, spec in specs.items()
    ]


def workload_of_pod(pod_name: str) -> str:
    """The Deployment a pod belongs to: `<deployment>-<template hash>-<suffix>`."""
    return pod_name.rsplit("-", 2)[0]
