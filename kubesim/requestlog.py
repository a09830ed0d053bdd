"""Who wrote what, in the order the server received it: the writes kubesim served, each
with the bearer token that sent it (the real server's audit log, reduced to what a test
counts). Off unless a test turns it on (`sim.http.requests.enable()`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ServedWrite:
    """One write request as received (before faults or validation: a refused write
    counts too)."""

    #: position among every request logged, in the order received
    seq: int
    token: str
    verb: str
    resource: str
    namespace: str
    name: str
    subresource: str


@dataclass
class RequestLog:
    """The writes received while enabled."""

    enabled: bool = False
    writes: list[ServedWrite] = field(default_factory=list)

    def enable(self) -> None:
        """Start logging writes."""
        self.enabled = True

    def add(
        self,
        authorization: str,
        verb: str,
        resource: str,
        namespace: str,
        name: str,
        subresource: str,
    ) -> None:
        """Log one write (a no-op while disabled)."""
        if not self.enabled:
            return
        token = authorization.removeprefix("Bearer ").strip()
        self.writes.append(
            ServedWrite(len(self.writes), token, verb, resource, namespace, name, subresource)
        )
