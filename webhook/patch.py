"""Turn an admission decision into a minimal RFC 6902 JSON patch for the pod.

Pure functions only: the input pod is never modified. The patch is *minimal*: a value
already equal to the desired one produces no operation, a missing path is created with
`add` (the highest missing parent carries the whole sub-document, because RFC 6902 `add`
does not create intermediate objects) and an existing different value is `replace`d. Applying the patch and building it again from the same
decision therefore yields `[]`, which is what makes reinvocation (`reinvocationPolicy:
IfNeeded`) idempotent.

kerf only sets values: a resource, annotation or field absent from the decision is left as
it is, so a GPU or ephemeral-storage request kerf does not manage can never be dropped.

The pod is parsed JSON, so its objects are tested with `isinstance(x, dict)`: the
`Mapping` ABC check costs several times more and this runs on every admission.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from app.quantities import QuantityError, parse_resource

Operation = dict[str, Any]

# Fields of a container's `resources` that kerf owns; `claims` (DRA) is never touched.
RESOURCE_FIELDS = ("requests", "limits")


class PatchSource(Protocol):
    """The parts of `app.admission.AdmissionResult` the patch is built from."""

    @property
    def resources(self) -> Mapping[str, Mapping[str, Mapping[str, str]]]: ...

    @property
    def args(self) -> Mapping[str, Sequence[str]]: ...

    @property
    def annotations(self) -> Mapping[str, str]: ...


def escape_pointer_token(token: str) -> str:
    """Escape one JSON-pointer reference token (RFC 6901 §3: `~` first, then `/`)."""
    return token.replace("~", "~0").replace("/", "~1")


def container_paths(pod: Mapping[str, Any]) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """Map each container name to its JSON-pointer path and its object.

    Regular containers come first and win a (malformed) name clash with an init container,
    because kerf mostly rightsizes regular containers; init and native sidecar containers
    are reachable too, since the decision of which containers change belongs to `app`.
    """
    spec = pod.get("spec") or {}
    found: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for list_name in ("containers", "initContainers"):
        for index, container in enumerate(spec.get(list_name) or ()):
            name = container.get("name") if isinstance(container, dict) else None
            if isinstance(name, str) and name not in found:
                found[name] = (f"/spec/{list_name}/{index}", container)
    return found


def _same_quantity(resource: str, current: Any, desired: Any) -> bool:
    """`1000m` and `1` are one value: rewriting a spelling is not a change."""
    try:
        return parse_resource(resource, current) == parse_resource(resource, desired)
    except QuantityError:
        return False


def _map_ops(
    path: str, current: Any, desired: Mapping[str, Any], *, quantities: bool = False
) -> list[Operation]:
    """Operations that give the mapping at `path` every entry of `desired` (with
    `quantities`, values that spell the same quantity count as equal)."""
    if not desired:
        return []
    if not isinstance(current, dict):
        op = "add" if current is None else "replace"
        return [{"op": op, "path": path, "value": dict(desired)}]
    ops: list[Operation] = []
    for key, value in desired.items():
        if key not in current:
            ops.append({"op": "add", "path": f"{path}/{escape_pointer_token(key)}", "value": value})
        elif current[key] != value and not (
            quantities and _same_quantity(key, current[key], value)
        ):
            ops.append(
                {"op": "replace", "path": f"{path}/{escape_pointer_token(key)}", "value": value}
            )
    return ops


def _resources_ops(
    path: str, container: Mapping[str, Any], desired: Mapping[str, Mapping[str, str]]
) -> list[Operation]:
    """Operations for one container's `resources` (`requests` and `limits` only)."""
    wanted = {field: dict(desired[field]) for field in RESOURCE_FIELDS if desired.get(field)}
    if not wanted:
        return []
    current = container.get("resources")
    if not isinstance(current, dict):
        op = "add" if current is None else "replace"
        return [{"op": op, "path": f"{path}/resources", "value": wanted}]
    ops: list[Operation] = []
    for field, values in wanted.items():
        ops.extend(
            _map_ops(f"{path}/resources/{field}", current.get(field), values, quantities=True)
        )
    return ops


def _args_ops(path: str, container: Mapping[str, Any], desired: Sequence[str]) -> list[Operation]:
    current = container.get("args")
    wanted = list(desired)
    if current == wanted:
        return []
    if "args" not in container:
        return [{"op": "add", "path": f"{path}/args", "value": wanted}]
    return [{"op": "replace", "path": f"{path}/args", "value": wanted}]


def _annotation_ops(pod: Mapping[str, Any], desired: Mapping[str, str]) -> list[Operation]:
    if not desired:
        return []
    metadata = pod.get("metadata")
    if not isinstance(metadata, dict):
        return [{"op": "add", "path": "/metadata", "value": {"annotations": dict(desired)}}]
    return _map_ops("/metadata/annotations", metadata.get("annotations"), desired)


def patched_resources(ops: Sequence[Operation]) -> list[str]:
    """One entry per container value a patch sets: the resource name, or `args`.

    Read back from the operations (not from the decision) so that values already in place,
    which produce no operation, are not counted as applied.
    """
    names: list[str] = []
    for op in ops:
        parts = op["path"].split("/")
        if len(parts) < 5 or parts[1] != "spec":
            continue
        tail = parts[4:]
        value: Any = op.get("value")  # the shape its path gives it
        if tail == ["args"]:
            names.append("args")
        elif tail == ["resources"]:
            names.extend(res for values in value.values() for res in values)
        elif len(tail) == 2:
            names.extend(value)
        elif len(tail) == 3:
            names.append(tail[2].replace("~1", "/").replace("~0", "~"))
    return names


def build_patch(pod: Mapping[str, Any], result: PatchSource) -> list[Operation]:
    """The minimal JSON patch that gives `pod` the decision's resources, args and annotations.

    Containers named in the decision but absent from the pod are ignored: the decision was
    made from this very pod, so that can only mean a caller bug, and failing open (no
    change for that container) is the safe answer for admission.
    """
    paths = container_paths(pod)
    ops: list[Operation] = []
    for name, desired in result.resources.items():
        if name in paths:
            path, container = paths[name]
            ops.extend(_resources_ops(path, container, desired))
    for name, args in result.args.items():
        if name in paths:
            path, container = paths[name]
            ops.extend(_args_ops(path, container, args))
    ops.extend(_annotation_ops(pod, result.annotations))
    return ops
