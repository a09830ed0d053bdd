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
from dataclasses import dataclass
from typing import Any, Protocol

from app.model.quantities import same_quantity

Operation = dict[str, Any]

# Fields of a container's `resources` that kerf owns; `claims` (DRA) is never touched.
RESOURCE_FIELDS = ("requests", "limits")


class PatchSource(Protocol):
    """The parts of `app.decide.admission.AdmissionResult` the patch is built from."""

    @property
    def resources(self) -> Mapping[str, Mapping[str, Mapping[str, str]]]: ...

    @property
    def args(self) -> Mapping[str, Sequence[str]]: ...

    @property
    def annotations(self) -> Mapping[str, str]: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


def escape_pointer_token(token: str) -> str:
    """Escape one JSON-pointer reference token (RFC 6901 §3: `~` first, then `/`)."""
    if "~" not in token and "/" not in token:
        return token
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


@dataclass(frozen=True, slots=True)
class Patch:
    """A JSON patch and what it sets, counted while it is built."""

    ops: list[Operation]
    #: resource (or `args`) -> how many container values the patch sets to it, in patch
    #: order; values already in place produce no operation and are not counted
    values: dict[str, int]


class _Builder:
    """Collects the operations of one patch and counts the container values they set."""

    __slots__ = ("ops", "values")

    def __init__(self) -> None:
        self.ops: list[Operation] = []
        self.values: dict[str, int] = {}

    def count(self, name: str) -> None:
        self.values[name] = self.values.get(name, 0) + 1

    def resources(
        self, path: str, container: Mapping[str, Any], desired: Mapping[str, Mapping[str, str]]
    ) -> None:
        """Operations for one container's `resources` (`requests` and `limits` only)."""
        wanted = {field: dict(desired[field]) for field in RESOURCE_FIELDS if desired.get(field)}
        if not wanted:
            return
        current = container.get("resources")
        if not isinstance(current, dict):
            op = "add" if current is None else "replace"
            self.ops.append({"op": op, "path": f"{path}/resources", "value": wanted})
            for values in wanted.values():
                for name in values:
                    self.count(name)
            return
        for field, values in wanted.items():
            self.mapping(f"{path}/resources/{field}", current.get(field), values, quantities=True)

    def mapping(
        self, path: str, current: Any, desired: Mapping[str, str], *, quantities: bool = False
    ) -> None:
        """Operations that give the mapping at `path` every entry of `desired`. With
        `quantities` (requests or limits), values that spell the same quantity count as
        equal, and every value set is counted."""
        if not isinstance(current, dict):
            op = "add" if current is None else "replace"
            self.ops.append({"op": op, "path": path, "value": dict(desired)})
            if quantities:
                for name in desired:
                    self.count(name)
            return
        for key, value in desired.items():
            if key not in current:
                op = "add"
            elif current[key] != value and not (
                quantities and same_quantity(key, current[key], value)
            ):
                op = "replace"
            else:
                continue
            self.ops.append(
                {"op": op, "path": f"{path}/{escape_pointer_token(key)}", "value": value}
            )
            if quantities:
                self.count(key)

    def args(self, path: str, container: Mapping[str, Any], desired: Sequence[str]) -> None:
        current = container.get("args")
        wanted = list(desired)
        if current == wanted:
            return
        op = "add" if "args" not in container else "replace"
        self.ops.append({"op": op, "path": f"{path}/args", "value": wanted})
        self.count("args")

    def metadata(
        self, pod: Mapping[str, Any], annotations: Mapping[str, str], labels: Mapping[str, str]
    ) -> None:
        wanted = {
            name: dict(values)
            for name, values in (("annotations", annotations), ("labels", labels))
            if values
        }
        if not wanted:
            return
        metadata = pod.get("metadata")
        if not isinstance(metadata, dict):
            self.ops.append({"op": "add", "path": "/metadata", "value": wanted})
            return
        for name, values in wanted.items():
            self.mapping(f"/metadata/{name}", metadata.get(name), values)


def plan_patch(pod: Mapping[str, Any], result: PatchSource) -> Patch:
    """The minimal JSON patch that gives `pod` the decision's resources, args,
    annotations and labels, with the container values it sets.

    Containers named in the decision but absent from the pod are ignored: the decision was
    made from this very pod, so that can only mean a caller bug, and failing open (no
    change for that container) is the safe answer for admission.
    """
    paths = container_paths(pod)
    built = _Builder()
    for name, desired in result.resources.items():
        found = paths.get(name)
        if found is not None:
            built.resources(found[0], found[1], desired)
    for name, args in result.args.items():
        found = paths.get(name)
        if found is not None:
            built.args(found[0], found[1], args)
    built.metadata(pod, result.annotations, result.labels)
    return Patch(built.ops, built.values)


def build_patch(pod: Mapping[str, Any], result: PatchSource) -> list[Operation]:
    """The operations of `plan_patch(pod, result)`."""
    return plan_patch(pod, result).ops
