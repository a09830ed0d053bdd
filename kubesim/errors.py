"""API errors rendered as the `Status` bodies a real kube-apiserver returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubesim.resources import ResourceType


@dataclass(frozen=True)
class Cause:
    """One entry of `Status.details.causes` (a field-level validation failure)."""

    reason: str
    message: str
    field: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Render as the API's StatusCause."""
        out: dict[str, Any] = {"reason": self.reason, "message": self.message}
        if self.field:
            out["field"] = self.field
        return out


@dataclass
class ApiError(Exception):
    """An error answered with a `Status` body and the matching HTTP code."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> dict[str, Any]:
        """The `Status` object for the response body."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(rt: ResourceType | None, name: str) -> dict[str, Any]:
    if rt is None:
        return {"name": name} if name else {}
    out: dict[str, Any] = {"kind": rt.plural}
    if name:
        out["name"] = name
    if rt.group:
        out["group"] = rt.group
    return out


def qualified(rt: ResourceType) -> str:
    """`pods` or `deployments.apps`: how the real server names a resource in messages."""
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def not_found(rt: ResourceType, name: str) -> ApiError:
    """404 for a missing object, worded like the real server."""
    return ApiError(404, "NotFound", f'{qualified(rt)} "{name}" not found', _details(rt, name))


def namespace_not_found(name: str) -> ApiError:
    """404 for writing into a namespace that does not exist."""
    return ApiError(
        404,
        "NotFound",
        f'namespaces "{name}" not found',
        {"name": name, "kind": "namespaces"},
    )


def already_exists(rt: ResourceType, name: str) -> ApiError:
    """409 AlreadyExists for a create of an existing name."""
    return ApiError(
        409, "AlreadyExists", f'{qualified(rt)} "{name}" already exists', _details(rt, name)
    )


def conflict(rt: ResourceType, name: str, why: str | None = None) -> ApiError:
    """409 Conflict for a stale resourceVersion (optimistic concurrency)."""
    why = (
        why
        or "the object has been modified; please apply your changes to the latest version and try again"
    )
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(rt)} "{name}": {why}',
        _details(rt, name),
    )


def invalid(rt: ResourceType, name: str, causes: list[Cause]) -> ApiError:
    """422 Invalid with one cause per field error, message formatted like the real server."""
    kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    parts = [_cause_text(c) for c in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details = _details(rt, name)
    details["kind"] = rt.kind
    details["causes"] = [c.to_dict() for c in causes]
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {joined}', details)


def _cause_text(cause: Cause) -> str:
    return f"{cause.field}: {cause.message}" if cause.field else cause.message


def forbidden(rt: ResourceType, name: str, why: str) -> ApiError:
    """403 Forbidden from an admission plugin (admission.NewForbidden's wording)."""
    return ApiError(
        403, "Forbidden", f'{qualified(rt)} "{name}" is forbidden: {why}', _details(rt, name)
    )


def bad_request(message: str) -> ApiError:
    """400 BadRequest."""
    return ApiError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    """405 MethodNotAllowed."""
    return ApiError(405, "MethodNotAllowed", message)


def gone(message: str) -> ApiError:
    """410 Expired/Gone: the requested resourceVersion is older than the kept history."""
    return ApiError(410, "Expired", message)


def internal(message: str) -> ApiError:
    """500 InternalError."""
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def too_many_requests(message: str, details: dict[str, Any] | None = None) -> ApiError:
    """429 TooManyRequests (used by eviction and by fault injection)."""
    return ApiError(429, "TooManyRequests", message, details or {})
