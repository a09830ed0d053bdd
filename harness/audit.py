"""The backend's audit log of writes (`Backend.audit_log`: kube-apiserver's log backend on
the real control plane, its twin in kubesim), read as one entry per write request: who
sent it, what it wrote, when it was received and answered, and the answer's code; for a
Lease write (logged at level Request), the holder it named."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One write request as the API server logged it."""

    user: str
    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    received: datetime
    completed: datetime
    #: the holderIdentity a Lease write sent ("" for a release; None: none sent, or not
    #: a Lease write logged with its object)
    holder: str | None = None

    @property
    def what(self) -> str:
        """`resource[/subresource] namespace/name`, for a failure message."""
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.verb} {resource} {self.namespace}/{self.name} ({self.code})"


def read_audit(path: Path) -> list[AuditEntry]:
    """The entries logged so far, in the order they were logged (a line still being
    written is left for the next read)."""
    if not path.exists():
        return []
    entries = []
    for line in path.read_bytes().splitlines():
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if event.get("stage") != "ResponseComplete":
            continue
        ref = event.get("objectRef") or {}
        sent = event.get("requestObject")
        holder = None
        spec = sent.get("spec") if isinstance(sent, dict) else None
        if ref.get("resource") == "leases" and isinstance(spec, dict) and "holderIdentity" in spec:
            holder = str(spec["holderIdentity"] or "")
        entries.append(
            AuditEntry(
                user=str((event.get("user") or {}).get("username") or ""),
                verb=str(event.get("verb") or ""),
                resource=str(ref.get("resource") or ""),
                subresource=str(ref.get("subresource") or ""),
                namespace=str(ref.get("namespace") or ""),
                name=str(ref.get("name") or ""),
                code=int((event.get("responseStatus") or {}).get("code") or 0),
                received=datetime.fromisoformat(event["requestReceivedTimestamp"]),
                completed=datetime.fromisoformat(event["stageTimestamp"]),
                holder=holder,
            )
        )
    return entries
