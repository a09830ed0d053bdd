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
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class _GroupVersionKind(_Model):
    group: str = ""
    version: str
    kind: str


class _GroupVersionResource(_Model):
    group: str = ""
    version: str
    resource: str


class _Request(_Model):
    uid: str = Field(min_length=1)
    kind: _GroupVersionKind
    resource: _GroupVersionResource
    sub_resource: str | None = Field(default=None, alias="subResource")
    name: str | None = None
    namespace: str | None = None
    operation: str
    object: dict[str, Any] | None = None
    dry_run: bool | None = Field(default=None, alias="dryRun")


class _Review(_Model):
    api_version: Literal["admission.k8s.io/v1"] = Field(alias="apiVersion")
    kind: Literal["AdmissionReview"]
    request: _Request


@dataclass(frozen=True, slots=True)
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
    api_version = version if version in KNOWN_API_VERSIONS else API_VERSION_V1
    request = doc.get("request")
    uid = request.get("uid") if isinstance(request, Mapping) else None
    return (uid if isinstance(uid, str) else ""), api_version


def _describe(exc: ValidationError) -> str:
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "<root>"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"not an {API_VERSION_V1} AdmissionReview: {where}: {first['msg']}{more}"


def parse_review(doc: Any) -> AdmissionRequest:
    """Validate a parsed body as an AdmissionReview; raise `ReviewError` when it is not one."""
    try:
        review = _Review.model_validate(doc)
    except ValidationError as exc:
        uid, api_version = _salvage(doc)
        raise ReviewError(_describe(exc), uid=uid, api_version=api_version) from None
    request = review.request
    return AdmissionRequest(
        uid=request.uid,
        api_version=review.api_version,
        kind=request.kind.kind,
        group=request.kind.group,
        resource=request.resource.resource,
        sub_resource=request.sub_resource,
        operation=request.operation,
        namespace=request.namespace,
        name=request.name,
        object=request.object,
        dry_run=bool(request.dry_run),
    )


def pod_shape_problem(pod: Mapping[str, Any] | None) -> str | None:
    """Why `pod` cannot be a Pod object, or None when its shape is usable."""
    if not isinstance(pod, Mapping):
        return "request.object is missing"
    metadata = pod.get("metadata", {})
    if not isinstance(metadata, Mapping):
        return "request.object.metadata is not an object"
    annotations = metadata.get("annotations", {})
    if annotations is not None and not isinstance(annotations, Mapping):
        return "request.object.metadata.annotations is not an object"
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return "request.object.spec is not an object"
    for list_name in ("containers", "initContainers"):
        containers = spec.get(list_name, [])
        if containers is None:
            continue
        if not isinstance(containers, list) or not all(
            isinstance(c, Mapping) and isinstance(c.get("name"), str) for c in containers
        ):
            return f"request.object.spec.{list_name} is not a list of named containers"
    return None


def review_response(
    uid: str,
    *,
    api_version: str = API_VERSION_V1,
    patch: Sequence[Mapping[str, Any]] = (),
    warnings: Sequence[str] = (),
) -> bytes:
    """Serialize an allowing AdmissionReview answer; the patch is omitted when empty."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(list(patch))).decode("ascii")
    if warnings:
        response["warnings"] = list(warnings)
    return orjson.dumps({"apiVersion": api_version, "kind": REVIEW_KIND, "response": response})


def decode_patch(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch carried by an AdmissionReview answer ([] when there is none)."""
    encoded = (response.get("response") or {}).get("patch")
    return orjson.loads(base64.b64decode(encoded)) if encoded else []
