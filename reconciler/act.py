"""Carries out a pass's plan through `reconciler.api`'s writer, and notes in the pass's
`Outcome` what each write answered (a resize accepted or rejected, an eviction taken,
refused or already gone). It decides nothing: the plan says what to write.

- eviction goes through the Eviction API (PDBs, 429 retried later), under a global rate
  limit, and is recorded in the status first (`reconciler.intent`), so an Event is never
  lost to a crash between the two;
- a resize sends only the changed containers (`pods/resize`); a 409, 429 or 5xx fails the
  pass (the queue retries it), another 4xx is a rejected proposal, remembered so it is
  never sent again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from app.kube.errors import ApiStatusError
from app.model.annotations import ROLLBACK_STATE
from app.model.records import record_name
from app.outcome.rollout import WEBHOOK_UNAVAILABLE, Action
from app.runtime.jsonlog import log_fields
from app.store.view import ClusterView
from reconciler.api import Writer
from reconciler.events import event_body, pending_event
from reconciler.execution import ExecutionConfig
from reconciler.intent import applied_by, eviction_intent, pending_events_of
from reconciler.memory import WorkloadMemory
from reconciler.metrics import ReconcilerMetrics
from reconciler.outcome import Outcome
from reconciler.plan import PassPlan
from reconciler.ratelimit import TokenBucket
from reconciler.report import Report, applied_entry, label, pod_name
from reconciler.status import recommendation_object

logger = logging.getLogger("kerf.reconciler")


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def record_version(plan: PassPlan) -> str:
    """The version of the record the pass read ("" without one)."""
    return (plan.record.metadata.resource_version or "") if plan.record is not None else ""


class Actuator:
    """The writes of a plan, in order, each remembered where the view must catch up."""

    def __init__(
        self,
        view: ClusterView,
        writer: Writer,
        metrics: ReconcilerMetrics,
        config: ExecutionConfig,
        evictions: TokenBucket,
    ) -> None:
        self.view = view
        self.writer = writer
        self.metrics = metrics
        self.config = config
        self.evictions = evictions

    def _wrote(
        self,
        memory: WorkloadMemory,
        key: str,
        before: str,
        answer: Mapping[str, Any],
        done: Outcome,
    ) -> None:
        """The version the pass read (or the one an earlier write of this pass answered
        with) is stale; the answer's is not."""
        after = _version(answer)
        memory.wrote(key, done.versions.get(key, before), after)
        if after:
            done.versions[key] = after
        done.wrote = True

    async def annotate(
        self,
        plan: PassPlan,
        patch: Mapping[str, str | None],
        memory: WorkloadMemory,
        done: Outcome,
    ) -> None:
        """Merge-patch kerf's annotations on the workload (the policy values, or the
        rollback state)."""
        answer = await self.writer.patch_annotations(plan.obj, patch)
        self._wrote(memory, "workload", _version(plan.obj), answer, done)
        memory.remember_annotations(patch)

    async def publish(self, plan: PassPlan, memory: WorkloadMemory, done: Outcome) -> None:
        """The policy values on the workload's annotations."""
        if plan.publish:
            await self.annotate(plan, plan.publish, memory, done)
            log_fields(
                logger,
                "published policy values",
                workload=label(plan.ref),
                keys=sorted(plan.publish),
            )

    def settle(self, plan: PassPlan, done: Outcome) -> None:
        """An eviction recorded and not reported: if it went out, report it as the
        replica that made it would have; if not, the status write drops it."""
        settle = plan.settle
        if settle is None:
            return
        if not settle.went:
            log_fields(
                logger,
                "eviction intent dropped: it did not go out",
                pod=settle.intent.pod_name,
                because="this replica did not carry it out"
                if settle.unsent
                else "the pod is still there",
            )
            return
        done.named.extend(pending_events_of(settle.intent))
        done.applied = done.applied or applied_by(settle.intent)
        log_fields(logger, "eviction intent found done", pod=settle.intent.pod_name)

    async def step_rollback(self, plan: PassPlan, memory: WorkloadMemory, done: Outcome) -> None:
        """The rollback monitor's step: its state annotation, its Events, its next look."""
        result = plan.rollback
        if result is None:
            return
        if result.write and result.annotation is not None:
            await self.annotate(plan, {ROLLBACK_STATE: result.annotation}, memory, done)
            log_fields(
                logger,
                "rollback state",
                workload=label(plan.ref),
                mode=result.state.mode if result.state else None,
                turn=result.state.turn if result.state else None,
                reason=result.state.failure_reason if result.state else None,
            )
        for event in result.events:
            done.events.append((event.reason, event.message, event.type == "Warning"))
        if result.requeue_at is not None:
            done.again_in(max(0.05, (result.requeue_at - plan.now).total_seconds()))

    def note_holds(self, plan: PassPlan) -> None:
        """Count and log what the plan holds back (a fallback blocked, the webhook)."""
        rollout = plan.rollout
        if rollout.blocked is not None and rollout.blocked[0] == WEBHOOK_UNAVAILABLE:
            self.metrics.evictions.labels("held").inc()
        fallback = rollout.fallback
        if fallback is not None:
            self.metrics.fallbacks.labels(fallback.cause, "blocked").inc()
            log_fields(
                logger,
                "resize fallback blocked",
                reason=fallback.reason,
                workload=label(plan.ref),
                pod=fallback.pod,
                cause=fallback.cause,
                detail=fallback.detail,
            )

    async def act(
        self, plan: PassPlan, action: Action, memory: WorkloadMemory, done: Outcome
    ) -> str | None:
        """The pod action; returns the API's message when it rejected a resize (the plan
        is then computed again: its fallback is decided)."""
        if action.kind == "resize":
            assert action.decision is not None
            return await self._resize(action, memory, done)
        if action.cause is not None:
            fields = dict(
                workload=label(plan.ref),
                pod=pod_name(action.pod),
                cause=action.cause,
                detail=action.detail,
            )
            log_fields(logger, "resize fallback: evicting", **fields)
            note = f"in-place resize of pod {pod_name(action.pod)} {action.cause}: evicted it; "
            fallback = ("ResizeFallback", f"{note}{action.detail}".strip().rstrip("; "), True)
            if await self._evict(plan, action, memory, done, also=[fallback]):
                self.metrics.fallbacks.labels(action.cause, "evicted").inc()
            return None
        await self._evict(plan, action, memory, done)
        return None

    async def _resize(self, action: Action, memory: WorkloadMemory, done: Outcome) -> str | None:
        """Send the resize; returns the API's message when it rejected the proposal (a 4xx
        but 409 and 429: sending it again would only be rejected again)."""
        pod, decision = action.pod, action.decision
        assert decision is not None
        containers = {c: decision.containers[c] for c in decision.changed}
        fields = dict(pod=pod_name(pod), containers=containers)
        try:
            await self.writer.resize(pod, containers)
        except ApiStatusError as exc:
            if exc.code in (409, 429) or exc.code >= 500:
                raise  # not now: the queue tries the workload again with backoff
            self.metrics.resizes.labels("rejected").inc()
            log_fields(
                logger, "resize rejected by the API", logging.WARNING, error=str(exc), **fields
            )
            memory.reject(pod, decision, str(exc))
            return str(exc)
        self.metrics.resizes.labels("requested").inc()
        memory.mark_sent(pod)
        log_fields(logger, "resized in place", **fields)
        done.busy = True
        done.applied = applied_entry(decision, "inPlace")
        done.resized = pod_name(pod)
        done.again_in(self.config.follow_s)
        return None

    async def _evict(
        self,
        plan: PassPlan,
        action: Action,
        memory: WorkloadMemory,
        done: Outcome,
        *,
        also: list[tuple[str, str, bool]] | None = None,
    ) -> bool:
        """Evict one pod, unless the rate limit says wait. The action's decision is the
        plan the replacement carries (recorded as applied); None when the eviction applies
        no plan of its own (its note says why). `also`: Events besides `Evicted`. The
        eviction is recorded in the status before it is asked for."""
        pod, decision = action.pod, action.decision
        name = pod_name(pod)
        wait = self.evictions.try_take()
        if wait > 0:
            done.busy = True
            done.again_in(wait)
            return False
        # A fallback's decision carries no values: its replacement gets the change already
        # under way, which stays the last applied.
        applied = (
            applied_entry(decision, "evict") if decision is not None and decision.values else None
        )
        note = action.note or f"evicted pod {name}; its replacement is sized at admission"
        told = [("Evicted", note, False), *(also or [])]
        events = [pending_event(plan.ref, r, n, warning=w, now=plan.now) for r, n, w in told]
        recorded = events[0]["name"]  # what names the record (`intent_name`)
        memory.unsent_eviction = recorded
        await self._record_intent(plan, eviction_intent(pod, applied, events), memory, done)
        memory.unsent_eviction = None  # asked for: an answer lost leaves it to the pod to tell
        result = await self.writer.evict(pod)
        self.metrics.evictions.labels(result).inc()
        if result == "evicted":
            memory.mark_sent(pod)
        else:
            memory.unsent_eviction = recorded
        done.busy = True
        if result == "refused":
            count = memory.refused(pod)
            delay = min(self.config.refused_retry_max_s, self.config.refused_retry_s * 2**count)
            log_fields(
                logger,
                "eviction refused (disruption budget); retrying later",
                pod=name,
                delay=delay,
            )
            done.again_in(delay)
            return False
        memory.evicted(pod)
        if result == "evicted":
            done.evicted = name
            done.applied = done.applied or applied
            done.named.extend(events)
            log_fields(logger, "evicted", pod=name, values=decision.values if decision else None)
        done.again_in(self.config.follow_s)
        return result == "evicted"

    async def _record_intent(
        self, plan: PassPlan, intent: dict[str, Any], memory: WorkloadMemory, done: Outcome
    ) -> None:
        """Write the eviction intent into the record's status (creating the record first
        when it is missing): a write the leader fence covers, so a replica that no longer
        leads neither records nor evicts."""
        ref = plan.ref
        if plan.record is None and not done.created:
            await self._create_record(plan, memory, done)
        name = record_name(ref.kind, ref.name)
        answer = await self.writer.patch_status(ref.namespace, name, {"pendingEviction": intent})
        self._wrote(memory, "record", record_version(plan), answer, done)
        done.intent = True
        done.status_version = _version(answer) or None

    async def _create_record(self, plan: PassPlan, memory: WorkloadMemory, done: Outcome) -> None:
        uid = (plan.obj.get("metadata") or {}).get("uid")
        body = recommendation_object(plan.ref, str(plan.obj.get("apiVersion")), uid)
        answer = await self.writer.create_recommendation(body)
        self._wrote(memory, "record", "", answer, done)
        done.created = True

    async def report(
        self, plan: PassPlan, report: Report, memory: WorkloadMemory, done: Outcome
    ) -> None:
        """The report's writes: the record created when missing, the Events told, then
        the status that records them."""
        ref = plan.ref
        if report.seen is not None:
            memory.seen_status = report.seen
        if report.hold is not None:
            memory.unreported = report.hold
            return
        if report.create is not None:
            await self._create_record(plan, memory, done)
        api_version = str(plan.obj.get("apiVersion"))
        uid = (plan.obj.get("metadata") or {}).get("uid")
        for pending in report.events:
            body = event_body(ref, api_version, uid, pending, self.config.instance)
            await self.writer.create_event(body)
            self.metrics.events.labels(body["type"], body["reason"]).inc()
        # Told: a failure from here on tells them again under the same names (409).
        memory.untold = ()
        done.told = []
        done.wrote = done.wrote or bool(report.events) or report.create is not None
        if report.patch is not None:
            name = record_name(ref.kind, ref.name)
            answer = await self.writer.patch_status(ref.namespace, name, report.patch)
            self._wrote(memory, "record", record_version(plan), answer, done)
            if report.written is not None and _version(answer):
                memory.seen_status = (_version(answer), report.written)
        # Recorded: the rollout held in memory until now is in the status.
        memory.unreported = None
        if report.log is not None:
            log_fields(logger, "decision", **report.log)
