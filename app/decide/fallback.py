"""The fallback of an in-place resize that cannot finish (SPEC §7)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.annotations import PAUSE_UNTIL
from app.decide.method import _common_methods
from app.decide.plan_facts import _plan_facts
from app.decide.pod_facts import paused_by, workload_for
from app.decide.results import PodDecision
from app.view import ClusterView


def decide_fallback(
    view: ClusterView, pod: Mapping[str, Any], *, now: datetime, cause: str
) -> PodDecision:
    """An accepted in-place resize that cannot finish (SPEC §7: Deferred past
    `apply.fallbackAfter`, Infeasible, Error, or a patch the API rejected): evict the pod
    when every contributing strategy allows eviction and a lone replica may be disrupted,
    else blocked. `Paused` holds it like any change; the replacement pod is sized at
    admission from the workload's last applied values."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    containers, current, owner = view.pod_facts(pod)
    workload = workload_for(view, pod, owner)
    if workload is None:
        return PodDecision(namespace, name, owner, "skipped", "Unmanaged", "no owner")
    plan = view.plan_for(workload)
    facts = _plan_facts(view, workload, plan, tuple(containers))

    def stop(reason: str, message: str) -> PodDecision:
        return PodDecision(
            namespace, name, owner, "blocked", reason, message, final=current, plan=plan
        )

    if paused := paused_by(view, pod, workload, now):
        return stop("Paused", f"paused by the {paused} annotation {PAUSE_UNTIL}")
    if "evict" not in _common_methods(facts.strategies):
        return stop(cause, f"in-place resize failed ({cause}) and eviction is not allowed")
    if workload.replicas == 1 and not all(
        view.guardrails(p).allow_single_replica_disruption for p in facts.policies
    ):
        return stop(
            "SingleReplicaUnsafe", f"in-place resize failed ({cause}); one replica, no eviction"
        )
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
