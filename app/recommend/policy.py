"""Per-policy recommender settings: the `recommender` block of the proactive policy that
covers a workload, laid over the flags of `kerf recommend`.

Among the ProactivePolicies and ClusterProactivePolicies whose scope selects the workload
and that carry a block, the first in selection order wins (policy-type priority, then
weight, older, smaller namespace/name); each field it leaves out keeps the flag's value.
"""

from __future__ import annotations

from dataclasses import replace

from app.model.crd import KerfResource, ProactivePolicy, RecommenderSettings
from app.model.durations import parse_duration
from app.model.workloads import Workload
from app.policy.plans import policies_for, policy_priorities
from app.policy.sync import policy_matches, policy_rank
from app.recommend.rules import RuleSettings
from app.store.view import ClusterView


def settings_policy(view: ClusterView, workload: Workload) -> ProactivePolicy | None:
    """The proactive policy whose `recommender` block sizes `workload`, if any."""
    candidates = [
        p
        for p in policies_for(view, workload)
        if isinstance(p, ProactivePolicy)
        and p.spec.recommender is not None
        and policy_matches(p, workload)
    ]
    if not candidates:
        return None
    priority = policy_priorities(view)

    def rank(policy: KerfResource) -> tuple[object, ...]:
        return (-priority.get(policy.kind, 0), *policy_rank(policy))

    return min(candidates, key=rank)


def apply_block(base: RuleSettings, block: RecommenderSettings) -> RuleSettings:
    """`base` with every field the block sets replaced (percentages become fractions)."""
    learning_hours = base.learning_hours
    if block.learning_period is not None:
        learning_hours = parse_duration(block.learning_period).total_seconds() / 3600
    return replace(
        base,
        cpu_percentile=base.cpu_percentile
        if block.cpu_percentile is None
        else block.cpu_percentile / 100,
        memory_headroom=base.memory_headroom
        if block.memory_headroom_percent is None
        else block.memory_headroom_percent / 100,
        oom_factor=base.oom_factor if block.oom_bump_factor is None else block.oom_bump_factor,
        limits=base.limits if block.limits is None else block.limits,
        learning_hours=learning_hours,
    )


def rules_for(view: ClusterView, workload: Workload, base: RuleSettings) -> RuleSettings:
    """The rules that size `workload`: its policy's block over `base` (the flags)."""
    policy = settings_policy(view, workload)
    if policy is None or policy.spec.recommender is None:
        return base
    return apply_block(base, policy.spec.recommender)
