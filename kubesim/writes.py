"""The write log: every write a client got carried out, with who sent it and who held
each Lease at that moment (`sim.writes`; off unless `enabled`).

A soak test reads it to attribute writes to the leader of the time; a write whose answer
an `after_commit` fault replaced is recorded too, flagged `answer_lost`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kubesim.resources import ResourceType
from kubesim.store import Store

LEASES = ("coordination.k8s.io", "leases")


@dataclass(frozen=True, slots=True)
class Write:
    """One carried-out write, in commit order (`seq`)."""

    seq: int
    verb: str
    group: str
    resource: str
    namespace: str
    name: str
    subresource: str
    #: the bearer token the client sent ("" without one): kubesim's only client identity
    user: str
    status: int
    #: "namespace/name" -> holderIdentity of every Lease, just after this write
    lease_holders: dict[str, str]
    answer_lost: bool = False


@dataclass
class WriteLog:
    """Records writes while `enabled`; `listeners` are called with each one as it is
    recorded (the cluster is then exactly as the write left it)."""

    store: Store
    enabled: bool = False
    entries: list[Write] = field(default_factory=list)
    listeners: list[Callable[[Write], None]] = field(default_factory=list)

    def record(
        self,
        verb: str,
        rt: ResourceType,
        namespace: str,
        name: str,
        subresource: str,
        *,
        user: str,
        status: int,
        answer_lost: bool = False,
    ) -> Write | None:
        """Append one write (nothing when not enabled)."""
        if not self.enabled:
            return None
        holders = {
            f"{lease['metadata'].get('namespace', '')}/{lease['metadata']['name']}": str(
                (lease.get("spec") or {}).get("holderIdentity") or ""
            )
            for lease in self.store.iter(LEASES)
        }
        write = Write(
            seq=len(self.entries),
            verb=verb,
            group=rt.group,
            resource=rt.plural,
            namespace=namespace,
            name=name,
            subresource=subresource,
            user=user,
            status=status,
            lease_holders=holders,
            answer_lost=answer_lost,
        )
        self.entries.append(write)
        for listener in self.listeners:
            listener(write)
        return write
