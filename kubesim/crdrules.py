"""CRD validation rules (`x-kubernetes-validations`): compiling them when a CRD is written
and evaluating them on every write of a custom resource, as the apiextensions server does.

A rule applies where its schema node is present in the object (never to a missing or null
value), with `self` bound to the value there. A false rule is a FieldValueInvalid cause on
that node's path with the rule's message; a rule that fails to evaluate is one too,
naming the error. As the real server, a schema with rules has none evaluated while the
schema check found a blocking error (a wrong type, a missing required field, ...), and on an
update a failing rule is let through where the value it checks is unchanged (validation
ratcheting).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from kubesim.cel import CelEvalError, CelSyntaxError, Node, compile_expression, evaluate_rule
from kubesim.errors import Cause

Schema = dict[str, Any]
_ABSENT = object()
#: schema-check reasons after which the real server skips the rules (hasBlockingErr)
_BLOCKING = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)
_UNSUPPORTED_FIELDS = ("messageExpression", "reason", "fieldPath", "optionalOldSelf")
_NOT_CHECKED = Cause(
    "FieldValueInvalid",
    "Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation",
    "<nil>",
)


def compile_errors(schema: Schema, path: str) -> list[Cause]:
    """A cause for every rule under `schema` that kubesim cannot compile, at its path
    below `path` (the schema's own field path in the CRD)."""
    causes: list[Cause] = []
    for node, where in _schema_nodes(schema, path):
        for i, rule in enumerate(node.get("x-kubernetes-validations") or ()):
            source = rule.get("rule") if isinstance(rule, dict) else None
            field = f"{where}.x-kubernetes-validations[{i}].rule"
            if not isinstance(source, str) or not source.strip():
                causes.append(Cause("FieldValueRequired", "Required value", field))
                continue
            try:
                _unsupported(rule, source)
                compile_expression(source)
            except CelSyntaxError as exc:
                message = (
                    f"Invalid value: {json.dumps(source)}: compilation failed: {exc} "
                    "(kubesim evaluates a CEL subset, see docs/kubesim.md)"
                )
                causes.append(Cause("FieldValueInvalid", message, field))
    return causes


def _unsupported(rule: dict[str, Any], source: str) -> None:
    """Refuse what kubesim does not model rather than ignore it: transition rules and the
    rule fields that change how a failure is reported."""
    if re.search(r"\boldSelf\b", source):
        raise CelSyntaxError("transition rules (oldSelf) are not supported by kubesim")
    for key in _UNSUPPORTED_FIELDS:
        if rule.get(key):
            raise CelSyntaxError(f"a rule's {key} is not supported by kubesim")


def compile_rules(schema: Schema) -> dict[str, Node]:
    """Every rule under `schema`, compiled, by its source (which `compile_errors` has
    already found compilable)."""
    return {
        rule["rule"]: compile_expression(rule["rule"])
        for node, _ in _schema_nodes(schema, "")
        for rule in node.get("x-kubernetes-validations") or ()
    }


def rule_causes(
    obj: dict[str, Any],
    schema: Schema | None,
    rules: dict[str, Node],
    old: dict[str, Any] | None,
    found: list[Cause],
) -> list[Cause]:
    """The causes the rules in `schema` (compiled in `rules`) add for `obj` (pruned and
    defaulted), after the schema check `found` its own; `old` is the stored object on an
    update."""
    if not schema or not rules:
        return []
    if any(cause.reason in _BLOCKING for cause in found):
        return [_NOT_CHECKED]
    causes: list[Cause] = []
    _check(obj, schema, rules, "", _ABSENT if old is None else old, causes)
    return causes


def _schema_nodes(schema: Schema, path: str) -> Iterator[tuple[Schema, str]]:
    yield schema, path
    for key, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            yield from _schema_nodes(sub, f"{path}.properties[{key}]")
    for key in ("additionalProperties", "items"):
        if isinstance(schema.get(key), dict):
            yield from _schema_nodes(schema[key], f"{path}.{key}")
    for i, sub in enumerate(schema.get("allOf") or ()):
        if isinstance(sub, dict):
            yield from _schema_nodes(sub, f"{path}.allOf[{i}]")


def _check(
    value: Any, schema: Schema, rules: dict[str, Node], path: str, old: Any, causes: list[Cause]
) -> None:
    if value is None:
        return
    _evaluate(value, schema, rules, path, old is not _ABSENT and old == value, causes)
    for sub in schema.get("allOf") or ():
        if isinstance(sub, dict):
            _check(value, sub, rules, path, old, causes)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            before = old.get(key, _ABSENT) if isinstance(old, dict) else _ABSENT
            if key in props:
                _check(item, props[key], rules, f"{path}.{key}" if path else key, before, causes)
            elif isinstance(extra, dict):
                _check(item, extra, rules, f"{path}[{key}]", before, causes)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            before = _old_item(schema, item, value, old)
            _check(item, schema["items"], rules, f"{path}[{i}]", before, causes)


def _old_item(schema: Schema, item: Any, value: list[Any], old: Any) -> Any:
    """The old value an item is compared with: a map-list's item with the same keys;
    in other lists, the item counts as unchanged only when the whole list is."""
    if not isinstance(old, list):
        return _ABSENT
    keys = schema.get("x-kubernetes-list-map-keys") or ()
    if schema.get("x-kubernetes-list-type") == "map" and keys and isinstance(item, dict):
        wanted = [item.get(k) for k in keys]
        for candidate in old:
            if isinstance(candidate, dict) and [candidate.get(k) for k in keys] == wanted:
                return candidate
        return _ABSENT
    return item if old == value else _ABSENT


def _evaluate(
    value: Any,
    schema: Schema,
    rules: dict[str, Node],
    path: str,
    unchanged: bool,
    causes: list[Cause],
) -> None:
    kind = schema.get("type", "")
    field = path or "<nil>"
    for rule in schema.get("x-kubernetes-validations") or ():
        source = rule["rule"]
        label = (rule.get("message") or "").strip() or source.strip()
        try:
            holds = evaluate_rule(rules[source], value)
        except CelEvalError as exc:
            if str(exc).startswith("no such overload"):
                detail = (
                    f"'{exc}': call arguments did not match a supported operator, function "
                    f"or macro signature for rule: {label}"
                )
            else:
                detail = f"{exc} evaluating rule: {label}"
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{kind}": {detail}', field))
            continue
        if holds or unchanged:
            continue
        detail = (rule.get("message") or "").strip() or f"failed rule: {source.strip()}"
        # The real server leaves an object's or array's value out of the message.
        shown = "" if kind in ("object", "array") else f"{json.dumps(value)}: "
        causes.append(Cause("FieldValueInvalid", f"Invalid value: {shown}{detail}", field))
