"""Selection (SPEC §5, seed policy-evaluation.txt): candidates per target, ranked.

Rank, first difference wins: policy-type priority, policy weight, exact container over
`"*"`, older creation time (only between candidates of the same policy kind; a payload
without a timestamp ranks older), lexically smaller physical annotation key.

"Older only within one kind" is not a total order on its own (a cycle is possible across
three candidates), so it is applied as an elimination: among the candidates tied on the
first three criteria, each kind keeps only its oldest; the smallest key among those left
wins. The result does not depend on the order candidates arrive in.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from app.model.annotations import ARGS_KEY, PayloadError, decode_payload, parse_key
from app.model.crd import DEFAULT_PRECEDENCE, KerfResource, PolicyEvaluation
from app.model.quantities import QuantityError, parse_resource

NEG_INF = float("-inf")


@dataclass(frozen=True, slots=True)
class Target:
    """One selectable value: a container's request or limit of one resource."""

    container: str
    field: str
    resource: str


@dataclass(frozen=True, slots=True)
class Candidate:
    """A value one recommendation key proposes for a target (container may be `*`)."""

    container: str
    field: str
    resource: str
    value: str
    amount: int
    kind: str
    priority: int
    weight: int
    created_at: float  # POSIX seconds; -inf for payloads without a timestamp
    key: str
    policy: KerfResource | None

    @property
    def exact(self) -> bool:
        """True for a named container, False for `*`."""
        return self.container != "*"


def priorities(evaluation: PolicyEvaluation | None) -> dict[str, int]:
    """Policy-type priority by kind; the defaults when the singleton is absent."""
    if evaluation is None:
        return dict(DEFAULT_PRECEDENCE)
    return {entry.type: entry.priority for entry in evaluation.spec.precedence}


def extract_candidates(
    annotations: Mapping[str, str],
    sources: Mapping[str, KerfResource],
    priority_of: Mapping[str, int],
) -> tuple[list[Candidate], list[str]]:
    """Candidates from recommendation annotations (both key formats), and warnings for
    payloads or values that cannot be read (those are left out, the rest stay)."""
    candidates: list[Candidate] = []
    warnings: list[str] = []
    for key, text in annotations.items():
        info = parse_key(key)
        if info is None:
            continue
        try:
            payload = decode_payload(key, text)
        except PayloadError as exc:
            warnings.append(str(exc))
            continue
        policy = sources.get(key)
        kind = policy.kind if policy is not None else (payload.policy_kind or info.kind)
        weight = getattr(policy.spec, "weight", 0) if policy is not None else 0  # type: ignore[attr-defined]
        created = payload.created_at.timestamp() if payload.created_at else NEG_INF
        priority = priority_of.get(kind, 0)
        for container, resources in payload.containers.items():
            for resource, value in resources.items():
                try:
                    amount = parse_resource(resource, value)
                except QuantityError as exc:
                    warnings.append(f"{key}: {container}.{resource}: {exc}")
                    continue
                candidates.append(
                    Candidate(
                        container=container,
                        field=info.field,
                        resource=resource,
                        # kept by every workload's plan, and the same few values recur
                        # across a cluster's workloads: one copy each
                        value=sys.intern(value),
                        amount=amount,
                        kind=kind,
                        priority=priority,
                        weight=weight,
                        created_at=created,
                        key=key,
                        policy=policy,
                    )
                )
    return candidates, warnings


def best_candidate(group: Iterable[Candidate]) -> Candidate:
    """The winner among candidates for one target (see the module docstring)."""
    items = list(group)
    top = max((c.priority, c.weight, c.exact) for c in items)
    tier = [c for c in items if (c.priority, c.weight, c.exact) == top]
    oldest: dict[str, float] = {}
    for c in tier:
        if c.created_at < oldest.get(c.kind, float("inf")):
            oldest[c.kind] = c.created_at
    survivors = [c for c in tier if c.created_at == oldest[c.kind]]
    return min(survivors, key=lambda c: c.key)


def select(candidates: Iterable[Candidate], containers: Iterable[str]) -> dict[Target, Candidate]:
    """The winning candidate for every target of the given containers."""
    names = list(containers)
    known = set(names)
    groups: dict[Target, list[Candidate]] = {}
    for c in candidates:
        if c.container == "*":
            for name in names:
                groups.setdefault(Target(name, c.field, c.resource), []).append(c)
        elif c.container in known:
            groups.setdefault(Target(c.container, c.field, c.resource), []).append(c)
    return {target: best_candidate(group) for target, group in groups.items()}


@dataclass(frozen=True, slots=True)
class ArgsSelection:
    """The args operations of the one selected ContainerArgsPolicy."""

    ops: dict[str, list[dict[str, Any]]]  # container name or "*" → [{name, operation, value?}]
    policy: KerfResource | None


def select_args(
    annotations: Mapping[str, str], sources: Mapping[str, KerfResource]
) -> tuple[ArgsSelection | None, list[str]]:
    """The selected args policy payload (the sync publishes exactly one), or None."""
    text = annotations.get(ARGS_KEY)
    if text is None:
        return None, []
    try:
        value = orjson.loads(text)
        ops = value["containers"]
        if not isinstance(ops, dict) or not all(isinstance(v, list) for v in ops.values()):
            raise TypeError("containers must map names to lists")
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        return None, [f"{ARGS_KEY}: unreadable payload ({exc})"]
    return ArgsSelection(ops=ops, policy=sources.get(ARGS_KEY)), []
