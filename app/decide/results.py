"""What a decision yields: the outcome for one pod and the values it selected."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from app.model.owners import WorkloadRef
from app.model.quantities import format_resource
from app.model.workloads import Resources
from app.policy.plans import WorkloadPlan
from app.policy.schedule import Schedule
from app.policy.selection import Candidate, Target


@dataclass(frozen=True, slots=True)
class SelectedValue:
    """The winning policy for one target, as explain and the pod annotation show it."""

    container: str
    field: str
    resource: str
    value: str
    policy_kind: str
    policy_namespace: str
    policy_name: str
    annotation_key: str

    def as_dict(self) -> dict[str, str]:
        """The JSON form of SPEC §9."""
        return {
            "container": self.container,
            "field": self.field,
            "resource": self.resource,
            "value": self.value,
            "policyKind": self.policy_kind,
            "policyNamespace": self.policy_namespace,
            "policyName": self.policy_name,
            "annotationKey": self.annotation_key,
        }


@dataclass(frozen=True, slots=True)
class Filtered:
    """A value dropped because it would take the pod past a bound of its namespace."""

    target: Target
    reason: str
    #: the bound, named with its object: `LimitRange shop/bounds: maximum memory …`
    message: str

    def as_dict(self) -> dict[str, str]:
        t = self.target
        return {
            "container": t.container,
            "field": t.field,
            "resource": t.resource,
            "reason": self.reason,
            "message": self.message,
        }


@dataclass(slots=True)
class PodDecision:
    """`{outcome, reason, message, values}` for one pod, with what explain shows.

    Readers never change a decision; it is not frozen because one is built for every
    pod decided, and a frozen dataclass's constructor costs several times more."""

    namespace: str
    name: str
    owner: WorkloadRef | None
    outcome: Literal["apply", "blocked", "skipped"]
    reason: str | None
    message: str
    method: str | None = None
    #: running path: an in-place resize of the change would restart a container (its
    #: resizePolicy, a sidecar's as an app container's), a disruption like an eviction
    restarts: bool = False
    #: every container's resources after the decision (its current ones unless applied)
    final: Mapping[str, Resources] = field(default_factory=dict)
    changed: tuple[str, ...] = ()
    selection: Mapping[Target, Candidate] = field(default_factory=dict)
    #: the winning policy of every target, ordered by container, field, resource
    selected: tuple[SelectedValue, ...] = ()
    #: `selected` in its JSON form (`SelectedValue.as_dict`), shared with every decision
    #: of the plan: readers never change it
    selected_json: tuple[dict[str, str], ...] = ()
    dropped: list[tuple[Target, str]] = field(default_factory=list)
    #: the dropped values a namespace bound took, with the bound
    filtered: tuple[Filtered, ...] = ()
    next_allowed_at: datetime | None = None
    fingerprint: str | None = None
    plan: WorkloadPlan | None = None
    #: audit mode: the id an approval names (an approved change carries it too)
    proposal_id: str | None = None
    #: audit mode: the containers' resources an approval would set now, the guardrails'
    #: step (maxChangePercent, the minimums, …), and those the policies ask in the end
    proposal: Mapping[str, Resources] = field(default_factory=dict)
    proposal_target: Mapping[str, Resources] = field(default_factory=dict)
    proposal_target_id: str = ""
    proposal_schedule: Schedule | None = None

    @property
    def containers(self) -> dict[str, dict[str, dict[str, str]]]:
        """The resources the pod would have after the decision, as quantities."""
        return {c: format_resources(r) for c, r in self.final.items()}

    @property
    def values(self) -> dict[str, dict[str, dict[str, str]]]:
        """The full resources of the containers the decision changes."""
        return {c: format_resources(self.final[c]) for c in self.changed}


def format_resources(resources: Resources) -> dict[str, dict[str, str]]:
    """Canonical quantity strings, empty fields left out."""
    return {
        fld: {r: format_resource(r, v) for r, v in sorted(values.items())}
        for fld, values in resources.items()
        if values
    }


@dataclass(frozen=True, slots=True)
class AuditProposal:
    """A change waiting for approval in audit mode: what an approval applies now (the
    guardrails' step) and what the policies ask in the end."""

    id: str
    step: dict[str, Resources]
    target: dict[str, Resources]
    #: what `approve-target` names: the target (every container's values once all steps
    #: are made) and the last rollback, so a rollback ends an approval of the whole way
    target_id: str = ""
    #: the steps left to the target, this one included, and the earliest time of this one
    schedule: Schedule | None = None


def describe_resources(containers: Mapping[str, Mapping[str, Mapping[str, str]]]) -> str:
    """Containers' resources in one line: `app requests cpu=250m,memory=256Mi; …`."""
    parts = []
    for name, resources in sorted(containers.items()):
        for fld in ("requests", "limits"):
            values = resources.get(fld) or {}
            if values:
                parts.append(
                    f"{name} {fld} " + ",".join(f"{r}={q}" for r, q in sorted(values.items()))
                )
    return "; ".join(parts)
