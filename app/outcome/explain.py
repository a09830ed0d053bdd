"""`kerf explain`: the decision for every pod of a view, as JSON (a contract other tools
read, SPEC §9) or as a readable text table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from app.decide import PodDecision, decide_pod, describe_resources, format_resources
from app.model.owners import WorkloadRef
from app.model.workloads import WORKLOAD_KINDS
from app.policy.plans import policies_for
from app.policy.rollback import rollback_state
from app.policy.rollback_monitor import rollback_policy_for, summary
from app.recommend.gpu_inputs import gpu_summaries
from app.store.view import ClusterView

For = Literal["admission", "running"]

#: kubectl's short names for the workload kinds that have one.
_SHORT_KINDS = {"deploy": "Deployment", "sts": "StatefulSet", "ds": "DaemonSet", "cj": "CronJob"}


class SelectionError(ValueError):
    """A namespace or workload that selects nothing, or a workload that is not KIND/NAME."""


@dataclass(frozen=True, slots=True)
class Selection:
    """Which pods and workloads to explain: a namespace (None: all) and a workload, named
    `NAME` or `KIND/NAME` as kubectl names it (`deployment/web`, `deploy/web`)."""

    namespace: str | None = None
    kind: str | None = None
    name: str | None = None

    @classmethod
    def parse(cls, namespace: str | None, workload: str | None) -> Selection:
        """The selection of `-n NS` and `WORKLOAD`; SelectionError for an unknown kind."""
        if workload is None:
            return cls(namespace)
        kind_text, _, name = workload.rpartition("/")
        if not name:
            raise SelectionError(f"workload {workload!r}: expected NAME or KIND/NAME")
        if not kind_text:
            return cls(namespace, None, name)
        return cls(namespace, _kind(kind_text), name)

    def admits(self, ref: WorkloadRef | None, namespace: str) -> bool:
        """Whether a pod or workload of this namespace and owner is selected."""
        if self.namespace is not None and namespace != self.namespace:
            return False
        if self.name is None:
            return True
        if ref is None or ref.name != self.name:
            return False
        return self.kind is None or ref.kind == self.kind

    def describe(self) -> str:
        """The selection in words, for the message when it selects nothing."""
        where = f"namespace {self.namespace}" if self.namespace else "any namespace"
        if self.name is None:
            return where
        return f"{self.kind + '/' if self.kind else ''}{self.name} in {where}"


def _kind(text: str) -> str:
    lowered = text.lower()
    if lowered in _SHORT_KINDS:
        return _SHORT_KINDS[lowered]
    for kind in WORKLOAD_KINDS:
        if lowered in (kind.lower(), kind.lower() + "s"):
            return kind
    known = ", ".join(sorted(k.lower() for k in WORKLOAD_KINDS))
    raise SelectionError(f"workload kind {text!r} is not one kerf sizes ({known})")


def path_for(pod: Mapping[str, Any], forced: For | None) -> For:
    """`--for` when given; otherwise a pod bound to a node is running, any other is new."""
    if forced is not None:
        return forced
    return "running" if (pod.get("spec") or {}).get("nodeName") else "admission"


def decision_json(decision: PodDecision) -> dict[str, Any]:
    """One pod in the JSON shape of SPEC §9."""
    owner = decision.owner
    body: dict[str, Any] = {
        "namespace": decision.namespace,
        "name": decision.name,
        "owner": {"kind": owner.kind, "name": owner.name} if owner else None,
        "outcome": decision.outcome,
        "reason": decision.reason,
        "method": decision.method if decision.outcome == "apply" else None,
        "containers": decision.containers,
        "selected": [s.as_dict() for s in decision.selected],
        "message": decision.message,
    }
    if decision.next_allowed_at is not None:
        body["nextAllowedAt"] = decision.next_allowed_at.isoformat()
    if decision.reason == "Audit" and decision.proposal_id:
        # What an approval applies now (the guardrails' step), beside the final target.
        body["proposal"] = {
            "id": decision.proposal_id,
            "containers": {c: format_resources(r) for c, r in decision.proposal.items()},
            "target": {c: format_resources(r) for c, r in decision.proposal_target.items()},
        }
    return body


def rollback_json(view: ClusterView, selection: Selection = Selection()) -> list[dict[str, Any]]:
    """The rollback state of every selected workload a rollback policy governs or that
    carries a rollback state: mode, turn, failure reason, and the next step with its time."""
    found: list[dict[str, Any]] = []
    for workload in sorted(view.workloads(), key=lambda w: (w.namespace, w.kind, w.name)):
        if not selection.admits(workload.ref, workload.namespace):
            continue
        policy = rollback_policy_for(workload, policies_for(view, workload))
        state = rollback_state(view, workload)
        if policy is None and state is None:
            continue
        found.append(
            {
                "kind": workload.kind,
                "namespace": workload.namespace,
                "name": workload.name,
                "rollback": summary(state, policy),
            }
        )
    return found


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def explain(
    view: ClusterView,
    *,
    now: datetime,
    forced: For | None = None,
    selection: Selection = Selection(),
) -> dict[str, Any]:
    """Decisions for every selected pod in the view, ordered by namespace and name, and the
    rollback state of the selected workloads that have one.

    A selection that names a namespace or a workload the view does not hold raises
    SelectionError: an empty answer would look like "nothing to do"."""
    pods = sorted(
        (p for p in view.pods() if selection.admits(view.owner_of(p), _namespace(p))),
        key=lambda p: (_namespace(p), p["metadata"]["name"]),
    )
    if selection.name is not None:
        if not any(selection.admits(w.ref, w.namespace) for w in view.workloads()):
            raise SelectionError(f"no workload {selection.describe()}")
    elif (
        selection.namespace is not None
        and not pods
        and view.get("Namespace", "", selection.namespace) is None
    ):
        raise SelectionError(f"no namespace {selection.namespace} (and no pods in it)")
    return {
        "pods": [
            decision_json(decide_pod(view, pod, now=now, path=path_for(pod, forced)))
            for pod in pods
        ],
        "workloads": rollback_json(view, selection),
        "gpu": gpu_json(view, selection),
    }


def gpu_json(view: ClusterView, selection: Selection = Selection()) -> list[dict[str, Any]]:
    """The last GpuReactivePolicy evaluation of each selected workload that has one (its
    record's `status.gpu`, written by the recommender)."""
    found = []
    for workload in view.workloads():
        if not selection.admits(workload.ref, workload.namespace):
            continue
        record = view.recommendations("record", workload.ref)
        status = record.status.gpu if record is not None and record.status else None
        if status is not None:
            found.append((workload.kind, workload.namespace, workload.name, status))
    return gpu_summaries(found)


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def render_text(result: Mapping[str, Any]) -> str:
    """Per pod: a table of target → value → winning policy → annotation key, then the
    outcome and reason."""
    blocks: list[str] = []
    for pod in result["pods"]:
        owner = pod["owner"]
        title = f"{pod['namespace']}/{pod['name']}"
        if owner:
            title += f"  ({owner['kind']} {owner['name']})"
        lines = [title]
        if pod["selected"]:
            rows: list[tuple[str, ...]] = [("TARGET", "VALUE", "POLICY", "ANNOTATION KEY")]
            for s in pod["selected"]:
                policy = f"{s['policyKind']} {s['policyNamespace'] + '/' if s['policyNamespace'] else ''}{s['policyName']}"
                rows.append(
                    (
                        f"{s['container']}.{s['field']}.{s['resource']}",
                        s["value"],
                        policy,
                        s["annotationKey"],
                    )
                )
            lines.extend("  " + line for line in _table(rows))
        verdict = f"  outcome: {pod['outcome']}"
        if pod["reason"]:
            verdict += f"  reason: {pod['reason']}"
        if pod["method"]:
            verdict += f"  method: {pod['method']}"
        lines.append(verdict)
        lines.append(f"  {pod['message']}")
        if pod.get("nextAllowedAt"):
            lines.append(f"  next allowed at: {pod['nextAllowedAt']}")
        proposal = pod.get("proposal")
        if proposal:
            lines.append(
                f"  proposal {proposal['id']}: {describe_resources(proposal['containers'])}"
            )
            lines.append(f"    target: {describe_resources(proposal['target'])}")
        for name, resources in sorted(pod["containers"].items()):
            parts = [
                f"{fld} " + ",".join(f"{r}={q}" for r, q in values.items())
                for fld, values in resources.items()
            ]
            lines.append(f"  {name}: {'; '.join(parts) or 'no resources'}")
        blocks.append("\n".join(lines))
    blocks.extend(_rollback_text(w) for w in result.get("workloads") or [])
    blocks.extend(_gpu_text(g) for g in result.get("gpu") or [])
    return "\n\n".join(blocks) + "\n" if blocks else "no pods\n"


def _rollback_text(workload: Mapping[str, Any]) -> str:
    """A workload's rollback state: policy, mode and turn, failure, next step."""
    state = workload["rollback"]
    policy = state["policy"]
    lines = [f"{workload['kind']} {workload['namespace']}/{workload['name']}  (rollback)"]
    if policy is not None:
        where = f"{policy['namespace']}/" if policy["namespace"] else ""
        lines.append(f"  policy: {policy['kind']} {where}{policy['name']}")
    turns = f"/{state['maxAttempts']}" if state["maxAttempts"] is not None else ""
    lines.append(f"  state: {state['mode']}  turn {state['turn']}{turns}")
    if state["failureReason"]:
        lines.append(f"  failure: {state['failureReason']}: {state['failureMessage']}")
    step = f"  next: {state['nextStep']}"
    if state["nextStepAt"]:
        step += f" at {state['nextStepAt']}"
    lines.append(step)
    return "\n".join(lines)


def _gpu_text(gpu: Mapping[str, Any]) -> str:
    """A workload's last GPU reactive evaluation: its values, the metric behind them, why."""
    values = ",".join(f"{c}={v}" for c, v in sorted(gpu["values"].items())) or "none"
    base = ",".join(f"{c}={v}" for c, v in sorted(gpu["baseline"].items())) or "-"
    lines = [f"{gpu['kind']} {gpu['namespace']}/{gpu['name']}  (gpu reactive: {gpu['policy']})"]
    driver = f"  driving metric: {gpu['drivingMetric']}" if gpu["drivingMetric"] else ""
    lines.append(f"  values: {values}  baseline: {base}{driver}")
    lines.append(f"  {gpu['reason']}: {gpu['message']}")
    return "\n".join(lines)
