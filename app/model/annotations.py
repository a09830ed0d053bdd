"""Annotation keys and recommendation payload formats (SPEC §3).

A recommendation is published under a *physical key*: a fixed key per policy kind when
multi-policy rightsizing is off, or a policy-owned hashed key when it is on. Both formats
are read at all times, so a change of the flag can rewrite keys gradually.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from app.model.apitime import rfc3339_as_kept

DOMAIN = "rightsizing.kubex.ai"
ROLLBACK_STATE = f"{DOMAIN}/rollback-state"
PAUSE_UNTIL = f"{DOMAIN}/pause-until"
PAUSE_REASON = f"{DOMAIN}/pause-reason"
SKIP_CONTAINERS = f"{DOMAIN}/skip-containers"
APPROVE = f"{DOMAIN}/approve"
APPROVE_TARGET = f"{DOMAIN}/approve-target"
POD_INFO = "automation-webhook.kubex.ai/pod-rightsizing-info"
ARGS_KEY = f"containerargspolicy.{DOMAIN}/pod-runtime-hook"
MIRROR_POD = "kubernetes.io/config.mirror"

FIELDS = ("requests", "limits")

PREFIX_BY_KIND: dict[str, str] = {
    "StaticPolicy": "static",
    "ClusterStaticPolicy": "cwstatic",
    "ProactivePolicy": "proactive",
    "ClusterProactivePolicy": "cwproactive",
    "GpuReactivePolicy": "gpureactive",
    "ClusterGpuReactivePolicy": "cwgpureactive",
    "RollbackPolicy": "rollbackpolicy",
    "ClusterRollbackPolicy": "rollbackpolicy",
}
# Rollback restores of both rollback kinds share one prefix; a key alone reads as the
# namespaced kind (both have the same default priority).
KIND_BY_PREFIX: dict[str, str] = {
    "static": "StaticPolicy",
    "cwstatic": "ClusterStaticPolicy",
    "proactive": "ProactivePolicy",
    "cwproactive": "ClusterProactivePolicy",
    "gpureactive": "GpuReactivePolicy",
    "cwgpureactive": "ClusterGpuReactivePolicy",
    "rollbackpolicy": "RollbackPolicy",
}

_KEY_RE = re.compile(
    r"^(?P<prefix>[a-z]+)\.rightsizing\.kubex\.ai/"
    r"(?:h(?P<digest>[0-9a-f]{16})-)?desired-resource-(?P<field>requests|limits)$"
)


class PayloadError(ValueError):
    """A recommendation annotation whose value cannot be read."""


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """What a physical recommendation key says: the policy kind and the field."""

    key: str
    kind: str
    field: str
    hashed: bool


def policy_digest(kind: str, namespace: str, name: str) -> str:
    """Stable 16-hex digest of a policy identity (keeps the key name under 63 chars)."""
    return hashlib.sha256(f"{kind}/{namespace}/{name}".encode()).hexdigest()[:16]


def fixed_key(kind: str, field: str) -> str:
    """The shared key of a policy kind (multi-policy off)."""
    return f"{PREFIX_BY_KIND[kind]}.{DOMAIN}/desired-resource-{field}"


def policy_key(kind: str, namespace: str, name: str, field: str) -> str:
    """The policy-owned key (multi-policy on)."""
    digest = policy_digest(kind, namespace, name)
    return f"{PREFIX_BY_KIND[kind]}.{DOMAIN}/h{digest}-desired-resource-{field}"


def parse_key(key: str) -> KeyInfo | None:
    """KeyInfo for a recommendation key, None for any other annotation."""
    match = _KEY_RE.match(key)
    if match is None or match["prefix"] not in KIND_BY_PREFIX:
        return None
    return KeyInfo(
        key=key,
        kind=KIND_BY_PREFIX[match["prefix"]],
        field=match["field"],
        hashed=match["digest"] is not None,
    )


def is_recommendation_key(key: str) -> bool:
    """True for keys kerf owns on workloads (recommendations and the args hook)."""
    return key == ARGS_KEY or parse_key(key) is not None


def recommendation_fingerprint(annotations: Mapping[str, str]) -> str:
    """Hash of the physical keys and values of a recommendation (the rollback
    fingerprint): a key that moves between the fixed and hashed form is a new one."""
    return hashlib.sha256(dumps(dict(sorted(annotations.items()))).encode()).hexdigest()[:16]


def dumps(value: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): equal values give equal strings."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


@dataclass(frozen=True, slots=True)
class Payload:
    """A decoded recommendation payload: per container (or "*"), resource → quantity."""

    containers: dict[str, dict[str, str]]
    policy_kind: str | None = None
    policy_name: str | None = None
    policy_namespace: str | None = None
    policy_generation: int | None = None
    created_at: datetime | None = None


def encode_fixed(containers: dict[str, dict[str, str]]) -> str:
    """Fixed-key payload: the containers map alone, no timestamp."""
    return dumps(containers)


def encode_owned(
    *,
    kind: str,
    namespace: str,
    name: str,
    generation: int,
    created_at: datetime | None,
    containers: dict[str, dict[str, str]],
) -> str:
    """Policy-owned payload with the policy identity and its creation time."""
    return dumps(
        {
            "policyKind": kind,
            "policyName": name,
            "policyNamespace": namespace,
            "policyGeneration": generation,
            "createdAt": rfc3339_as_kept(created_at) if created_at else None,
            "containers": containers,
        }
    )


def _containers(value: Any, key: str) -> dict[str, dict[str, str]]:
    if not isinstance(value, dict):
        raise PayloadError(f"{key}: containers must be a mapping")
    for container, resources in value.items():
        if not isinstance(resources, dict) or not all(
            isinstance(k, str) and isinstance(v, str | int | float) for k, v in resources.items()
        ):
            raise PayloadError(f"{key}: container {container!r} must map resources to quantities")
    return {c: {r: str(q) for r, q in res.items()} for c, res in value.items()}


def decode_payload(key: str, text: str) -> Payload:
    """Read either payload format; raise PayloadError with the key on bad input."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise PayloadError(f"{key}: not JSON ({exc})") from None
    if isinstance(value, dict) and "containers" in value and "policyKind" in value:
        created = value.get("createdAt")
        try:
            created_at = datetime.fromisoformat(created) if created else None
        except (TypeError, ValueError):
            raise PayloadError(f"{key}: createdAt {created!r} is not a timestamp") from None
        return Payload(
            containers=_containers(value["containers"], key),
            policy_kind=value.get("policyKind"),
            policy_name=value.get("policyName"),
            policy_namespace=value.get("policyNamespace") or "",
            policy_generation=value.get("policyGeneration"),
            created_at=created_at,
        )
    return Payload(containers=_containers(value, key))
