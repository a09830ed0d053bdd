"""CustomResourceDefinitions: turning a CRD object into served resource types."""

from __future__ import annotations

from typing import Any

from kubesim.crdrules import compile_errors, compile_rules
from kubesim.errors import Cause
from kubesim.resources import Registry, ResourceType

Obj = dict[str, Any]


def validate_crd(crd: Obj) -> list[Cause]:
    """The checks that matter for serving: names, group, versions, one storage version,
    and validation rules kubesim can compile."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    causes: list[Cause] = []
    for field in ("plural", "kind"):
        if not names.get(field):
            causes.append(Cause("FieldValueRequired", "Required value", f"spec.names.{field}"))
    if not spec.get("group"):
        causes.append(Cause("FieldValueRequired", "Required value", "spec.group"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(
            Cause(
                "FieldValueNotSupported",
                f'Unsupported value: "{spec.get("scope", "")}": supported values: "Cluster", "Namespaced"',
                "spec.scope",
            )
        )
    versions = spec.get("versions") or []
    if not versions:
        causes.append(Cause("FieldValueRequired", "Required value", "spec.versions"))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(
            Cause(
                "FieldValueInvalid",
                "Invalid value: must have exactly one version marked as storage version",
                "spec.versions",
            )
        )
    causes += _rule_errors(versions)
    expected = f"{names.get('plural', '')}.{spec.get('group', '')}"
    if crd.get("metadata", {}).get("name") != expected:
        causes.append(
            Cause(
                "FieldValueInvalid",
                f'Invalid value: "{crd.get("metadata", {}).get("name", "")}": must be spec.names.plural+"."+spec.group',
                "metadata.name",
            )
        )
    return causes


def _rule_errors(versions: list[Obj]) -> list[Cause]:
    schemas = [(v.get("schema") or {}).get("openAPIV3Schema") for v in versions]
    if schemas and all(s == schemas[0] for s in schemas):
        # One schema for every version: the real server names it by its internal place.
        schemas, paths = schemas[:1], ["spec.validation.openAPIV3Schema"]
    else:
        paths = [f"spec.versions[{i}].schema.openAPIV3Schema" for i in range(len(schemas))]
    causes: list[Cause] = []
    for schema, path in zip(schemas, paths, strict=True):
        if isinstance(schema, dict):
            causes += compile_errors(schema, path)
    return causes


def crd_status(crd: Obj) -> Obj:
    """The status the apiextensions controllers converge to for a valid CRD."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", names.get("kind", "").lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    condition = {"status": "True", "lastTransitionTime": crd["metadata"].get("creationTimestamp")}
    return {
        "acceptedNames": names,
        "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
        "conditions": [
            {
                **condition,
                "type": "NamesAccepted",
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                **condition,
                "type": "Established",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
    }


def register(registry: Registry, crd: Obj) -> None:
    """Serve every served version of `crd` (replacing an earlier registration)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    registry.remove_crd(crd["metadata"]["name"])
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or spec.get("subresources") or {}
        validation = version.get("schema") or spec.get("validation") or {}
        registry.add(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope") == "Namespaced",
                subresources=tuple(k for k in ("status", "scale") if k in subresources),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                schema=validation.get("openAPIV3Schema"),
                rules=compile_rules(validation.get("openAPIV3Schema") or {}),
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
                crd_name=crd["metadata"]["name"],
            )
        )
