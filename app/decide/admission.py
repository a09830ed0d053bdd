"""The admission decision for a new pod: resources, args and the annotations to write.

The webhook turns an AdmissionResult into a JSON patch; every choice is made here (and in
`app/decide/`), never in the webhook.

Decisions are memoised per pod template: the pods a controller creates for one workload
are alike, so the answer for one serves the next ones while nothing it read has changed.
A template is memoised from its second pod on, so one seen once keeps nothing.
What makes a memoised answer valid, and what ends it, is in `_template_key`, `_Memo` and
docs/decisions.md ("Admission decisions are memoised per pod template").
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from app.decide import (
    PodDecision,
    decide_pod,
    pod_gate,
    skipped_containers,
    workload_for,
)
from app.decide.plan_facts import strategy_for
from app.model.annotations import ARGS_KEY, MIRROR_POD, POD_INFO, dumps
from app.model.args import apply_arg_ops
from app.model.crd import AutomationStrategySpec
from app.model.horizon import Horizon
from app.model.kube_types import PodDict, as_pod
from app.model.owners import WorkloadRef
from app.model.quantities import GPU_FRACTION
from app.model.workloads import Workload, target_containers
from app.policy.kai import kai_change
from app.policy.plans import WorkloadPlan, plan_for
from app.store.inputs import admission_versions
from app.store.slim import kept_annotation
from app.store.view import ClusterView


@dataclass(slots=True)
class AdmissionResult:
    """What the webhook applies to a new pod. A result may be memoised and handed to
    every pod of the same template: readers never change it. (Not frozen: one is built
    for every decision, and a frozen dataclass's constructor costs several times more.)"""

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
    #: pod labels to set (a KAI queue, app/policy/kai.py); empty when none
    labels: dict[str, str] = field(default_factory=dict)
    #: the winning policy of every target (`PodDecision.selected_json`): shared by every
    #: decision of the workload's plan, so a reader may key what it derives on its identity
    selected: tuple[dict[str, str], ...] = ()
    #: the pod-template digest of a memoised result (`_template_key`): every pod it answers
    #: has the same containers and kerf annotations, so what is built from the result and
    #: those alone (the webhook's patch) serves them all; None for a one-off decision
    template: bytes | None = field(default=None, compare=False)


def _with_namespace(pod: Mapping[str, Any], namespace: str) -> PodDict:
    """The request's pod, typed for the decisions. A CREATE request's object may lack
    metadata.namespace; the request carries it."""
    meta = pod.get("metadata") or {}
    if meta.get("namespace") or not namespace:
        return as_pod(pod)
    return as_pod({**pod, "metadata": {**meta, "namespace": namespace}})


def _new_args(
    view: ClusterView, pod: PodDict, decision: PodDecision, clock: Horizon
) -> dict[str, list[str]]:
    plan = decision.plan
    if plan is None or plan.args is None:
        return {}
    workload = workload_for(view, pod, decision.owner)
    if workload is None or pod_gate(view, pod, workload, clock) is not None:
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


def _already_applied(pod: PodDict, fingerprint: str | None) -> bool:
    """Re-invocation: the pod carries our info annotation for this very recommendation."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(POD_INFO)
    if not text or fingerprint is None:
        return False
    try:
        return bool(orjson.loads(text).get("fingerprint") == fingerprint)
    except (orjson.JSONDecodeError, AttributeError):
        return False


def admit_pod(
    view: ClusterView,
    pod: Mapping[str, Any],
    namespace: str,
    now: datetime,
    *,
    memo: bool = True,
) -> AdmissionResult:
    """Decide a new pod on the admission path of SPEC §6.

    The pod is one parsed from JSON (an AdmissionReview's object). With `memo` (the
    default) a decision made for an earlier pod of the same template is reused while it
    is still the decision a fresh one would make; `memo=False` always decides afresh.
    """
    with view.lock:
        pod = _with_namespace(pod, namespace)
        if memo:
            return _memoised(view, pod, now)
        return _admit(view, pod, Horizon(now))


@dataclass(slots=True)
class _Memo:
    """A remembered decision and what it is valid for: the same pod template (its key),
    the same plan (where it is kept), the same `app.store.inputs.admission_versions` and a time
    inside the span over which its comparisons with the clock keep their answers. Never
    changed once built (not frozen, for the same reason as `AdmissionResult`)."""

    result: AdmissionResult
    inputs: tuple[object, ...]
    start: datetime | None
    end: datetime | None

    def holds(self, inputs: tuple[object, ...], now: datetime) -> bool:
        return (
            self.inputs == inputs
            and (self.start is None or now >= self.start)
            and (self.end is None or now < self.end)
        )


def _template_key(pod: PodDict) -> bytes | None:
    """A digest of everything of the pod an admission decision reads, and nothing that
    differs between pods of one template (name, generateName, uid, labels): the
    namespace, kerf's annotations (pause, skip-containers, the pod info of a
    reinvocation; the mirror annotation is handled before), the containers and init
    containers whole (names, resources, command, args, env, resize and restart policy:
    QoS and JVM heap come from them), the node name and the owner references.

    Labels are left out: the decision reads them only to stand in for a workload the view
    does not hold, which is never memoised, and the owner is resolved afresh for every
    pod. None when the pod does not serialise (no memo then).
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    annotations = meta.get("annotations") or {}
    try:
        text = orjson.dumps(
            (
                meta.get("namespace"),
                [(k, v) for k, v in annotations.items() if kept_annotation(k)],
                spec.get("containers"),
                spec.get("initContainers"),
                spec.get("nodeName"),
                meta.get("ownerReferences"),
            )
        )
    except (TypeError, AttributeError, orjson.JSONEncodeError):
        return None
    # SHA-256 rather than BLAKE2b: OpenSSL's uses the CPU's SHA instructions where it has
    # them (x86 since Ice Lake and Zen, arm64), which beats hashlib's portable BLAKE2b.
    return hashlib.sha256(text).digest()


def _memoised(view: ClusterView, pod: PodDict, now: datetime) -> AdmissionResult:
    """The decision for the pod, from the plan's memo when a valid one is there."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    owner = None if MIRROR_POD in annotations else view.owner_of(pod)
    workload = view.workload(owner) if owner is not None else None
    key = _template_key(pod) if workload is not None else None
    if workload is None or key is None:
        return _admit(view, pod, Horizon(now))
    caches = view.caches
    plan: WorkloadPlan = plan_for(view, workload)
    inputs = admission_versions(caches, workload.ref)
    found = caches.recall(plan, key)
    if isinstance(found, _Memo) and found.holds(inputs, now):
        caches.count(hit=True)
        return found.result
    caches.count(hit=False)
    clock = Horizon(now)
    if found is None and caches.first_sighting(key):
        return _admit(view, pod, clock, workload=workload)
    result = _admit(view, pod, clock, template=key, workload=workload)
    # Kept only while the plan is the workload's (`DecisionCaches.remember`).
    caches.remember(workload.ref.key, plan, key, _Memo(result, inputs, clock.start, clock.end))
    return result


def memo_counts(view: ClusterView) -> tuple[int, int]:
    """(admission decisions answered from the memo, decided afresh) over the view."""
    return view.caches.memo_hits, view.caches.memo_misses


def _admit(
    view: ClusterView,
    pod: PodDict,
    clock: Horizon,
    *,
    template: bytes | None = None,
    workload: Workload | None = None,
) -> AdmissionResult:
    if MIRROR_POD in ((pod.get("metadata") or {}).get("annotations") or {}):
        return AdmissionResult(
            "skipped", "MirrorPod", "mirror pods are managed by the kubelet", None
        )
    decision = decide_pod(view, pod, now=clock, path="admission", workload=workload)
    # `values` is computed on each access: read it once.
    winners = decision.selected
    selected = decision.selected_json
    if _already_applied(pod, decision.fingerprint):
        return AdmissionResult(
            "skipped",
            "AlreadyApplied",
            "the pod already carries this recommendation",
            decision.owner,
            selected=selected,
            template=template,
        )
    kai = kai_change(
        decision.values,
        ((pod.get("metadata") or {}).get("annotations") or {}).get(GPU_FRACTION),
        _fraction_strategy(view, decision),
    )
    resources = kai.resources
    args = _new_args(view, pod, decision, clock)
    annotations: dict[str, str] = dict(kai.annotations)
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
        labels=kai.labels,
        selected=selected,
        template=template,
    )


def _fraction_strategy(view: ClusterView, decision: PodDecision) -> AutomationStrategySpec | None:
    """The strategy of the policy whose KAI `gpu-fraction` the decision selected."""
    for target, candidate in decision.selection.items():
        if target.resource == GPU_FRACTION and candidate.policy is not None:
            strategy = strategy_for(view, candidate.policy)
            return strategy.spec if strategy is not None else None
    return None
