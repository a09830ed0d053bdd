"""The policy sync (SPEC §1): one pure function from policies, recommendations and rollback
state to a workload's recommendation annotations.

The cluster view runs it in memory whenever an input changes (webhook and resize loop read
their candidates from its result); the reconciler publishes the same result onto the
workload. Every path goes through `sync_workload`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.model.annotations import (
    ARGS_KEY,
    FIELDS,
    PayloadError,
    decode_payload,
    dumps,
    encode_fixed,
    encode_owned,
    fixed_key,
    policy_key,
)
from app.model.crd import (
    ContainerArgsPolicy,
    GpuReactivePolicy,
    KerfResource,
    ProactivePolicy,
    RollbackPolicy,
    StaticPolicy,
)
from app.model.recommendations import RecommendationRow
from app.model.workloads import ContainerResources, Workload
from app.policy.rollback import RollbackState, choose_rollback_policy, restore_target
from app.store.scope import container_in_scope, scope_matches

#: Kinds whose values are published as desired-resource annotations.
RESOURCE_POLICY_KINDS: tuple[str, ...] = (
    "StaticPolicy",
    "ClusterStaticPolicy",
    "ProactivePolicy",
    "ClusterProactivePolicy",
    "GpuReactivePolicy",
    "ClusterGpuReactivePolicy",
)
ROLLBACK_KINDS: tuple[str, ...] = ("RollbackPolicy", "ClusterRollbackPolicy")
#: Kinds whose values come from the recommendation source (SPEC §4).
PROACTIVE_KINDS = frozenset({"ProactivePolicy", "ClusterProactivePolicy"})


@dataclass(frozen=True, slots=True)
class SyncResult:
    """Annotations kerf owns on one workload, and the policy behind each key."""

    annotations: dict[str, str] = field(default_factory=dict)
    sources: dict[str, KerfResource] = field(default_factory=dict)


def policy_matches(policy: KerfResource, workload: Workload) -> bool:
    """Whether a policy's scope selects the workload (namespaced kinds: own namespace only)."""
    if not type(policy).cluster_scoped and policy.metadata.namespace != workload.namespace:
        return False
    scope = getattr(policy.spec, "scope", None)  # type: ignore[attr-defined]
    if scope is None:
        return True
    return scope_matches(
        scope,
        namespace=workload.namespace,
        workload_kind=workload.kind,
        workload_labels=workload.labels,
    )


def policy_rank(policy: KerfResource) -> tuple[Any, ...]:
    """Which one policy of a kind contributes through a fixed key: higher weight, then
    older, then smaller namespace/name."""
    created = policy.metadata.creation_timestamp
    return (
        -getattr(policy.spec, "weight", 0),  # type: ignore[attr-defined]
        created.timestamp() if created else float("-inf"),
        policy.metadata.namespace or "",
        policy.metadata.name,
    )


def args_policy_rank(policy: KerfResource, workload: Workload) -> tuple[Any, ...]:
    """The selection order for args policies (one is selected): weight, then a policy that
    names one of the workload's containers over one with only `*`, then older, then name."""
    names = policy.spec.containers  # type: ignore[attr-defined]
    exact = any(name in names for name in workload.containers)
    weight, created, namespace, name = policy_rank(policy)
    return (weight, not exact, created, namespace, name)


def _scoped(policy: KerfResource, containers: Mapping[str, Any], workload: Workload) -> list[str]:
    """Container entries a policy may publish: `*` becomes the scope's containers when the
    scope names them, so a wildcard never reaches a container outside the scope."""
    scope = policy.spec.scope  # type: ignore[attr-defined]
    names: list[str] = []
    for name in containers:
        if name == "*" and scope.containers is not None:
            names.extend(c for c in scope.containers if c not in containers)
        elif name == "*" or container_in_scope(scope, name):
            names.append(name)
    return names


def policy_values(
    policy: KerfResource,
    workload: Workload,
    rows: Mapping[str, RecommendationRow],
) -> dict[str, dict[str, dict[str, str]]]:
    """{field: {container: {resource: quantity}}} a resource policy proposes for a workload."""
    result: dict[str, dict[str, dict[str, str]]] = {f: {} for f in FIELDS}
    if isinstance(policy, StaticPolicy):
        entries = policy.spec.resources.containers
        for name in _scoped(policy, entries, workload):
            values = entries.get(name) or entries["*"]
            for fld in FIELDS:
                if getattr(values, fld):
                    result[fld][name] = dict(getattr(values, fld))
    elif isinstance(policy, ProactivePolicy):
        for name in _scoped(policy, rows, workload):
            row = rows[name]
            if row.requests:
                result["requests"][name] = dict(row.requests)
            if row.limits:
                result["limits"][name] = dict(row.limits)
    elif isinstance(policy, GpuReactivePolicy):
        # Reactive GPU values are computed outside the sync (from GPU metrics) and
        # published on the workload; the sync carries them over for the policy that
        # still matches, in the key format of the moment.
        for fld in FIELDS:
            published = published_containers(workload, policy, fld)
            for name in _scoped(policy, published, workload):
                if name in published:
                    result[fld][name] = published[name]
    return result


def published_containers(
    workload: Workload, policy: KerfResource, field: str
) -> dict[str, dict[str, str]]:
    """The values a policy has published on the workload for one field: its policy-owned
    key, else its kind's fixed key (both formats are read, so a change of the
    multi-policy flag loses nothing). Unreadable payloads count as absent."""
    namespace = policy.metadata.namespace or ""
    for key in (
        policy_key(policy.kind, namespace, policy.metadata.name, field),
        fixed_key(policy.kind, field),
    ):
        text = workload.annotations.get(key)
        if text is None:
            continue
        try:
            return decode_payload(key, text).containers
        except PayloadError:
            return {}
    return {}


def _publish(
    result: SyncResult,
    policy: KerfResource,
    values: dict[str, dict[str, dict[str, str]]],
    multi_policy: bool,
) -> None:
    for fld, containers in values.items():
        if not containers:
            continue
        key, text = policy_annotation(policy, fld, containers, multi_policy)
        result.annotations[key] = text
        result.sources[key] = policy


def policy_annotation(
    policy: KerfResource,
    fld: str,
    containers: dict[str, dict[str, str]],
    multi_policy: bool,
) -> tuple[str, str]:
    """The annotation (key, text) that carries a policy's values of one field to the
    selection: under the policy's own key with its identity when policies may share a
    kind (`multi_policy`), else under the kind's fixed key."""
    if not multi_policy:
        return fixed_key(policy.kind, fld), encode_fixed(containers)
    namespace = policy.metadata.namespace or ""
    return policy_key(policy.kind, namespace, policy.metadata.name, fld), encode_owned(
        kind=policy.kind,
        namespace=namespace,
        name=policy.metadata.name,
        generation=policy.metadata.generation,
        created_at=policy.metadata.creation_timestamp,
        containers=containers,
    )


def sync_workload(
    workload: Workload,
    policies: Iterable[KerfResource],
    rows: Mapping[str, RecommendationRow],
    rollback: RollbackState | None,
    *,
    multi_policy: bool,
) -> SyncResult:
    """The recommendation annotations of one workload.

    `policies` may hold any kerf objects (they are filtered by kind and scope here);
    `rows` are the source's rows for this workload by container.
    """
    result = SyncResult()
    by_kind: dict[str, list[KerfResource]] = {}
    for policy in policies:
        if policy_matches(policy, workload):
            by_kind.setdefault(policy.kind, []).append(policy)

    for kind in RESOURCE_POLICY_KINDS:
        matching = sorted(by_kind.get(kind, ()), key=policy_rank)
        if not multi_policy:
            matching = matching[:1]
        for policy in matching:
            _publish(result, policy, policy_values(policy, workload, rows), multi_policy)

    chosen = choose_rollback_policy(
        p for k in ROLLBACK_KINDS for p in by_kind.get(k, ()) if isinstance(p, RollbackPolicy)
    )
    if chosen is not None and rollback is not None and rollback.restoring:
        target = restore_target(chosen, rollback, dict(workload.containers))
        if target:
            _publish_rollback(result, chosen, target)
    elif chosen is not None and rollback is None:
        # Restore values published without a state annotation (written by hand or by an
        # older writer) stay in force while a rollback policy matches.
        restore = {fld: published_containers(workload, chosen, fld) for fld in FIELDS}
        target = {
            name: {fld: restore[fld].get(name, {}) for fld in FIELDS}
            for name in {n for values in restore.values() for n in values}
        }
        if target:
            _publish_rollback(result, chosen, target)

    args_policies = sorted(
        by_kind.get("ContainerArgsPolicy", ()), key=lambda p: args_policy_rank(p, workload)
    )
    if args_policies:
        chosen_args = args_policies[0]
        assert isinstance(chosen_args, ContainerArgsPolicy)
        ops = {
            name: [op.model_dump(exclude_none=True) for op in spec.args]
            for name, spec in chosen_args.spec.containers.items()
            if name == "*" or container_in_scope(chosen_args.spec.scope, name)
        }
        if ops:
            result.annotations[ARGS_KEY] = dumps({"containers": ops})
            result.sources[ARGS_KEY] = chosen_args
    return result


def _publish_rollback(
    result: SyncResult, policy: KerfResource, target: Mapping[str, ContainerResources]
) -> None:
    for fld in FIELDS:
        containers = {name: dict(res[fld]) for name, res in target.items() if res.get(fld)}
        if containers:
            key = fixed_key("RollbackPolicy", fld)
            result.annotations[key] = encode_fixed(containers)
            result.sources[key] = policy
