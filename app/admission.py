"""The admission decision for a new pod: resources, args and the annotations to write.

The webhook turns an AdmissionResult into a JSON patch; every choice is made here (and in
`app/decide.py`), never in the webhook.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from app.annotations import ARGS_KEY, MIRROR_POD, POD_INFO, dumps
from app.args import apply_arg_ops
from app.decide import (
    PodDecision,
    decide_pod,
    pod_gate,
    skipped_containers,
    workload_for,
)
from app.owners import WorkloadRef
from app.view import ClusterView
from app.workloads import target_containers


@dataclass(frozen=True, slots=True)
class AdmissionResult:
    """What the webhook applies to a new pod."""

    outcome: str
    reason: str | None
    message: str
    owner: WorkloadRef | None
    #: container → the full desired {"requests", "limits"} (only containers that change)
    resources: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    #: container → the full new args list (only containers whose args change)
    args: dict[str, list[str]] = field(default_factory=dict)
    #: pod annotations to set; empty when nothing changes
    annotations: dict[str, str] = field(default_factory=dict)
    selected: list[dict[str, str]] = field(default_factory=list)


def _with_namespace(pod: Mapping[str, Any], namespace: str) -> Mapping[str, Any]:
    """A CREATE request's object may lack metadata.namespace; the request carries it."""
    meta = pod.get("metadata") or {}
    if meta.get("namespace") or not namespace:
        return pod
    return {**pod, "metadata": {**meta, "namespace": namespace}}


def _new_args(
    view: ClusterView, pod: Mapping[str, Any], decision: PodDecision, now: datetime
) -> dict[str, list[str]]:
    plan = decision.plan
    if plan is None or plan.args is None:
        return {}
    workload = workload_for(view, pod, decision.owner)
    if workload is None or pod_gate(view, pod, workload, now) is not None:
        return {}
    skip = skipped_containers(pod, workload)
    changed: dict[str, list[str]] = {}
    for name, container in target_containers(pod).items():
        if name in skip:
            continue
        ops = [*plan.args.ops.get("*", []), *plan.args.ops.get(name, [])]
        if not ops:
            continue
        before = [str(a) for a in container.get("args") or []]
        after = apply_arg_ops(before, ops)
        if after != before:
            changed[name] = after
    return changed


def _already_applied(pod: Mapping[str, Any], fingerprint: str | None) -> bool:
    """Re-invocation: the pod carries our info annotation for this very recommendation."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(POD_INFO)
    if not text or fingerprint is None:
        return False
    try:
        return orjson.loads(text).get("fingerprint") == fingerprint
    except (orjson.JSONDecodeError, AttributeError):
        return False


def admit_pod(
    view: ClusterView, pod: Mapping[str, Any], namespace: str, now: datetime
) -> AdmissionResult:
    """Decide a new pod on the admission path of SPEC §6."""
    with view.lock:
        return _admit(view, _with_namespace(pod, namespace), now)


def _admit(view: ClusterView, pod: Mapping[str, Any], now: datetime) -> AdmissionResult:
    if MIRROR_POD in ((pod.get("metadata") or {}).get("annotations") or {}):
        return AdmissionResult(
            "skipped", "MirrorPod", "mirror pods are managed by the kubelet", None
        )
    decision = decide_pod(view, pod, now=now, path="admission")
    # `selected` and `values` are computed on each access: read them once.
    winners = decision.selected
    selected = [s.as_dict() for s in winners]
    if _already_applied(pod, decision.fingerprint):
        return AdmissionResult(
            "skipped",
            "AlreadyApplied",
            "the pod already carries this recommendation",
            decision.owner,
            selected=selected,
        )
    resources = decision.values
    args = _new_args(view, pod, decision, now)
    annotations: dict[str, str] = {}
    if resources or args:
        plan = decision.plan
        assert plan is not None
        keys = sorted({s.annotation_key for s in winners if s.container in resources})
        if args:
            keys.append(ARGS_KEY)
        annotations[POD_INFO] = dumps(
            {"fingerprint": decision.fingerprint, "keys": keys, "containers": resources}
        )
        for key in keys:
            annotations[key] = plan.sync.annotations[key]
    return AdmissionResult(
        outcome=decision.outcome,
        reason=decision.reason,
        message=decision.message,
        owner=decision.owner,
        resources=resources,
        args=args,
        annotations=annotations,
        selected=selected,
    )
