"""The fallback of an in-place resize that cannot finish (SPEC §7)."""

from __future__ import annotations

from datetime import datetime, timedelta

from app.decide.checks import FALLBACK_CHECKS
from app.decide.context import FallbackCase
from app.decide.plan_facts import facts_for
from app.decide.pod_facts import read_pod_facts, workload_for
from app.decide.results import PodDecision
from app.model.kube_types import PodDict
from app.model.workloads import Workload
from app.policy.plans import guardrails, plan_for
from app.store.view import ClusterView


def decide_fallback(view: ClusterView, pod: PodDict, *, now: datetime, cause: str) -> PodDecision:
    """An accepted in-place resize that cannot finish (SPEC §7: Deferred past
    `apply.fallbackAfter`, Infeasible, Error, or a patch the API rejected): evict the pod
    when every contributing strategy allows eviction and a lone replica may be disrupted,
    else blocked. `Paused` holds it like any change; the replacement pod is sized at
    admission from the workload's last applied values. The checks are those of
    `CHECKS` that have a fallback form, in its order."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    containers, current, owner = read_pod_facts(view, pod)
    workload = workload_for(view, pod, owner)
    if workload is None:
        return PodDecision(namespace, name, owner, "skipped", "Unmanaged", "no owner")
    plan = plan_for(view, workload)
    facts = facts_for(view, workload, plan, tuple(containers))

    def stop(reason: str, message: str) -> PodDecision:
        return PodDecision(
            namespace, name, owner, "blocked", reason, message, final=current, plan=plan
        )

    case = FallbackCase(view, pod, workload, facts, now, cause)
    for check in FALLBACK_CHECKS:
        stopped = check(case)
        if stopped is not None:
            return stop(*stopped)
    return PodDecision(
        namespace,
        name,
        owner,
        "apply",
        None,
        f"in-place resize failed ({cause}): evict, the replacement is sized at admission",
        method="evict",
        final=current,
        fingerprint=plan.fingerprint,
        plan=plan,
    )


def fallback_after(view: ClusterView, workload: Workload) -> timedelta:
    """How long a resize the node defers may wait before it falls back: the longest
    `apply.fallbackAfter` of the policies behind the workload's plan (a resize is given
    up only once every policy would)."""
    plan = plan_for(view, workload)
    policies = {id(p): p for p in plan.sync.sources.values()}.values()
    spans = [guardrails(view, p).fallback_after for p in policies]
    return max(spans, default=guardrails(view, None).fallback_after)
