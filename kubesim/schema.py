"""Structural-schema handling for custom resources: pruning, defaulting, validation.

Follows the apiextensions server: unknown fields are pruned unless
`x-kubernetes-preserve-unknown-fields` is set, `default`s are applied, then the object is
validated with field paths and messages in the real server's format. CEL rules
(`x-kubernetes-validations`) are evaluated after this, by `kubesim.crdrules`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kubesim.errors import Cause
from kubesim.store import clone

Schema = dict[str, Any]
_ROOT_KEEP = ("apiVersion", "kind", "metadata")


def prepare(obj: dict[str, Any], schema: Schema | None) -> list[Cause]:
    """Prune, default and validate a custom object in place; returns field errors."""
    if not schema:
        return []
    for key in [k for k in obj if k not in _ROOT_KEEP]:
        sub = _property(schema, key)
        if sub is None and not schema.get("x-kubernetes-preserve-unknown-fields"):
            del obj[key]
        elif sub is not None:
            obj[key] = _prune_and_default(obj[key], sub)
    for key, sub in (schema.get("properties") or {}).items():
        if key not in obj and key not in _ROOT_KEEP and "default" in sub:
            obj[key] = _prune_and_default(clone(sub["default"]), sub)
    causes: list[Cause] = []
    for key, sub in (schema.get("properties") or {}).items():
        if key in _ROOT_KEEP:
            continue
        if key in obj:
            _validate(obj[key], sub, key, causes)
        elif key in (schema.get("required") or []):
            causes.append(Cause("FieldValueRequired", "Required value", key))
    return causes


def _property(schema: Schema, key: str) -> Schema | None:
    props = schema.get("properties")
    if props and key in props:
        return props[key]
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        return extra
    if extra is True:
        return {"x-kubernetes-preserve-unknown-fields": True}
    return None


def _prune_and_default(value: Any, schema: Schema) -> Any:
    if isinstance(value, dict) and (
        schema.get("type") == "object" or "properties" in schema or "additionalProperties" in schema
    ):
        if schema.get("x-kubernetes-embedded-resource") or (
            schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema
        ):
            return value
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = _property(schema, key)
            if sub is None:
                if schema.get("x-kubernetes-preserve-unknown-fields"):
                    out[key] = item
                continue
            out[key] = _prune_and_default(item, sub)
        for key, sub in (schema.get("properties") or {}).items():
            if key not in out and "default" in sub:
                out[key] = _prune_and_default(clone(sub["default"]), sub)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune_and_default(item, schema["items"]) for item in value]
    return value


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        # As the real server (go-openapi): a whole float counts as an integer only below
        # 2^53, where a float64 still holds every integer; 1e+30 is a number.
        return "integer" if value.is_integer() and abs(value) < 2**53 else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict | list):
        return f'"{_type_name(value)}"'
    return json.dumps(value)


def _type_ok(value: Any, wanted: str, schema: Schema) -> bool:
    actual = _type_name(value)
    if schema.get("x-kubernetes-int-or-string"):
        return actual in ("integer", "string")
    if wanted == "number":
        return actual in ("integer", "number")
    return actual == wanted


def _validate(value: Any, schema: Schema, path: str, causes: list[Cause]) -> None:
    if value is None:
        if not schema.get("nullable") and schema.get("type"):
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "null": {path} in body must be of type {schema["type"]}: "null"',
                    path,
                )
            )
        return
    wanted = schema.get("type")
    if wanted and not _type_ok(value, wanted, schema):
        causes.append(
            Cause(
                "FieldValueTypeInvalid",
                f'Invalid value: "{_type_name(value)}": {path} in body must be of type {wanted}: {_show(value)}',
                path,
            )
        )
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_show(v) for v in schema["enum"])
        causes.append(
            Cause(
                "FieldValueNotSupported",
                f"Unsupported value: {_show(value)}: supported values: {supported}",
                path,
            )
        )
    _validate_scalar(value, schema, path, causes)
    if isinstance(value, dict):
        _validate_object(value, schema, path, causes)
    elif isinstance(value, list):
        _validate_array(value, schema, path, causes)
    _validate_combinators(value, schema, path, causes)


def _bound(bound: float, value: float) -> str:
    """A minimum or maximum as the real server writes it: in the value's own type (Go's
    %v of a float64: `1e+06`)."""
    if isinstance(value, float):
        return f"{float(bound):g}"
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _validate_scalar(value: Any, schema: Schema, path: str, causes: list[Cause]) -> None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema:
            low = schema["minimum"]
            if value < low or (schema.get("exclusiveMinimum") and value == low):
                word = (
                    "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
                )
                causes.append(
                    Cause(
                        "FieldValueInvalid",
                        f"Invalid value: {_show(value)}: {path} in body should be {word} {_bound(low, value)}",
                        path,
                    )
                )
        if "maximum" in schema:
            high = schema["maximum"]
            if value > high or (schema.get("exclusiveMaximum") and value == high):
                word = "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
                causes.append(
                    Cause(
                        "FieldValueInvalid",
                        f"Invalid value: {_show(value)}: {path} in body should be {word} {_bound(high, value)}",
                        path,
                    )
                )
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            causes.append(
                Cause(
                    "FieldValueTooLong",
                    f"Too long: may not be more than {schema['maxLength']} bytes",
                    path,
                )
            )
        if "minLength" in schema and len(value) < schema["minLength"]:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_show(value)}: {path} in body should be at least {schema['minLength']} chars long",
                    path,
                )
            )
        if "pattern" in schema and not re.search(schema["pattern"], value):
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_show(value)}: {path} in body should match '{schema['pattern']}'",
                    path,
                )
            )


def _validate_object(value: dict[str, Any], schema: Schema, path: str, causes: list[Cause]) -> None:
    for key in schema.get("required") or []:
        if key not in value:
            causes.append(Cause("FieldValueRequired", "Required value", f"{path}.{key}"))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        causes.append(
            Cause(
                "FieldValueTooMany",
                f"Too many: {len(value)}: must have at most {schema['maxProperties']} items",
                path,
            )
        )
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        causes.append(
            Cause(
                "FieldValueInvalid",
                f"Invalid value: {len(value)}: {path} in body should have at least {schema['minProperties']} properties",
                path,
            )
        )
    for key, item in value.items():
        sub = _property(schema, key)
        if sub is not None:
            _validate(item, sub, f"{path}.{key}", causes)


def _validate_array(value: list[Any], schema: Schema, path: str, causes: list[Cause]) -> None:
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        causes.append(
            Cause(
                "FieldValueTooMany",
                f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                path,
            )
        )
    if "minItems" in schema and len(value) < schema["minItems"]:
        causes.append(
            Cause(
                "FieldValueInvalid",
                f"Invalid value: {len(value)}: {path} in body should have at least {schema['minItems']} items",
                path,
            )
        )
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", causes)
    if schema.get("x-kubernetes-list-type") == "set" or schema.get("uniqueItems"):
        seen: list[Any] = []
        for i, item in enumerate(value):
            if item in seen:
                causes.append(
                    Cause("FieldValueDuplicate", f"Duplicate value: {_show(item)}", f"{path}[{i}]")
                )
            seen.append(item)


def _validate_combinators(value: Any, schema: Schema, path: str, causes: list[Cause]) -> None:
    def errors(sub: Schema) -> list[Cause]:
        found: list[Cause] = []
        _validate(value, sub, path, found)
        return found

    for sub in schema.get("allOf") or []:
        causes.extend(errors(sub))
    if schema.get("anyOf") and not any(not errors(sub) for sub in schema["anyOf"]):
        causes.append(
            Cause(
                "FieldValueInvalid",
                f"Invalid value: {_show(value)}: {path} in body must validate at least one schema (anyOf)",
                path,
            )
        )
    if schema.get("oneOf") and sum(1 for sub in schema["oneOf"] if not errors(sub)) != 1:
        causes.append(
            Cause(
                "FieldValueInvalid",
                f"Invalid value: {_show(value)}: {path} in body must validate one and only one schema (oneOf)",
                path,
            )
        )
    if isinstance(schema.get("not"), dict) and not errors(schema["not"]):
        causes.append(
            Cause(
                "FieldValueInvalid",
                f"Invalid value: {_show(value)}: {path} in body should not validate the schema (not)",
                path,
            )
        )
