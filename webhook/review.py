"""AdmissionReview (admission.k8s.io/v1) parsing and response building.

Two kinds of bad input are told apart on purpose. A body that is not JSON at all is the
caller's bug and gets a 400 (`BodyError`); JSON that is not a usable AdmissionReview is
answered with `allowed: true` (`ReviewError`), because admission must fail open and the
API server should never see a failure from kerf.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

REVIEW_KIND = "AdmissionReview"
API_VERSION_V1 = "admission.k8s.io/v1"
# v1beta1 has the same response shape; echoing it keeps a misconfigured webhook readable.
KNOWN_API_VERSIONS = frozenset({API_VERSION_V1, "admission.k8s.io/v1beta1"})


class BodyError(ValueError):
    """The request body is not JSON (answered with 400)."""


class ReviewError(ValueError):
    """JSON that is not a usable AdmissionReview (answered with allowed: true)."""

    def __init__(self, message: str, *, uid: str = "", api_version: str = API_VERSION_V1):
        super().__init__(message)
        self.uid = uid
        self.api_version = api_version


# Not frozen: a frozen dataclass sets each of its fields through `object.__setattr__`,
# which for these eleven cost more than checking them. Nothing changes a request.
@dataclass(slots=True)
class AdmissionRequest:
    """The fields of an AdmissionReview request that kerf acts on."""

    uid: str
    api_version: str
    kind: str
    group: str
    resource: str
    sub_resource: str | None
    operation: str
    namespace: str | None
    name: str | None
    object: dict[str, Any] | None
    dry_run: bool

    @property
    def is_pod_create(self) -> bool:
        """True for the only request kerf mutates: CREATE of a core/v1 pod (no subresource)."""
        return (
            self.operation == "CREATE"
            and self.group == ""
            and self.resource == "pods"
            and self.kind == "Pod"
            and not self.sub_resource
        )


def load_json(body: bytes) -> Any:
    """Parse a request body, raising `BodyError` with a message that says what is wrong."""
    if not body.strip():
        raise BodyError("request body is empty; expected an AdmissionReview JSON object")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"request body is not valid UTF-8 JSON: {exc}") from None


def _salvage(doc: Any) -> tuple[str, str]:
    """Best-effort uid and apiVersion from a malformed review, so the answer still echoes them."""
    if not isinstance(doc, Mapping):
        return "", API_VERSION_V1
    version = doc.get("apiVersion")
    # Any JSON value can stand here: a list or an object is unhashable, so test the type
    # before the set lookup, or the salvage itself fails and the uid is lost.
    api_version = API_VERSION_V1
    if isinstance(version, str) and version in KNOWN_API_VERSIONS:
        api_version = version
    request = doc.get("request")
    uid = request.get("uid") if isinstance(request, Mapping) else None
    return (uid if isinstance(uid, str) else ""), api_version


class _Invalid(Exception):
    """One field of the review is missing or of the wrong type: `where` names it."""

    def __init__(self, where: str, problem: str):
        super().__init__(f"{where}: {problem}")


def _field(doc: Mapping[str, Any], key: str, where: str, kinds: type | tuple[type, ...]) -> Any:
    """`doc[key]`, required and of type `kinds`."""
    if key not in doc:
        raise _Invalid(f"{where}{key}", "field required")
    value = doc[key]
    if not isinstance(value, kinds):
        raise _Invalid(f"{where}{key}", f"expected {_type_name(kinds)}, got {_json_type(value)}")
    return value


def _optional(doc: Mapping[str, Any], key: str, where: str, kinds: type | tuple[type, ...]) -> Any:
    """`doc[key]` when present and not null, else None; of type `kinds` otherwise."""
    value = doc.get(key)
    if value is not None and not isinstance(value, kinds):
        raise _Invalid(f"{where}{key}", f"expected {_type_name(kinds)}, got {_json_type(value)}")
    return value


def _type_name(kinds: type | tuple[type, ...]) -> str:
    names = {str: "a string", dict: "an object", bool: "a boolean"}
    first = kinds[0] if isinstance(kinds, tuple) else kinds
    return names.get(first, first.__name__)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return _type_name(type(value))


def _validated(doc: Any) -> AdmissionRequest:
    """The request of an admission.k8s.io/v1 AdmissionReview, or `_Invalid` naming the
    first field that is missing or wrong. Plain checks rather than a pydantic model: this
    runs on every admission request, and a model costs several times as much."""
    if not isinstance(doc, dict):
        raise _Invalid("<root>", f"expected an object, got {_json_type(doc)}")
    if doc.get("apiVersion") != API_VERSION_V1:
        raise _Invalid("apiVersion", f"expected {API_VERSION_V1!r}")
    if doc.get("kind") != REVIEW_KIND:
        raise _Invalid("kind", f"expected {REVIEW_KIND!r}")
    request = _field(doc, "request", "", dict)
    uid = _field(request, "uid", "request.", str)
    if not uid:
        raise _Invalid("request.uid", "must not be empty")
    kind = _field(request, "kind", "request.", dict)
    resource = _field(request, "resource", "request.", dict)
    _field(kind, "version", "request.kind.", str)
    _field(resource, "version", "request.resource.", str)
    return AdmissionRequest(
        uid=uid,
        api_version=API_VERSION_V1,
        kind=_field(kind, "kind", "request.kind.", str),
        group=_optional(kind, "group", "request.kind.", str) or "",
        resource=_field(resource, "resource", "request.resource.", str),
        sub_resource=_optional(request, "subResource", "request.", str),
        operation=_field(request, "operation", "request.", str),
        namespace=_optional(request, "namespace", "request.", str),
        name=_optional(request, "name", "request.", str),
        object=_optional(request, "object", "request.", dict),
        dry_run=bool(_optional(request, "dryRun", "request.", bool)),
    )


def parse_review(doc: Any) -> AdmissionRequest:
    """Validate a parsed body as an AdmissionReview; raise `ReviewError` when it is not one."""
    try:
        return _validated(doc)
    except _Invalid as exc:
        uid, api_version = _salvage(doc)
        message = f"not an {API_VERSION_V1} AdmissionReview: {exc}"
        raise ReviewError(message, uid=uid, api_version=api_version) from None


def pod_shape_problem(pod: Mapping[str, Any] | None) -> str | None:
    """Why `pod` cannot be a Pod object, or None when its shape is usable.

    `pod` is parsed JSON, so objects are dicts (cheaper to test than the `Mapping` ABC).
    """
    if not isinstance(pod, dict):
        return "request.object is missing"
    metadata = pod.get("metadata", {})
    if not isinstance(metadata, dict):
        return "request.object.metadata is not an object"
    annotations = metadata.get("annotations", {})
    if annotations is not None and not isinstance(annotations, dict):
        return "request.object.metadata.annotations is not an object"
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return "request.object.spec is not an object"
    for list_name in ("containers", "initContainers"):
        containers = spec.get(list_name, [])
        if containers is None:
            continue
        if not isinstance(containers, list):
            return f"request.object.spec.{list_name} is not a list of named containers"
        for container in containers:
            if not (isinstance(container, dict) and isinstance(container.get("name"), str)):
                return f"request.object.spec.{list_name} is not a list of named containers"
    return None


def review_response(
    uid: str,
    *,
    api_version: str = API_VERSION_V1,
    patch: str = "",
    warnings: Sequence[str] = (),
) -> bytes:
    """Serialize an allowing AdmissionReview answer; `patch` is the base64 JSON patch
    (`encode_patch`), omitted when empty."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = patch
    if warnings:
        response["warnings"] = list(warnings)
    return orjson.dumps({"apiVersion": api_version, "kind": REVIEW_KIND, "response": response})


def encode_patch(ops: Sequence[Mapping[str, Any]]) -> str:
    """A JSON patch as an AdmissionReview answer carries it (base64 of its JSON)."""
    return base64.b64encode(orjson.dumps(list(ops))).decode("ascii")


def decode_patch(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch carried by an AdmissionReview answer ([] when there is none)."""
    encoded = (response.get("response") or {}).get("patch")
    return orjson.loads(base64.b64decode(encoded)) if encoded else []
