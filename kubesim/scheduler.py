"""The scheduler step: bind pending pods to nodes where their requests fit."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any

from kubesim import pods
from kubesim.apiserver import ApiServer
from kubesim.conditions import get_condition, set_condition
from kubesim.nodes import allocatable, is_ready, usage
from kubesim.recorder import NORMAL, WARNING, EventRecorder
from kubesim.selectors import Requirement, Selector

Obj = dict[str, Any]
_STRUCT_OPS = {
    "In": "in",
    "NotIn": "notin",
    "Exists": "exists",
    "DoesNotExist": "!",
    "Gt": "gt",
    "Lt": "lt",
}


def _tolerates(pod: Obj, taint: Obj) -> bool:
    for tol in pod["spec"].get("tolerations") or []:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists" and (
            not tol.get("key") or tol["key"] == taint.get("key")
        ):
            return True
        if tol.get("key") == taint.get("key") and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def _term_matches(term: Obj, node: Obj) -> bool:
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}
    label_reqs = [
        Requirement(e["key"], _STRUCT_OPS[e["operator"]], tuple(e.get("values") or ()))
        for e in term.get("matchExpressions") or []
    ]
    field_reqs = [
        Requirement(e["key"], _STRUCT_OPS[e["operator"]], tuple(e.get("values") or ()))
        for e in term.get("matchFields") or []
    ]
    return Selector(tuple(label_reqs)).matches(labels) and Selector(tuple(field_reqs)).matches(
        fields
    )


def _affinity_ok(pod: Obj, node: Obj) -> bool:
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (pod["spec"].get("nodeSelector") or {}).items()):
        return False
    required = ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(_term_matches(t, node) for t in terms)


class Scheduler:
    """Binds each pending pod to the least-allocated feasible node, or marks it Unschedulable."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self._pods = api.registry.get("", "v1", "pods")
        self.events = EventRecorder(api, "default-scheduler")

    async def step(self) -> None:
        """Schedule every pending pod once, in creation order."""
        all_pods = self.api.store.list(("", "pods"))
        nodes = self.api.store.list(("", "nodes"))
        pending = [
            p
            for p in all_pods
            if not p["spec"].get("nodeName")
            and not pods.is_terminal(p)
            and not p["metadata"].get("deletionTimestamp")
            and p["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"
            and not p["spec"].get("schedulingGates")
        ]
        pending.sort(
            key=lambda p: (
                -int(p["spec"].get("priority", 0)),
                p["metadata"]["creationTimestamp"],
                p["metadata"]["name"],
            )
        )
        for pod in pending:
            node, reasons = self._choose(pod, nodes, all_pods)
            if node is not None:
                ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
                await self.api.bind(ns, name, {"target": {"kind": "Node", "name": node}})
                bound = self.api.store.peek(("", "pods"), ns, name)
                if bound is not None:
                    self.events.record(
                        bound,
                        NORMAL,
                        "Scheduled",
                        f"Successfully assigned {ns}/{name} to {node}",
                        "Binding",
                    )
                    all_pods = [
                        bound if p["metadata"]["uid"] == pod["metadata"]["uid"] else p
                        for p in all_pods
                    ]
                continue
            status = pod.setdefault("status", {})
            message = self._message(len(nodes), reasons)
            before = get_condition(status, "PodScheduled") or {}
            set_condition(
                status,
                "PodScheduled",
                "False",
                self.api.clock.stamp(),
                "Unschedulable",
                message,
                probe=True,
            )
            assert self._pods is not None
            written = self.api.write_status(self._pods, pod)
            # Once per new verdict: settling repeats this step until nothing changes.
            if (before.get("status"), before.get("message")) != ("False", message):
                self.events.record(written, WARNING, "FailedScheduling", message, "Scheduling")

    def _choose(
        self, pod: Obj, nodes: list[Obj], all_pods: list[Obj]
    ) -> tuple[str | None, Counter[str]]:
        reasons: Counter[str] = Counter()
        wanted = pods.pod_requests(pod, "spec")
        best: tuple[Fraction, str] | None = None
        for node in nodes:
            reason = self._filter(pod, node)
            if reason:
                reasons[reason] += 1
                continue
            free = allocatable(node)
            used = usage(all_pods, node["metadata"]["name"], "max")
            short = [
                k
                for k, v in wanted.items()
                if v > 0 and used.get(k, Fraction(0)) + v > free.get(k, Fraction(0))
            ]
            if short:
                for k in short:
                    reasons["Too many pods" if k == "pods" else f"Insufficient {k}"] += 1
                continue
            score = max(
                (
                    (used.get(k, Fraction(0)) + wanted.get(k, Fraction(0))) / free[k]
                    for k in ("cpu", "memory")
                    if free.get(k)
                ),
                default=Fraction(0),
            )
            if best is None or (score, node["metadata"]["name"]) < best:
                best = (score, node["metadata"]["name"])
        return (best[1] if best else None), reasons

    def _filter(self, pod: Obj, node: Obj) -> str:
        if not is_ready(node):
            return "node(s) were not ready"
        if node.get("spec", {}).get("unschedulable"):
            return "node(s) were unschedulable"
        if not _affinity_ok(pod, node):
            return "node(s) didn't match Pod's node affinity/selector"
        for taint in node.get("spec", {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(pod, taint):
                value = f": {taint['value']}" if taint.get("value") else ""
                return f"node(s) had untolerated taint {{{taint.get('key')}{value}}}"
        return ""

    def _message(self, total: int, reasons: Counter[str]) -> str:
        if total == 0:
            return "no nodes available to schedule pods"
        parts = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
        return f"0/{total} nodes are available: {parts}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
