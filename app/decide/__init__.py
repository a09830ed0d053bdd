"""The decision for one pod: select, filter through enablement, guard (SPEC §5, §6, §7).

`decide_pod` is the only place a pod decision is made; the webhook (admission path),
the reconciler (running path) and `kerf explain` all call it. Checks run in the spec's
order and the first match decides; per-value rules drop single parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal

from app.decide.actions import build_actions
from app.decide.bounds import breaches_bounds
from app.decide.checks import HUB_UNREACHABLE, pod_gate, run_checks
from app.decide.context import Context, Path
from app.decide.fallback import decide_fallback, fallback_after
from app.decide.method import resize_restarts
from app.decide.plan_facts import as_recorded, facts_for
from app.decide.pod_facts import (
    as_horizon,
    hpa_coupled_resources,
    is_guaranteed,
    is_paused,
    is_protected,
    jvm_heap_bytes,
    oom_killed_since,
    paused_by,
    pod_containers,
    read_pod_facts,
    skipped_containers,
    workload_for,
)
from app.decide.results import (
    AuditProposal,
    Filtered,
    PodDecision,
    SelectedValue,
    describe_resources,
    format_resources,
)
from app.model.crd import LastApplied
from app.model.horizon import Horizon
from app.model.kube_types import ContainerDict, PodDict
from app.model.workloads import Workload
from app.policy.plans import WorkloadPlan, plan_for
from app.store.view import ClusterView

__all__ = [
    "AuditProposal",
    "Filtered",
    "PodDecision",
    "SelectedValue",
    "decide_fallback",
    "decide_pod",
    "fallback_after",
    "describe_resources",
    "format_resources",
    "hpa_coupled_resources",
    "is_guaranteed",
    "is_paused",
    "is_protected",
    "jvm_heap_bytes",
    "oom_killed_since",
    "paused_by",
    "read_pod_facts",
    "pod_gate",
    "skipped_containers",
    "workload_for",
]

#: Every row of the workload's recommendation was invalid (SPEC §4).
INVALID_RECOMMENDATION = "InvalidRecommendation"

#: Kubex holds every container the workload has a row for (`KubexAutomation` false, with
#: GlobalConfiguration's `respectKubexAutomation` on): a configured exclusion, skipped.
KUBEX_AUTOMATION_DISABLED = "KubexAutomationDisabled"

#: The values name only containers the pod does not have.
NO_SUCH_CONTAINER = "NoSuchContainer"

#: Reasons under which a new pod keeps its manifest as it is (not even the baseline).
UNTOUCHED = frozenset({"Paused", "ProtectedNamespace", "AutomationDisabled", "Audit"})


def decide_pod(
    view: ClusterView,
    pod: PodDict,
    *,
    now: datetime | Horizon,
    path: Path,
    workload: Workload | None = None,
    recorded: LastApplied | None = None,
) -> PodDecision:
    """The decision for one pod on the admission path (a new pod) or the running path.
    Given a `Horizon` for `now`, it ends up holding the span of time over which the
    decision stays the same (`app/model/horizon.py`). A caller that has already resolved the
    pod's workload in the view passes it as `workload` (it is not looked up again).
    `recorded`: the last change as the status will record it (`as_recorded`), when the
    caller is about to write it."""
    with view.lock:
        return _decide_pod(
            view, pod, clock=as_horizon(now), path=path, known=workload, recorded=recorded
        )


def _decide_pod(
    view: ClusterView,
    pod: PodDict,
    *,
    clock: Horizon,
    path: Path,
    known: Workload | None,
    recorded: LastApplied | None = None,
) -> PodDecision:
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or meta.get("generateName") or "")
    if known is None:
        containers, current, owner = read_pod_facts(view, pod)
        workload = workload_for(view, pod, owner)
    else:
        containers, current = pod_containers(view, pod)
        workload, owner = known, known.ref
    if workload is None:
        return PodDecision(
            namespace,
            name,
            owner,
            "skipped",
            "Unmanaged",
            "the pod has no controller owner",
            final=current,
        )
    plan = plan_for(view, workload)
    if not plan.candidates:
        outcome, reason, message = _why_no_values(plan)
        return PodDecision(
            namespace, name, owner, outcome, reason, message, final=current, plan=plan
        )

    skip = skipped_containers(pod, workload)
    names = tuple(c for c in containers if c not in skip)
    facts = facts_for(view, workload, plan, names)
    if recorded is not None:
        facts = as_recorded(facts, recorded)
    selected = facts.selected
    if not selected:
        absent = _absent_containers(plan, containers)
        if absent:
            return PodDecision(
                namespace,
                name,
                owner,
                "skipped",
                NO_SUCH_CONTAINER,
                f"the values are for container(s) {', '.join(absent)}, which the pod does "
                f"not have (it has {', '.join(containers) or 'none'})",
                final=current,
                plan=plan,
            )
    ctx = Context(view, pod, workload, plan, facts, clock, path, containers, current)
    fp = plan.fingerprint
    stop = run_checks(ctx, build_actions(ctx))
    if stop is not None:
        # At admission "current" is the baseline: a new pod of a workload whose change is
        # blocked or skipped gets the live (last applied) values, not its manifest's —
        # unless the pod is not to be touched at all.
        kept = ctx.baseline if path == "admission" and stop.reason not in UNTOUCHED else current
        if kept is not current and breaches_bounds(view, pod, namespace, current, kept):
            kept = current
        # An approved proposal that a later check holds (the cooldown between steps) is
        # still shown, with its schedule.
        proposal = ctx.proposal if stop.reason == "Audit" or ctx.approved_id else None
        return PodDecision(
            namespace,
            name,
            owner,
            stop.outcome,
            stop.reason,
            stop.message,
            final=kept,
            changed=tuple(sorted(c for c in kept if kept[c] != current[c])),
            selection=selected,
            selected=facts.winners,
            selected_json=facts.winners_json,
            dropped=ctx.dropped,
            filtered=tuple(ctx.filtered),
            next_allowed_at=stop.next_allowed_at,
            fingerprint=fp,
            plan=plan,
            proposal_id=proposal.id if proposal else None,
            proposal=proposal.step if proposal else {},
            proposal_target=proposal.target if proposal else {},
            proposal_target_id=proposal.target_id if proposal else "",
            proposal_schedule=proposal.schedule if proposal else None,
        )
    final = ctx.final()
    changed = {a.target.container for a in ctx.actions}
    notes = "; ".join(
        [f"{t.container}.{t.field}.{t.resource}: {r}" for t, r in ctx.dropped]
        + list(dict.fromkeys(f.message for f in ctx.filtered))
        + [f"{INVALID_RECOMMENDATION}: {w}" for w in plan.sources.invalid]
        + ([f"{KUBEX_AUTOMATION_DISABLED}: {_held(plan)}"] if plan.sources.held else [])
    )
    return PodDecision(
        namespace,
        name,
        owner,
        "apply",
        None,
        f"{len(ctx.actions)} value(s) to set" + (f" (left: {notes})" if notes else ""),
        final=final,
        method=ctx.method,
        restarts=ctx.running and resize_restarts(ctx),
        changed=tuple(sorted(changed)),
        selection=selected,
        selected=facts.winners,
        selected_json=facts.winners_json,
        dropped=ctx.dropped,
        filtered=tuple(ctx.filtered),
        fingerprint=fp,
        plan=plan,
        proposal_id=ctx.approved_id,
    )


def _why_no_values(plan: WorkloadPlan) -> tuple[Literal["blocked", "skipped"], str, str]:
    """Outcome, reason and message of a workload no policy publishes values for: the
    proactive values wait for a ConfigMap that did not load, its rows were all invalid,
    Kubex holds its containers, or no policy matches it."""
    news = plan.sources
    if news.unreachable:
        return "blocked", HUB_UNREACHABLE, "; ".join(news.unreachable)
    if news.invalid:
        return "blocked", INVALID_RECOMMENDATION, "; ".join(news.invalid)
    if news.held:
        return "skipped", KUBEX_AUTOMATION_DISABLED, _held(plan)
    return "skipped", "NoMatchingPolicy", "no policy publishes values for this workload"


def _held(plan: WorkloadPlan) -> str:
    """Why the containers Kubex holds get no recommended values."""
    return (
        f"Kubex's recommendation sets KubexAutomation false for container(s) "
        f"{', '.join(plan.sources.held)} (GlobalConfiguration respectKubexAutomation is on)"
    )


def _absent_containers(plan: WorkloadPlan, containers: Mapping[str, ContainerDict]) -> list[str]:
    """The containers the plan has values for that the pod does not have, when the plan
    names none the pod has (the values were written for another pod template)."""
    named = {c.container for c in plan.candidates}
    if "*" in named or any(name in containers for name in named):
        return []
    return sorted(named)
