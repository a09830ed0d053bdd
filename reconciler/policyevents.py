"""A Warning Event `Infeasible` on a static policy that sets a value no node can hold
(app/feasibility.py): the workloads it matches are blocked `Infeasible` and the policy
says why, once per generation of the policy and largest node."""

from __future__ import annotations

import logging

from app.clock import Clock
from app.feasibility import describe_largest, infeasible_policy_values
from app.jsonlog import log_fields
from app.models import API_VERSION, KerfResource
from app.owners import WorkloadRef
from app.view import ClusterView
from reconciler.api import Writer
from reconciler.events import event_body, pending_event

logger = logging.getLogger("kerf.reconciler")

INFEASIBLE = "Infeasible"
STATIC_KINDS = ("StaticPolicy", "ClusterStaticPolicy")
PolicyKey = tuple[str, str, str]


class PolicyEvents:
    """Tells each static policy's infeasible values once (kept in memory)."""

    def __init__(self, writer: Writer, *, instance: str, clock: Clock) -> None:
        self._writer = writer
        self._instance = instance
        self._clock = clock
        self._told: dict[PolicyKey, str] = {}

    async def report(self, view: ClusterView) -> int:
        """An Event for every static policy whose infeasible values were not told yet;
        returns the number of Events written."""
        with view.lock:
            largest = view.largest_allocatable()
            policies = [p for kind in STATIC_KINDS for p in view.kerf_objects(kind)]
        if largest is None:
            return 0
        written = 0
        for policy in policies:
            key = (policy.kind, policy.metadata.namespace or "", policy.metadata.name)
            over = infeasible_policy_values(policy, largest)
            if not over:
                self._told.pop(key, None)
                continue
            note = (
                f"{', '.join(over)} is more than any node's allocatable (the largest: "
                f"{describe_largest(largest)}): the workloads it matches are blocked Infeasible"
            )
            told = f"{policy.metadata.generation}/{note}"
            if self._told.get(key) == told:
                continue
            await self._tell(policy, note)
            self._told[key] = told
            written += 1
        return written

    async def _tell(self, policy: KerfResource, note: str) -> None:
        namespace = policy.metadata.namespace or ""
        log_fields(
            logger,
            "policy value no node can hold",
            logging.WARNING,
            policy=f"{policy.kind} {'/'.join(filter(None, (namespace, policy.metadata.name)))}",
            reason=INFEASIBLE,
            message=note,
        )
        # A cluster policy's Event lives in the default namespace, as kubectl's do.
        ref = WorkloadRef(policy.kind, namespace or "default", policy.metadata.name)
        body = event_body(
            ref,
            API_VERSION,
            policy.metadata.uid,
            pending_event(
                ref, INFEASIBLE, note, warning=True, now=self._clock(), action="ValidatePolicy"
            ),
            self._instance,
        )
        if not namespace:
            del body["regarding"]["namespace"]
        await self._writer.create_event(body)
