"""Warning Events on kerf objects that ask for what kerf cannot do, each told once per
generation of the object: `Infeasible` on a static policy that sets a value no node can
hold (app/policy/feasibility.py; the workloads it matches are blocked `Infeasible`), and
`UnsupportedField` on a strategy that sets a Kubex field kerf accepts but does not carry
out as set (app/model/strategy_fields.py)."""

from __future__ import annotations

import logging

from app.model.crd import API_VERSION, AutomationStrategySpec, KerfResource
from app.model.owners import WorkloadRef
from app.model.strategy_fields import unhonoured_fields, unhonoured_policy_fields
from app.policy.feasibility import describe_largest, infeasible_policy_values
from app.runtime.clock import Clock
from app.runtime.jsonlog import log_fields
from app.store.allocatable import largest_allocatable
from app.store.view import ClusterView
from reconciler.api import Writer
from reconciler.events import event_body, pending_event

logger = logging.getLogger("kerf.reconciler")

INFEASIBLE = "Infeasible"
UNSUPPORTED_FIELD = "UnsupportedField"
STATIC_KINDS = ("StaticPolicy", "ClusterStaticPolicy")
STRATEGY_KINDS = ("AutomationStrategy", "ClusterAutomationStrategy")
PolicyKey = tuple[str, str, str]


class PolicyEvents:
    """Tells each static policy's infeasible values and each strategy's unsupported
    fields once (kept in memory)."""

    def __init__(self, writer: Writer, *, instance: str, clock: Clock) -> None:
        self._writer = writer
        self._instance = instance
        self._clock = clock
        self._told: dict[PolicyKey, str] = {}

    async def report(self, view: ClusterView) -> int:
        """An Event for every static policy whose infeasible values, and every strategy
        whose unsupported fields, were not told yet; returns the number of Events written."""
        with view.lock:
            largest = largest_allocatable(view)
            policies = [p for kind in STATIC_KINDS for p in view.kerf_objects(kind)]
            strategies = [s for kind in STRATEGY_KINDS for s in view.kerf_objects(kind)]
        written = 0
        for strategy in strategies:
            spec = getattr(strategy, "spec", None)
            fields = unhonoured_fields(spec) if isinstance(spec, AutomationStrategySpec) else []
            note = f"kerf accepts but does not carry out {'; '.join(fields)}" if fields else ""
            written += await self._once(strategy, UNSUPPORTED_FIELD, note)
        for policy in policies:
            fields = unhonoured_policy_fields(policy)
            note = f"kerf accepts but does not carry out {'; '.join(fields)}" if fields else ""
            written += await self._once(policy, UNSUPPORTED_FIELD, note, about="fields")
        if largest is None:
            return written
        for policy in policies:
            over = infeasible_policy_values(policy, largest)
            note = (
                f"{', '.join(over)} is more than any node's allocatable (the largest: "
                f"{describe_largest(largest)}): the workloads it matches are blocked Infeasible"
                if over
                else ""
            )
            written += await self._once(policy, INFEASIBLE, note)
        return written

    async def _once(self, obj: KerfResource, reason: str, note: str, about: str = "") -> int:
        """Tell `note` on the object unless told for this generation already (per
        `about`: an object may be told more than one thing); an empty note forgets what was
        told. Returns the number of Events written."""
        key = (obj.kind, obj.metadata.namespace or "", f"{obj.metadata.name}/{about}")
        if not note:
            self._told.pop(key, None)
            return 0
        told = f"{obj.metadata.generation}/{note}"
        if self._told.get(key) == told:
            return 0
        await self._tell(obj, reason, note)
        self._told[key] = told
        return 1

    async def _tell(self, policy: KerfResource, reason: str, note: str) -> None:
        namespace = policy.metadata.namespace or ""
        log_fields(
            logger,
            "kerf object asks what kerf cannot do",
            logging.WARNING,
            policy=f"{policy.kind} {'/'.join(filter(None, (namespace, policy.metadata.name)))}",
            reason=reason,
            message=note,
        )
        # A cluster policy's Event lives in the default namespace, as kubectl's do.
        ref = WorkloadRef(policy.kind, namespace or "default", policy.metadata.name)
        body = event_body(
            ref,
            API_VERSION,
            policy.metadata.uid,
            pending_event(
                ref, reason, note, warning=True, now=self._clock(), action="ValidatePolicy"
            ),
            self._instance,
        )
        if not namespace:
            del body["involvedObject"]["namespace"]
        await self._writer.create_event(body)
