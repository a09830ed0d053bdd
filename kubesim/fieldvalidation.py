"""Unknown fields, as the real server's field validation treats them (`fieldValidation`
query parameter): `Ignore` drops them, `Warn` (the default) drops them and sends one
`Warning` header per field (`unknown field "spec.foo"`), `Strict` refuses the write with
400 "strict decoding error".

Built-in kinds are read against the kubernetes_asyncio models (generated from the
Kubernetes OpenAPI of the client's release, 1.35 with the pinned client); custom
resources against their CRD's structural schema, which kubesim prunes by itself
(kubesim/schema.py).
"""

from __future__ import annotations

import re
from typing import Any

from kubernetes_asyncio import client

from kubesim.admission import warn
from kubesim.errors import bad_request
from kubesim.resources import ResourceType
from kubesim.schema import Schema
from kubesim.store import Obj

_LIST = re.compile(r"^list\[(.+)\]$")
_DICT = re.compile(r"^dict\(str, (.+)\)$")
DIRECTIVES = ("Ignore", "Warn", "Strict")


def check_unknown_fields(rt: ResourceType, obj: Obj, directive: str | None) -> None:
    """Drop `obj`'s unknown fields in place; warn or refuse as `directive` says."""
    if directive and directive not in DIRECTIVES:
        raise bad_request(
            f"fieldValidation must be one of Ignore, Warn or Strict, not {directive!r}"
        )
    unknown: list[str] = []
    if rt.is_custom:
        if rt.schema:
            _walk_schema(obj, rt.schema, "", unknown, root=True)
    else:
        model = _model(rt)
        if model is not None:
            _walk_model(obj, model, "", unknown)
    if not unknown or directive == "Ignore":
        return
    fields = sorted(unknown)
    if directive == "Strict":
        listed = ", ".join(f'unknown field "{f}"' for f in fields)
        raise bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
            f"strict decoding error: {listed}"
        )
    for field in fields:
        warn(f'unknown field "{field}"')


def _model(rt: ResourceType) -> type | None:
    version = rt.version[:1].upper() + rt.version[1:]
    prefix = "Core" if not rt.group else rt.group.split(".")[0].title()
    for name in (f"{prefix}{version}{rt.kind}", f"{version}{rt.kind}"):
        model = getattr(client, name, None)
        if isinstance(model, type) and hasattr(model, "openapi_types"):
            return model
    return None


def _walk_model(value: Any, model: type, path: str, unknown: list[str]) -> None:
    if not isinstance(value, dict):
        return
    names = {json: attr for attr, json in model.attribute_map.items()}  # type: ignore[attr-defined]
    for key in list(value):
        where = f"{path}.{key}" if path else key
        attr = names.get(key)
        if attr is None:
            unknown.append(where)
            del value[key]
            continue
        _walk_type(value[key], model.openapi_types[attr], where, unknown)  # type: ignore[attr-defined]


def _walk_type(value: Any, type_name: str, path: str, unknown: list[str]) -> None:
    if listed := _LIST.match(type_name):
        if isinstance(value, list):
            for i, item in enumerate(value):
                _walk_type(item, listed.group(1), f"{path}[{i}]", unknown)
        return
    if mapped := _DICT.match(type_name):
        if isinstance(value, dict):
            for key, item in value.items():
                _walk_type(item, mapped.group(1), f"{path}[{key}]", unknown)
        return
    model = getattr(client, type_name, None)
    if isinstance(model, type) and hasattr(model, "openapi_types"):
        _walk_model(value, model, path, unknown)


def _walk_schema(value: Any, schema: Schema, path: str, unknown: list[str], root: bool) -> None:
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _walk_schema(item, schema["items"], f"{path}[{i}]", unknown, False)
        return
    if not isinstance(value, dict) or schema.get("x-kubernetes-embedded-resource"):
        return
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        if root and key in ("apiVersion", "kind", "metadata"):
            continue
        where = f"{path}.{key}" if path else key
        if key in properties:
            _walk_schema(item, properties[key], where, unknown, False)
        elif isinstance(extra, dict):
            _walk_schema(item, extra, f"{path}[{key}]", unknown, False)
        elif extra is not True and not schema.get("x-kubernetes-preserve-unknown-fields"):
            unknown.append(where)
