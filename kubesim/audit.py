"""An audit log of the writes, in the shape kube-apiserver's log backend writes one
(`--audit-log-path`, JSON lines of `audit.k8s.io/v1` Events at level Metadata, stage
ResponseComplete only; a Lease write at level Request, with the object it sent, as
devcluster's policy logs those in kerf's namespace), so a test reads who wrote what, and
when, the same way on both backends. kubesim authenticates nobody: a request's user is the
bearer token it sent."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import orjson

from kubesim.resources import ResourceType


def _micro(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class AuditLog:
    """Appends one line per write request, whatever its answer (a refused write was still
    received). Timestamps are the wall clock, as the real server's."""

    path: Path

    def __post_init__(self) -> None:
        self._out: IO[bytes] = open(self.path, "ab")  # noqa: SIM115 - open for the server's life

    def record(
        self,
        *,
        verb: str,
        rt: ResourceType,
        namespace: str,
        name: str,
        subresource: str,
        user: str,
        uri: str,
        code: int,
        received: datetime,
        request_object: object = None,
    ) -> None:
        """One write request, answered with `code`; `request_object` (what a Lease write
        sent) is logged at level Request."""
        ref: dict[str, str] = {"resource": rt.plural, "apiVersion": rt.version}
        if rt.group:
            ref["apiGroup"] = rt.group
        for key, value in (("namespace", namespace), ("name", name), ("subresource", subresource)):
            if value:
                ref[key] = value
        event = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata" if request_object is None else "Request",
            "auditID": str(uuid.uuid4()),
            "stage": "ResponseComplete",
            "requestURI": uri,
            "verb": verb,
            "user": {"username": user},
            "objectRef": ref,
            "responseStatus": {"metadata": {}, "code": code},
            **({} if request_object is None else {"requestObject": request_object}),
            "requestReceivedTimestamp": _micro(received),
            "stageTimestamp": _micro(datetime.now(UTC)),
        }
        self._out.write(orjson.dumps(event) + b"\n")
        self._out.flush()

    def close(self) -> None:
        """Close the file."""
        self._out.close()
