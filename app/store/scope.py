"""Does a policy's ``scope`` cover a workload, a namespace, a container? (SPEC §2)

A scope combines a Kubernetes label selector (matched against the *workload's* labels),
the workload kinds it covers, a namespace selector with ``*`` globs (cluster kinds) and
an optional list of container names. All functions are pure and cheap: glob patterns are
compiled once and cached, everything else is a few dict look-ups.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

from app.model.crd import DEFAULT_WORKLOAD_TYPES

if TYPE_CHECKING:
    from app.model.crd import LabelSelector, NamespaceSelector, Scope

__all__ = [
    "DEFAULT_WORKLOAD_TYPES",
    "container_in_scope",
    "match_label_selector",
    "match_namespace",
    "scope_matches",
]


def match_label_selector(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics: every ``matchLabels`` pair and every
    ``matchExpressions`` requirement must hold; ``None`` or an empty selector matches all.

    ``In`` needs the key with one of the values; ``NotIn`` holds when the key is absent or
    its value is not listed; ``Exists``/``DoesNotExist`` test the key only.
    """
    if selector is None:
        return True
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    for requirement in selector.match_expressions:
        operator = requirement.operator
        present = requirement.key in labels
        if operator == "In":
            holds = present and labels[requirement.key] in requirement.values
        elif operator == "NotIn":
            holds = not present or labels[requirement.key] not in requirement.values
        elif operator == "Exists":
            holds = present
        elif operator == "DoesNotExist":
            holds = not present
        else:
            # The model only admits the four operators; anything else is a programming
            # error, and silently matching would widen a policy's reach.
            raise ValueError(f"unknown label selector operator {operator!r}")
        if not holds:
            return False
    return True


@lru_cache(maxsize=4096)
def _glob_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for a list of patterns where only ``*`` is special (unlike fnmatch,
    ``?`` and ``[...]`` are literal, since namespace names cannot contain them anyway)."""
    alternatives = "|".join(".*".join(map(re.escape, p.split("*"))) for p in patterns)
    return re.compile(f"(?:{alternatives})", re.DOTALL)


def _any_glob_matches(patterns: Iterable[str], name: str) -> bool:
    key = tuple(patterns)
    return bool(key) and _glob_regex(key).fullmatch(name) is not None


def matches_any_pattern(patterns: Iterable[str], name: str) -> bool:
    """Whether a name matches any of the `*`-glob patterns."""
    return _any_glob_matches(patterns, name)


def match_namespace(selector: NamespaceSelector | None, namespace: str) -> bool:
    """``None`` matches every namespace; ``In`` matches when any pattern matches and
    ``NotIn`` when none does. Patterns are case-sensitive with ``*`` as the only glob."""
    if selector is None:
        return True
    matched = _any_glob_matches(selector.values, namespace)
    if selector.operator == "In":
        return matched
    if selector.operator == "NotIn":
        return not matched
    raise ValueError(f"unknown namespace selector operator {selector.operator!r}")


def scope_matches(
    scope: Scope,
    *,
    namespace: str,
    workload_kind: str,
    workload_labels: Mapping[str, str],
) -> bool:
    """True when ``scope`` covers the workload: its kind is one of ``workloadTypes``, its
    namespace passes ``namespaceSelector`` (if any) and its labels pass ``labelSelector``.
    """
    # Cheapest test first: most policies are rejected on kind or namespace.
    return (
        workload_kind in scope.workload_types
        and match_namespace(scope.namespace_selector, namespace)
        and match_label_selector(scope.label_selector, workload_labels)
    )


def container_in_scope(scope: Scope, container: str) -> bool:
    """True when ``container`` is listed in ``scope.containers``, or the list is absent
    (``None`` = every container; an explicit empty list names none)."""
    return scope.containers is None or container in scope.containers
