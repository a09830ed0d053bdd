"""Label selectors (string and structured forms) and field selectors."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.errors import bad_request

Labels = Mapping[str, str]


@dataclass(frozen=True)
class Requirement:
    """One selector term: `key op values`."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Labels) -> bool:
        """Whether `labels` satisfy this term (Kubernetes semantics: `!=`/notin match absent keys)."""
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("gt", "lt") and present:
            try:
                have, want = int(value or ""), int(self.values[0])
            except ValueError:
                return False
            return have > want if self.op == "gt" else have < want
        return False


@dataclass(frozen=True)
class Selector:
    """A conjunction of requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Labels | None) -> bool:
        """Whether every requirement holds for `labels`."""
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """Whether the selector has no terms."""
        return not self.requirements


_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_TERM = re.compile(
    rf"^\s*(?:(?P<not>!)\s*(?P<nkey>{_KEY})"
    rf"|(?P<key>{_KEY})\s*(?:(?P<op>==|!=|=|\s+in\s+|\s+notin\s+|>|<)\s*(?P<rest>.*))?)\s*$",
    re.S,
)


def _split_terms(text: str) -> list[str]:
    terms, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def parse_label_selector(text: str | None) -> Selector:
    """Parse the `labelSelector` query string (`a=b,c!=d,e in (x,y),f notin (z),g,!h`)."""
    if not text:
        return Selector()
    reqs: list[Requirement] = []
    for term in _split_terms(text):
        match = _TERM.match(term)
        if not match:
            raise bad_request(f"unable to parse requirement: {term.strip()!r}")
        if match.group("not"):
            reqs.append(Requirement(match.group("nkey"), "!"))
            continue
        key, op, rest = match.group("key"), (match.group("op") or "").strip(), match.group("rest")
        if not op:
            reqs.append(Requirement(key, "exists"))
        elif op in ("in", "notin"):
            rest = (rest or "").strip()
            if not (rest.startswith("(") and rest.endswith(")")):
                raise bad_request(f"unable to parse requirement: found '{rest}', expected: '('")
            values = tuple(v.strip() for v in rest[1:-1].split(",") if v.strip())
            reqs.append(Requirement(key, op, values))
        elif op in (">", "<"):
            reqs.append(Requirement(key, "gt" if op == ">" else "lt", ((rest or "").strip(),)))
        else:
            reqs.append(Requirement(key, "!=" if op == "!=" else "=", ((rest or "").strip(),)))
    return Selector(tuple(reqs))


_STRUCT_OPS = {
    "In": "in",
    "NotIn": "notin",
    "Exists": "exists",
    "DoesNotExist": "!",
    "Gt": "gt",
    "Lt": "lt",
}


def from_label_selector(obj: Mapping[str, Any] | None) -> Selector:
    """Build from a structured `LabelSelector` (`matchLabels` + `matchExpressions`)."""
    if not obj:
        return Selector()
    reqs = [
        Requirement(k, "=", (str(v),)) for k, v in sorted((obj.get("matchLabels") or {}).items())
    ]
    for expr in obj.get("matchExpressions") or []:
        op = _STRUCT_OPS.get(expr.get("operator", ""))
        if op is None:
            raise bad_request(f"{expr.get('operator')!r} is not a valid label selector operator")
        reqs.append(Requirement(expr["key"], op, tuple(str(v) for v in expr.get("values") or ())))
    return Selector(tuple(reqs))


def selector_string(obj: Mapping[str, Any] | None) -> str:
    """A structured `LabelSelector` in query-string form (`a=b,c in (x,y)`), as Scale shows it."""
    parts: list[str] = []
    for req in from_label_selector(obj).requirements:
        if req.op == "=":
            parts.append(f"{req.key}={req.values[0]}")
        elif req.op in ("in", "notin"):
            parts.append(f"{req.key} {req.op} ({','.join(req.values)})")
        elif req.op == "exists":
            parts.append(req.key)
        elif req.op == "!":
            parts.append(f"!{req.key}")
        else:
            parts.append(f"{req.key}{'>' if req.op == 'gt' else '<'}{req.values[0]}")
    return ",".join(parts)


# Field selectors the real server accepts per resource (beyond metadata.name/namespace).
FIELD_LABELS: dict[str, tuple[str, ...]] = {
    "pods": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "events": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "reportingController",
    ),
    "nodes": ("spec.unschedulable",),
    "namespaces": ("status.phase",),
    "secrets": ("type",),
    "replicasets": ("status.replicas",),
    "jobs": ("status.successful",),
}


# events.k8s.io/v1 field names for the v1 fields Events are stored with.
_EVENT_ALIASES = {"regarding": "involvedObject", "reportingController": "reportingComponent"}


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    head, _, rest = path.partition(".")
    if head in _EVENT_ALIASES:
        path = _EVENT_ALIASES[head] + (f".{rest}" if rest else "")
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    if isinstance(node, bool):
        return "true" if node else "false"
    return "" if node is None else str(node)


FieldPredicate = Callable[[Mapping[str, Any]], bool]


def parse_field_selector(text: str | None, plural: str) -> FieldPredicate:
    """Parse `fieldSelector` (`=`, `==`, `!=` terms) into a predicate over objects."""
    if not text:
        return lambda _obj: True
    allowed = {"metadata.name", "metadata.namespace", *FIELD_LABELS.get(plural, ())}
    terms: list[tuple[str, bool, str]] = []
    for term in text.split(","):
        term = term.strip()
        if not term:
            continue
        for op in ("!=", "==", "="):
            if op in term:
                field_name, value = term.split(op, 1)
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field_name = field_name.strip()
        if field_name not in allowed:
            raise bad_request(f"field label not supported: {field_name}")
        terms.append((field_name, op == "!=", value.strip()))

    def predicate(obj: Mapping[str, Any]) -> bool:
        for field_name, negate, value in terms:
            if (_field_value(obj, field_name) == value) == negate:
                return False
        return True

    return predicate
