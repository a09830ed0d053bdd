"""What the soak sees as each write is carried out: kubesim calls `Observer.on_write`
with the store exactly as the write left it, so a change's values, an eviction's effect
on its PDB and a pod's requests against its limits are judged at that moment."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from app.model.quantities import parse_resource
from kubesim.store import Store, Subscription, WatchEvent
from kubesim.writes import Write
from soak.workloads import NAMESPACE, workload_of_pod

PODS = ("", "pods")
PDBS = ("policy", "poddisruptionbudgets")
DEPLOYMENTS = ("apps", "deployments")
Obj = dict[str, Any]


def is_healthy(pod: Obj) -> bool:
    """Ready and not being deleted: what a PDB counts as healthy."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def containers_of(pod: Obj) -> list[Obj]:
    """App containers and init containers (sidecars included)."""
    spec = pod.get("spec") or {}
    return [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]


def over_limits(pod: Obj) -> list[str]:
    """'<container> <resource> request R > limit L' for each request above its limit."""
    found = []
    for container in containers_of(pod):
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        for resource, request in (resources.get("requests") or {}).items():
            limit = limits.get(resource)
            if limit is not None and parse_resource(resource, request) > parse_resource(
                resource, limit
            ):
                found.append(f"{container['name']} {resource} request {request} > limit {limit}")
    return found


def pod_values(pod: Obj, containers: tuple[str, ...] | list[str]) -> str:
    """A pod's requests and limits for `containers`, as one comparable text."""
    parts = []
    for container in containers_of(pod):
        if container["name"] in containers:
            resources = container.get("resources") or {}
            requests = sorted((resources.get("requests") or {}).items())
            limits = sorted((resources.get("limits") or {}).items())
            parts.append(f"{container['name']}:requests={requests},limits={limits}")
    return ";".join(sorted(parts))


@dataclass
class Observed:
    """What the writes showed during the run."""

    #: workload -> the distinct values its pods were resized to (one change each)
    changes: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    #: workload -> evictions carried out
    evictions: Counter[str] = field(default_factory=Counter)
    #: one line per eviction that left a PDB with fewer healthy pods than it requires
    pdb_breaks: list[str] = field(default_factory=list)
    #: one line per pod seen with a request above its limit after a write
    over_limit: list[str] = field(default_factory=list)
    #: kerf's pod deletions (kerf never deletes a pod; it evicts)
    pod_deletes: list[str] = field(default_factory=list)


class Observer:
    """Keeps a copy of the soak namespace's pods from the store's own events and judges
    each write by kerf's reconcilers as it is recorded."""

    def __init__(
        self, store: Store, reconcilers: dict[str, str], containers: dict[str, tuple[str, ...]]
    ) -> None:
        self._store = store
        #: token -> replica identity
        self._reconcilers = reconcilers
        #: workload -> the containers its policy names
        self._containers = containers
        self._subscription: Subscription | None = None
        self.pods: dict[str, Obj] = {}
        self.seen = Observed()

    def start(self) -> None:
        """Copy the pods now and follow every change from here."""
        _, self._subscription = self._store.subscribe(None)
        self.pods = {p["metadata"]["name"]: p for p in self._store.list(PODS, NAMESPACE)}

    def close(self) -> None:
        """Stop following the store."""
        if self._subscription is not None:
            self._subscription.close()

    def _drain(self) -> list[WatchEvent]:
        """Apply every store event since the last call to the copy of the pods."""
        events = []
        assert self._subscription is not None
        queue = self._subscription.queue
        while not queue.empty():
            event = queue.get_nowait()
            if event is None or event.key != PODS:
                continue
            if event.obj["metadata"].get("namespace") != NAMESPACE:
                continue
            name = event.obj["metadata"]["name"]
            if event.type == "DELETED":
                self.pods.pop(name, None)
            else:
                self.pods[name] = event.obj
            events.append(event)
        return events

    def on_write(self, write: Write) -> None:
        """kubesim's write-log listener."""
        events = self._drain()
        if write.namespace != NAMESPACE or write.resource != "pods" or write.status >= 400:
            return
        pod = self.pods.get(write.name)
        if pod is not None and (problems := over_limits(pod)):
            self.seen.over_limit.append(f"{write.name} after {write.verb}: {', '.join(problems)}")
        identity = self._reconcilers.get(write.user)
        if identity is None:
            return
        workload = workload_of_pod(write.name)
        if write.subresource == "resize" and pod is not None:
            self.seen.changes[workload].add(pod_values(pod, self._containers.get(workload, ())))
        elif write.subresource == "eviction":
            self.seen.evictions[workload] += 1
            self._judge_eviction(write, workload, events)
        elif write.verb == "delete" and not write.subresource:
            self.seen.pod_deletes.append(f"{identity} deleted {write.name}")

    def _judge_eviction(self, write: Write, workload: str, events: list[WatchEvent]) -> None:
        gone = next(
            (
                e.obj
                for e in events
                if e.type == "DELETED" and e.obj["metadata"]["name"] == write.name
            ),
            None,
        )
        if gone is None or not is_healthy(gone):
            return  # an unhealthy pod is not protected by its budget
        pdb = self._store.get(PDBS, NAMESPACE, workload)
        if pdb is None:
            return
        required = int((pdb.get("spec") or {}).get("minAvailable") or 0)
        healthy = sum(
            1
            for p in self.pods.values()
            if workload_of_pod(p["metadata"]["name"]) == workload and is_healthy(p)
        )
        if healthy < required:
            self.seen.pdb_breaks.append(
                f"eviction of {write.name} left {workload} {healthy} healthy, PDB requires "
                f"{required}"
            )
