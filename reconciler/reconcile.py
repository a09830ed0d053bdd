"""One pass over one workload (SPEC §7): publish its policy values, execute the plan the
library decided for its running pods, report status and events.

The decisions are `app.decide`'s; this module only carries them out:
- one pod at a time: the next is decided once the view shows the last change (so node
  capacity counts it); an in-place change (`pods/resize`, only the changed containers)
  goes on at once, a disruption (eviction, or a resize that restarts a container) only
  once the workload is whole and Ready again;
- an accepted resize is followed through its pod conditions; Deferred past
  `apply.fallbackAfter`, Infeasible, Error or a rejected patch fall back to eviction when
  `decide_fallback` allows it;
- eviction goes through the Eviction API (PDBs, 429 retried later), under a global rate
  limit, never while the webhook's Lease is stale;
- a change in place is reported (status, one `Resized` event) once, when its rollout is
  done, or as Pending once it has taken `pending_after`; anything else at once.

Everything a pass needs is in the cluster: pod specs and conditions, the workload's
annotations and its RightsizingRecommendation. Values that run on the pods but are not
recorded yet (a restart between a resize and its status write, or a pod sized at
admission) are recorded as applied when found, so a restart neither repeats nor forgets
a change.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson

from app.annotations import APPROVE, POD_INFO, ROLLBACK_STATE
from app.apitime import rfc3339 as stamp
from app.clock import Clock, utc_now
from app.decide import (
    PodDecision,
    decide_fallback,
    decide_pod,
    describe_resources,
    fallback_after,
    format_resources,
    pod_facts,
)
from app.durations import format_duration, parse_duration
from app.horizon import Horizon
from app.informer import ApiStatusError
from app.inputs import running_inputs
from app.jsonlog import log_fields
from app.leader import NotLeading
from app.models import PendingEviction, RightsizingRecommendation
from app.owners import WorkloadRef
from app.plans import WorkloadPlan, plan_for
from app.quantities import resource_amounts
from app.records import record_name
from app.rollback import rollback_state
from app.rollback_health import restart_counts
from app.rollback_monitor import Step, monitor_inputs
from app.rollback_monitor import step as rollback_step
from app.sync import ROLLBACK_KINDS
from app.view import ClusterView
from app.workloads import Workload
from reconciler.api import Writer
from reconciler.events import dedup_key, event_body, is_repeat, merged, pending_event
from reconciler.intent import applied_by, eviction_intent, happened, pending_events_of
from reconciler.metrics import ReconcilerMetrics
from reconciler.podstate import (
    is_ready,
    is_running,
    is_terminating,
    resize_progress,
    resources_running,
)
from reconciler.publish import annotation_patch
from reconciler.ratelimit import TokenBucket
from reconciler.restore import unschedulable_to_replace
from reconciler.status import (
    ShownProposal,
    Summary,
    build_status,
    derived_from,
    recommendation_object,
    rollback_status,
    status_digest,
    status_patch,
)

logger = logging.getLogger("kerf.reconciler")

Values = dict[str, dict[str, dict[str, str]]]
LeaseAge = Callable[[], Awaitable[datetime | None]]
#: (namespace, name) -> the pod as the API server has it now (None: no such pod)
ReadPod = Callable[[str, str], Awaitable[Mapping[str, Any] | None]]
#: How long (seconds) a workload waits for the view to show annotations this reconciler
#: wrote before it is decided again regardless (someone else may have changed them).
ANNOTATIONS_WAIT_S = 30.0
#: Reasons an eviction is held by the reconciler itself (not a guardrail of the library).
WEBHOOK_UNAVAILABLE = "WebhookUnavailable"


@dataclass(frozen=True, slots=True)
class ExecutionConfig:
    """How the reconciler executes plans (flags of `kerf reconciler`)."""

    #: evictions per second over the whole cluster
    eviction_rate: float = 1.0
    #: how soon a workload with a change under way is looked at again
    follow_s: float = 1.0
    #: how soon an eviction a PDB refused (429) is tried again; it doubles with each
    #: refusal of the same pod in a row, up to `refused_retry_max_s`
    refused_retry_s: float = 10.0
    refused_retry_max_s: float = 300.0
    #: how soon an eviction held for a stale webhook Lease is tried again
    lease_retry_s: float = 10.0
    #: a workload whose inputs did not change is decided again when its decisions can
    #: change (their `Horizon`: a pause running out, a window opening or closing, a
    #: cooldown ending, a recommendation growing stale), and at least this often (the
    #: times a decision reads that its span does not describe)
    steady_horizon: timedelta = timedelta(minutes=10)
    #: a change in place is reported (status, `Resized` event) when its rollout is done;
    #: one under way longer than this is reported as `Pending` first (0: report every pass)
    pending_after: timedelta = timedelta(seconds=10)
    instance: str = field(default_factory=socket.gethostname)


#: The fallback cause of a resize the node has not carried out, by its stage (an
#: `inProgress` one has none: it is followed).
_RESIZE_CAUSES = {"deferred": "Deferred", "infeasible": "Infeasible", "error": "Error"}


@dataclass(slots=True)
class _Pass:
    """What one pass did and found, beyond the decisions."""

    requeue: float | None = None
    #: a change is under way (made now, or still settling)
    busy: bool = False
    blocked: tuple[str, str] | None = None
    applied: dict[str, Any] | None = None
    #: the pod resized in place in this pass
    resized: str | None = None
    #: the status must be written now (a decision is about to read it)
    report: bool = False
    events: list[tuple[str, str, bool]] = field(default_factory=list)
    #: Events named already (an eviction's, in the intent recorded before it)
    named: list[dict[str, Any]] = field(default_factory=list)
    #: `named` and `events` as `pendingEvents` entries, once named (by the report)
    told: list[dict[str, Any]] | None = None
    #: the record as the pass read it; `created`: the pass created it (it was missing)
    record: RightsizingRecommendation | None = None
    created: bool = False
    #: this pass recorded an eviction intent (`pendingEviction`): its status clears it
    intent: bool = False

    #: something was written to the cluster in this pass
    wrote: bool = False
    #: ("workload" | "record", workload key) -> the version this pass's last write of it
    #: answered with
    versions: dict[tuple[str, Any], str] = field(default_factory=dict)

    def again_in(self, seconds: float) -> None:
        self.requeue = seconds if self.requeue is None else min(self.requeue, seconds)


@dataclass(frozen=True, slots=True)
class _Unreported:
    """A change in place whose rollout is under way and not in the status yet."""

    since: datetime
    last_applied: dict[str, Any]


def _amounts(values: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, int | None]]:
    return {fld: resource_amounts(resources) for fld, resources in values.items() if resources}


def same_values(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Two container → {requests, limits} maps hold the same amounts (1000m == 1)."""
    if set(a) != set(b):
        return False
    return all(_amounts(a[c]) == _amounts(b[c]) for c in a)


def _pod_name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


def _proposal_key(pod: Mapping[str, Any], decision: PodDecision) -> tuple[str, Any, bytes]:
    """What identifies one resize proposal for one pod: its uid, its spec's generation
    and the values proposed."""
    meta = pod.get("metadata") or {}
    values = orjson.dumps(decision.values, option=orjson.OPT_SORT_KEYS)
    return str(meta.get("uid")), meta.get("generation"), values


class WorkloadReconciler:
    """Reconciles one workload at a time over the shared view."""

    def __init__(
        self,
        view: ClusterView,
        writer: Writer,
        metrics: ReconcilerMetrics,
        *,
        webhook_lease: LeaseAge | None,
        read_pod: ReadPod | None = None,
        clock: Clock = utc_now,
        config: ExecutionConfig | None = None,
        eviction_bucket: TokenBucket | None = None,
    ) -> None:
        self.view = view
        self.writer = writer
        self.metrics = metrics
        self.config = config or ExecutionConfig()
        self._lease = webhook_lease
        self._read_pod = read_pod
        self._clock = clock
        self._evictions = eviction_bucket or TokenBucket(self.config.eviction_rate)
        #: pod uid -> the resourceVersion it had when kerf acted on it (until the view
        #: shows the pod changed, it is not acted on again)
        self._sent: dict[str, str] = {}
        #: (pod uid, pod generation, proposed values) -> the API's message for a resize it
        #: rejected: that proposal is never sent again, it goes to the fallback at once
        self._rejected: dict[tuple[str, Any, bytes], str] = {}
        #: pod uid -> evictions of it refused in a row (429: a disruption budget)
        self._refusals: dict[str, int] = {}
        #: ("workload" | "record", workload key) -> the resourceVersions this reconciler's
        #: writes left behind: the one it wrote over, and those between two writes of one
        #: pass (a record is created, then its status written). While the view shows one
        #: of them, the workload waits.
        self._written: dict[tuple[str, Any], set[str]] = {}
        #: workload key -> the change in place under way that its status does not show yet
        self._unreported: dict[Any, _Unreported] = {}
        #: workload key -> Events of a pass whose status write failed: the next pass
        #: records them (in `pendingEvents`) and tells them
        self._untold: dict[Any, list[dict[str, Any]]] = {}
        #: workload key -> (annotations this reconciler wrote, a monotonic deadline): until
        #: the view's workload shows them (or the deadline passes), the workload waits
        self._annotations_sent: dict[Any, tuple[dict[str, str | None], float]] = {}
        #: workload key -> (record version, digest of a status) found equal to that
        #: record's status (a digest: 25,000 whole statuses would weigh ~100 MB)
        self._seen_status: dict[Any, tuple[str, bytes]] = {}
        #: workload key -> (until, the objects a quiet pass read, whether `until` is when
        #: its decisions change): a pass over exactly these objects before `until` would
        #: decide the same and write nothing
        self._steady: dict[Any, tuple[datetime, tuple[Any, ...], bool]] = {}

    @property
    def clock(self) -> Clock:
        """The clock decisions read."""
        return self._clock

    def forget_unreported(self) -> None:
        """Drop the rollouts not reported yet (a change of leader: the next pass reads
        what was applied from the pods and the record)."""
        self._unreported.clear()

    # ------------------------------------------------------------------ the pass

    async def reconcile(self, ref: WorkloadRef) -> float | None:
        """One pass; returns when to look at the workload again (None: on change only)."""
        view = self.view
        workload = view.workload(ref)
        obj = view.get(ref.kind, ref.namespace, ref.name)
        if workload is None or obj is None:
            self._unreported.pop(ref.key, None)  # gone: nothing left to report on
            self._untold.pop(ref.key, None)
            return None
        record = view.recommendation_for(ref)
        if self._behind(ref, obj, record) or self._unseen_annotations(
            ref.key, workload.annotations
        ):
            # The view has not seen this reconciler's last write to the workload or its
            # record yet: a pass now would decide from what was there before (and write
            # or record it again).
            return self.config.follow_s
        now = self._clock()
        plan = plan_for(view, workload)
        pods = sorted(view.pods_of(ref), key=_pod_name)
        # What the pass's decisions read, as the stages declare it (app/inputs.py).
        inputs = running_inputs(view, ref, plan)
        steady = self._steady.get(ref.key)
        if steady is not None and now < steady[0] and _same_objects(steady[1], inputs):
            # Nothing this workload's decision reads has changed, and no time it depends on
            # has come: the last pass's outcome stands (it wrote nothing). Queuing it
            # cancelled the look at the time its decisions change: ask for it again.
            self.metrics.unchanged_passes.inc()
            return _seconds_until(steady[0], now) if steady[2] else None
        self._steady.pop(ref.key, None)
        done = _Pass(record=record)
        try:
            return await self._act(ref, workload, obj, record, plan, pods, inputs, now, done)
        except NotLeading:
            raise  # whoever leads reads what happened from the cluster, not this memory
        except Exception:
            # This pass's actions may have been made but not recorded: their Events wait
            # for the next pass (the Resized and Blocked ones it works out again itself).
            self._untold[ref.key] = merged(
                self._untold.get(ref.key, []), self._actions(ref, done, now)
            )
            raise

    def _actions(self, ref: WorkloadRef, done: _Pass, now: datetime) -> list[dict[str, Any]]:
        """The Events of the pass's actions, named once."""
        if done.told is None:
            fresh = [pending_event(ref, r, n, warning=w, now=now) for r, n, w in done.events]
            done.told = merged(done.named, fresh)
        return done.told

    async def _act(
        self,
        ref: WorkloadRef,
        workload: Workload,
        obj: Mapping[str, Any],
        record: RightsizingRecommendation | None,
        plan: WorkloadPlan,
        pods: list[Mapping[str, Any]],
        inputs: tuple[Any, ...],
        now: datetime,
        done: _Pass,
    ) -> float | None:
        patch = annotation_patch(workload.annotations, plan.sync.annotations)
        if patch:
            answer = await self.writer.patch_annotations(obj, patch)
            self._wrote(("workload", ref.key), _version(obj), answer, done)
            self._remember_annotations(ref.key, patch)
            done.wrote = True
            log_fields(logger, "published policy values", workload=_label(ref), keys=sorted(patch))
        news = plan.sources
        if (
            not plan.candidates
            and not (news.unreachable or news.invalid or news.held)
            and record is None
            and ref.key not in self._unreported
        ):
            return None
        running = [p for p in pods if is_running(p)]
        clock = Horizon(now)  # every decision of the pass narrows it
        decisions = [decide_pod(self.view, p, now=clock, path="running") for p in running]
        for decision in decisions:
            self.metrics.decisions.labels(decision.outcome, decision.reason or "").inc()
        intent = record.status.pending_eviction if record and record.status else None
        if intent is not None:
            await self._settle_intent(ref, intent, pods, done)
        else:
            await self._execute(workload, pods, running, decisions, record, now, done)
        rollback = await self._monitor(workload, obj, now, done)
        if rollback is not None and not done.busy and intent is None:
            await self._replace_unschedulable(workload, pods, rollback, now, done)
        await self._report(workload, obj, running, decisions, record, now, done, rollback)
        if not (done.wrote or done.busy) and done.requeue is None:
            change = clock.next_change()
            changes = [d.next_allowed_at for d in decisions if d.next_allowed_at]
            changes += [change] if change is not None else []
            latest = now + self.config.steady_horizon
            until = min([latest, *changes])
            self._steady[ref.key] = (until, inputs, until < latest)
            if until < latest:
                return _seconds_until(until, now)
        return done.requeue

    async def _monitor(
        self, workload: Workload, obj: Mapping[str, Any], now: datetime, done: _Pass
    ) -> Step | None:
        """Advance the rollback state machine (SPEC §8); its state lives in the workload's
        `rollback-state` annotation, whose restore values the next pass publishes."""
        state = rollback_state(self.view, workload)
        inputs = monitor_inputs(self.view, workload)
        if inputs.policy is None and state is None:
            return None
        result = rollback_step(state, inputs, now)
        if result.write and result.annotation is not None:
            state_patch = {ROLLBACK_STATE: result.annotation}
            answer = await self.writer.patch_annotations(obj, state_patch)
            self._wrote(("workload", workload.ref.key), _version(obj), answer, done)
            self._remember_annotations(workload.ref.key, state_patch)
            done.wrote = True
            log_fields(
                logger,
                "rollback state",
                workload=_label(workload.ref),
                mode=result.state.mode if result.state else None,
                turn=result.state.turn if result.state else None,
                reason=result.state.failure_reason if result.state else None,
            )
        for event in result.events:
            done.events.append((event.reason, event.message, event.type == "Warning"))
        if result.requeue_at is not None:
            done.again_in(max(0.05, (result.requeue_at - now).total_seconds()))
        return result

    async def _settle_intent(
        self,
        ref: WorkloadRef,
        intent: PendingEviction,
        pods: Sequence[Mapping[str, Any]],
        done: _Pass,
    ) -> None:
        """An eviction recorded before it was asked for, and not reported since (its
        replica died or lost the Lease in between, or the answer was lost): if it went out,
        report it as that replica would have; if not, the status write drops it. Nothing
        new starts in this pass: the next one decides from the status this one writes."""
        done.report = True
        done.again_in(self.config.follow_s)
        went = happened(intent, pods)
        if not went and self._read_pod is not None:
            # The view may not show the eviction yet (the pod's watch runs apart from the
            # record's): only the API server can say it did not happen.
            pod = await self._read_pod(ref.namespace, intent.pod_name)
            went = happened(intent, [pod] if pod is not None else [])
        if not went:
            log_fields(
                logger, "eviction intent dropped: the pod is still there", pod=intent.pod_name
            )
            return
        done.busy = True
        done.named.extend(pending_events_of(intent))
        done.applied = done.applied or applied_by(intent)
        log_fields(logger, "eviction intent found done", pod=intent.pod_name)

    async def _replace_unschedulable(
        self,
        workload: Workload,
        pods: Sequence[Mapping[str, Any]],
        rollback: Step,
        now: datetime,
        done: _Pass,
    ) -> None:
        """A Pending pod cannot be resized: while a restore is in force, evict one that no
        node fits and that lacks the restored values, so its replacement is admitted with
        them (evicting a Pending pod disrupts nothing; PDBs do not count it)."""
        pod = unschedulable_to_replace(
            pods,
            rollback.restore,
            workload.annotations,
            plan_for(self.view, workload).sync.annotations,
        )
        if pod is None or self._awaiting(pod):
            return
        note = (
            f"evicted unschedulable pod {_pod_name(pod)}: it cannot be resized; "
            "its replacement is admitted with the rollback's restored values"
        )
        await self._evict(workload.ref, pod, None, now, done, note=note)

    # ------------------------------------------------------------------ executing

    async def _execute(
        self,
        workload: Workload,
        pods: Sequence[Mapping[str, Any]],
        running: Sequence[Mapping[str, Any]],
        decisions: Sequence[PodDecision],
        record: RightsizingRecommendation | None,
        now: datetime,
        done: _Pass,
    ) -> None:
        if await self._follow_resizes(workload, pods, running, now, done):
            return
        applies = [(p, d) for p, d in zip(running, decisions, strict=True) if d.outcome == "apply"]
        unreported = self._unreported.get(workload.ref.key)
        if unreported is not None and applies:
            # The rollout under way goes on first. Another change (a pod already resized
            # may want the next step) waits until the status records this one: decisions
            # read the last change, and its cooldown, from there.
            applies = [
                (p, d)
                for p, d in applies
                if d.method == "inPlace"
                and same_values(unreported.last_applied["containers"], d.values)
            ]
            if not applies:
                done.report = done.busy = True
                done.again_in(self.config.follow_s)
                return
        if not applies:
            return
        pod, decision = applies[0]
        if self._awaiting(pod):
            # The view has not seen the last action on this pod yet: deciding again now
            # would repeat it.
            done.busy = True
            done.again_in(self.config.follow_s)
            return
        gentle = decision.method == "inPlace" and not decision.restarts
        if not gentle and self._disrupted(workload, pods, _readiness_counts(running, decisions)):
            done.busy = True
            done.again_in(self.config.follow_s)
            return
        if decision.method != "inPlace":
            await self._evict(workload.ref, pod, decision, now, done)
            return
        rejected = self._rejected.get(_proposal_key(pod, decision))
        if rejected is None:
            rejected = await self._resize(pod, decision, done)
        if rejected is not None:
            await self._fall_back(
                workload, pods, running, pod, "ResizeRejected", rejected, now, done
            )

    def _behind(
        self, ref: WorkloadRef, obj: Mapping[str, Any], record: RightsizingRecommendation | None
    ) -> bool:
        versions = {
            ("workload", ref.key): _version(obj),
            ("record", ref.key): _record_version(record),
        }
        behind = False
        for key, version in versions.items():
            written = self._written.get(key)
            if written is None:
                continue
            if version in written:
                behind = True
            else:
                del self._written[key]
        return behind

    def _remember_annotations(self, key: Any, patch: Mapping[str, str | None]) -> None:
        """Remember what a write of workload annotations set (see `_unseen_annotations`)."""
        before = self._annotations_sent.get(key)
        merged = {**(before[0] if before else {}), **patch}
        if len(self._annotations_sent) > 100_000:  # entries leave once seen; bound anyway
            self._annotations_sent.clear()
        self._annotations_sent[key] = (merged, time.monotonic() + ANNOTATIONS_WAIT_S)

    def _unseen_annotations(self, key: Any, annotations: Mapping[str, str]) -> bool:
        """The view's workload does not show the annotations this reconciler wrote yet. A
        newer version alone does not prove it does: another writer (the Deployment
        controller updating the status) may have committed in between, and a pass over
        that version would decide from the annotations as they were before (and start a
        rollback turn twice, say). Bounded in time, should someone else change the keys."""
        sent = self._annotations_sent.get(key)
        if sent is None:
            return False
        patch, until = sent
        if all(annotations.get(k) == v for k, v in patch.items()) or time.monotonic() > until:
            del self._annotations_sent[key]
            return False
        return True

    def _wrote(
        self, key: tuple[str, Any], before: str, answer: Mapping[str, Any], done: _Pass
    ) -> None:
        """Remember the versions a write left behind: the one the pass read (or the one an
        earlier write of this pass answered with) is stale; the answer's is not."""
        if len(self._written) > 100_000:  # entries leave when the view catches up; bound anyway
            self._written.clear()
        stale = self._written.setdefault(key, set())
        stale.add(done.versions.get(key, before))
        after = _version(answer)
        if after:
            stale.discard(after)
            done.versions[key] = after

    def _status_patch(
        self,
        ref: WorkloadRef,
        record: RightsizingRecommendation | None,
        status: dict[str, Any],
    ) -> dict[str, Any] | None:
        """`status_patch`, skipped when this very status was found equal to the same
        version of the record before (a steady workload costs a digest comparison)."""
        version = record.metadata.resource_version if record is not None else None
        seen = self._seen_status.get(ref.key)
        digest = status_digest(status) if version is not None else b""
        if seen is not None and seen == (version, digest):
            return None
        patch = status_patch(record, status)
        if patch is None and version is not None:
            self._seen_status[ref.key] = (version, digest)
        return patch

    def _awaiting(self, pod: Mapping[str, Any]) -> bool:
        meta = pod.get("metadata") or {}
        sent = self._sent.get(str(meta.get("uid")))
        if sent is None:
            return False
        if sent == meta.get("resourceVersion"):
            return True
        self._sent.pop(str(meta.get("uid")), None)
        return False

    def _mark_sent(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        if len(self._sent) > 10_000:  # entries leave when their pod changes; bound anyway
            self._sent.clear()
        self._sent[str(meta.get("uid"))] = str(meta.get("resourceVersion"))

    async def _follow_resizes(
        self,
        workload: Workload,
        pods: Sequence[Mapping[str, Any]],
        running: Sequence[Mapping[str, Any]],
        now: datetime,
        done: _Pass,
    ) -> bool:
        """Follow accepted resizes; fall back on one that cannot finish. True while a
        resize is being carried out or a fallback was decided (nothing new starts
        meanwhile: one change at a time); a resize the node defers does not hold the other
        pods back until its `fallbackAfter` has passed."""
        under_way = False
        for pod in running:
            progress = resize_progress(pod)
            if progress.stage == "none":
                continue
            cause = _RESIZE_CAUSES.get(progress.stage)
            if progress.stage in ("deferred", "error"):
                # An Error (a memory limit below what the container uses now) is retried by
                # the kubelet itself, like a Deferred resize: not sent again, waited for.
                waited = now - (progress.since or now)
                limit = fallback_after(self.view, workload)
                if waited < limit:
                    done.busy = True
                    if progress.stage == "error":
                        done.blocked = (
                            "ResizeError",
                            f"pod {_pod_name(pod)}: {progress.message} (the kubelet retries; "
                            f"falls back after {format_duration(limit)})",
                        )
                    done.again_in(max(0.5, (limit - waited).total_seconds()))
                    continue
            under_way = True
            if cause is None:
                done.again_in(self.config.follow_s)
                continue
            await self._fall_back(workload, pods, running, pod, cause, progress.message, now, done)
            break
        done.busy = done.busy or under_way
        return under_way

    async def _fall_back(
        self,
        workload: Workload,
        pods: Sequence[Mapping[str, Any]],
        running: Sequence[Mapping[str, Any]],
        pod: Mapping[str, Any],
        cause: str,
        detail: str,
        now: datetime,
        done: _Pass,
    ) -> None:
        decision = decide_fallback(self.view, pod, now=now, cause=cause)
        fields = dict(workload=_label(workload.ref), pod=_pod_name(pod), cause=cause, detail=detail)
        if decision.outcome != "apply":
            self.metrics.fallbacks.labels(cause, "blocked").inc()
            message = f"{decision.message}: {detail}" if detail else decision.message
            done.blocked = (decision.reason or cause, message)
            log_fields(logger, "resize fallback blocked", reason=decision.reason, **fields)
            done.again_in(self.config.refused_retry_s)
            return
        if self._disrupted(workload, pods, running, besides=pod):
            done.again_in(self.config.follow_s)
            return
        log_fields(logger, "resize fallback: evicting", **fields)
        note = f"in-place resize of pod {_pod_name(pod)} {cause}: evicted it; {detail}".strip()
        fallback = ("ResizeFallback", note.rstrip("; "), True)
        if await self._evict(workload.ref, pod, decision, now, done, also=[fallback]):
            self.metrics.fallbacks.labels(cause, "evicted").inc()

    def _disrupted(
        self,
        workload: Workload,
        pods: Sequence[Mapping[str, Any]],
        running: Sequence[Mapping[str, Any]],
        besides: Mapping[str, Any] | None = None,
    ) -> bool:
        """A disruption is still under way: a pod terminating or not Ready, or fewer pods
        than replicas (a replacement not yet created)."""
        if any(is_terminating(p) for p in pods):
            return True
        if any(not is_ready(p) for p in running if p is not besides):
            return True
        live = [p for p in pods if not is_terminating(p)]
        return workload.replicas is not None and len(live) < workload.replicas

    async def _resize(
        self, pod: Mapping[str, Any], decision: PodDecision, done: _Pass
    ) -> str | None:
        """Send the resize; returns the API's message when it rejected the proposal (a 4xx
        but 409 and 429: sending it again would only be rejected again)."""
        containers = {c: decision.containers[c] for c in decision.changed}
        fields = dict(pod=_pod_name(pod), containers=containers)
        try:
            await self.writer.resize(pod, containers)
        except ApiStatusError as exc:
            if exc.code in (409, 429) or exc.code >= 500:
                raise  # not now: the queue tries the workload again with backoff
            self.metrics.resizes.labels("rejected").inc()
            log_fields(
                logger, "resize rejected by the API", logging.WARNING, error=str(exc), **fields
            )
            if len(self._rejected) > 10_000:  # a proposal changes or its pod goes; bound anyway
                self._rejected.clear()
            self._rejected[_proposal_key(pod, decision)] = str(exc)
            return str(exc)
        self.metrics.resizes.labels("requested").inc()
        self._mark_sent(pod)
        log_fields(logger, "resized in place", **fields)
        done.busy = True
        done.applied = _applied(decision, "inPlace")
        done.resized = _pod_name(pod)
        done.again_in(self.config.follow_s)
        return None

    async def _evict(
        self,
        ref: WorkloadRef,
        pod: Mapping[str, Any],
        decision: PodDecision | None,
        now: datetime,
        done: _Pass,
        *,
        note: str | None = None,
        also: Sequence[tuple[str, str, bool]] = (),
    ) -> bool:
        """Evict one pod, unless the webhook is unhealthy or the rate limit says wait.
        `decision` is the plan the replacement carries (recorded as applied); None when the
        eviction applies no plan of its own (`note` then says why). `also`: Events the
        eviction makes besides `Evicted`. The eviction is recorded in the status before it
        is asked for (`reconciler.intent`)."""
        name = _pod_name(pod)
        if not await self._webhook_healthy(now):
            self.metrics.evictions.labels("held").inc()
            done.blocked = (
                WEBHOOK_UNAVAILABLE,
                "the webhook Lease is stale: a replacement pod would start unsized",
            )
            done.again_in(self.config.lease_retry_s)
            return False
        wait = self._evictions.try_take()
        if wait > 0:
            done.busy = True
            done.again_in(wait)
            return False
        # A fallback's decision carries no values: its replacement gets the change already
        # under way, which stays the last applied.
        applied = _applied(decision, "evict") if decision is not None and decision.values else None
        note = note or f"evicted pod {name}; its replacement is sized at admission"
        told = [("Evicted", note, False), *also]
        events = [pending_event(ref, r, n, warning=w, now=now) for r, n, w in told]
        await self._record_intent(ref, eviction_intent(pod, applied, events), done)
        result = await self.writer.evict(pod)
        self.metrics.evictions.labels(result).inc()
        if result == "evicted":
            self._mark_sent(pod)
        done.busy = True
        uid = str((pod.get("metadata") or {}).get("uid"))
        if result == "refused":
            delay = self._refused_delay(uid)
            log_fields(
                logger,
                "eviction refused (disruption budget); retrying later",
                pod=name,
                delay=delay,
            )
            done.again_in(delay)
            return False
        self._refusals.pop(uid, None)
        if result == "evicted":
            done.applied = done.applied or applied
            done.named.extend(events)
            log_fields(logger, "evicted", pod=name, values=decision.values if decision else None)
        done.again_in(self.config.follow_s)
        return result == "evicted"

    async def _record_intent(self, ref: WorkloadRef, intent: dict[str, Any], done: _Pass) -> None:
        """Write the eviction intent into the record's status (creating the record first
        when it is missing): a write the leader fence covers, so a replica that no longer
        leads neither records nor evicts."""
        if done.record is None and not done.created:
            obj = self.view.get(ref.kind, ref.namespace, ref.name) or {}
            uid = (obj.get("metadata") or {}).get("uid")
            answer = await self.writer.create_recommendation(
                recommendation_object(ref, str(obj.get("apiVersion")), uid)
            )
            self._wrote(("record", ref.key), "", answer, done)
            done.created = True
        name = record_name(ref.kind, ref.name)
        answer = await self.writer.patch_status(ref.namespace, name, {"pendingEviction": intent})
        self._wrote(("record", ref.key), _record_version(done.record), answer, done)
        done.wrote = done.intent = True

    def _refused_delay(self, uid: str) -> float:
        """How long to wait before asking again to evict a pod whose eviction was refused:
        `refused_retry_s`, doubling with each refusal in a row, at most `refused_retry_max_s`."""
        count = self._refusals.get(uid, 0)
        if len(self._refusals) > 10_000:  # entries leave on an eviction; bound anyway
            self._refusals.clear()
        self._refusals[uid] = count + 1
        return min(self.config.refused_retry_max_s, self.config.refused_retry_s * 2**count)

    @property
    def webhook_lease(self) -> LeaseAge | None:
        """When the webhook last renewed its Lease (None outside a cluster)."""
        return self._lease

    async def _webhook_healthy(self, now: datetime) -> bool:
        if self._lease is None:  # no cluster (state dir): nothing to ask
            return True
        renewed = await self._lease()
        max_age = parse_duration(self.view.global_config.webhook_lease_max_age)
        return renewed is not None and now - renewed <= max_age

    # ------------------------------------------------------------------ reporting

    async def _report(
        self,
        workload: Workload,
        obj: Mapping[str, Any],
        running: Sequence[Mapping[str, Any]],
        decisions: Sequence[PodDecision],
        record: RightsizingRecommendation | None,
        now: datetime,
        done: _Pass,
        rollback: Step | None = None,
    ) -> None:
        ref = workload.ref
        status_before = record.status if record and record.status else None
        recorded = _dumped(status_before.last_applied if status_before else None)
        unreported = self._unreported.get(ref.key)
        last_applied = _last_applied(
            unreported.last_applied if unreported else recorded,
            done,
            running,
            decisions,
            workload,
            self.view,
            now,
        )
        summary = _summary(self.view, running, decisions, done, last_applied)
        last_event = (
            status_before.last_event.model_dump(by_alias=True)
            if status_before and status_before.last_event
            else None
        )
        events: list[tuple[str, str, bool]] = []
        # A skip while the applied values run everywhere is nothing to report.
        quiet = summary.outcome == "skipped" and summary.live
        if summary.outcome in ("blocked", "skipped") and summary.reason and not quiet:
            shown = summary.proposal
            key = dedup_key(summary.reason, shown.id if shown else summary.selected)
            if not is_repeat(last_event, key):
                events.append(
                    (
                        "Blocked" if summary.outcome == "blocked" else "Skipped",
                        f"{summary.reason}: {summary.message}",
                        summary.outcome == "blocked",
                    )
                )
                last_event = key
        approved = _approval_used(record, last_applied, decisions, done)
        status = build_status(
            record,
            ref,
            summary,
            last_applied=last_applied,
            last_event=last_event,
            approved=approved,
            now=now,
            rollback=rollback_status(rollback),
        )
        left = [
            p.model_dump(by_alias=True, mode="json")
            for p in (status_before.pending_events if status_before else [])
        ]
        carried = self._untold.get(ref.key, [])
        intent = done.intent or bool(status_before and status_before.pending_eviction)
        if not (left or carried or intent) and self._holds(
            status_before, status, last_applied, recorded, unreported, done, now
        ):
            since = unreported.since if unreported is not None else now
            self._unreported[ref.key] = _Unreported(since, dict(last_applied or {}))
            return
        if last_applied is not None and _new_in_place(recorded, last_applied):
            note = _resized_note(self.view, last_applied["containers"], running, done.resized)
            events.insert(0, ("Resized", note, False))
        done.told = self._actions(ref, done, now)
        uid = (obj.get("metadata") or {}).get("uid")
        # Named from the status they were derived over: a pass retried over the same one
        # (its status write went in but the answer was lost, and the view has not caught
        # up) derives the same Events under the same names, and tells none of them twice.
        read = f"{uid}/{derived_from(record)}"
        derived = [
            pending_event(ref, r, n, warning=w, now=now, identity=f"{read}/{r}")
            for r, n, w in events
        ]
        # Resized first: the change, then how it was made.
        to_tell = merged(left, carried, derived[:1], done.told, derived[1:])
        if to_tell:
            status["pendingEvents"] = to_tell
        api_version = str(obj.get("apiVersion"))
        done.wrote = done.wrote or record is None or bool(to_tell)
        name = record_name(ref.kind, ref.name)
        patch = self._status_patch(ref, record, status)
        if done.intent:
            # Written in this pass, so not in the record read: cleared explicitly.
            patch = {**(patch or {}), "pendingEviction": None}
        if record is None and not done.created:
            answer = await self.writer.create_recommendation(
                recommendation_object(ref, api_version, uid)
            )
            self._wrote(("record", ref.key), "", answer, done)
        if patch is not None:
            answer = await self.writer.patch_status(ref.namespace, name, patch)
            self._wrote(("record", ref.key), _record_version(record), answer, done)
            done.wrote = True
        # Recorded: the rollout held in memory until now, and the Events carried, are in
        # the status (a failed write keeps them for the next pass).
        self._unreported.pop(ref.key, None)
        self._untold.pop(ref.key, None)
        for pending in to_tell:
            await self.writer.create_event(
                event_body(ref, api_version, uid, pending, self.config.instance)
            )
        if to_tell:
            answer = await self.writer.patch_status(ref.namespace, name, {"pendingEvents": None})
            self._wrote(("record", ref.key), _record_version(record), answer, done)
        if patch is not None or events:
            log_fields(
                logger,
                "decision",
                workload=_label(ref),
                outcome=summary.outcome,
                reason=summary.reason,
                message=summary.message,
                phase=status["phase"],
                values=(last_applied or {}).get("containers"),
            )

    def _holds(
        self,
        before: Any,
        status: Mapping[str, Any],
        last_applied: Mapping[str, Any] | None,
        recorded: Mapping[str, Any] | None,
        unreported: _Unreported | None,
        done: _Pass,
        now: datetime,
    ) -> bool:
        """Whether this pass's status waits: a change in place whose rollout is under way
        is reported when it is done, or once it has taken `pending_after` (as Pending,
        written once). Anything else (a block, an eviction, a fallback, rollback, another
        change waiting to be decided) is reported at once."""
        if done.report or done.events:
            return False
        if status["phase"] != "Pending" or not done.busy:
            return False
        if last_applied is None or last_applied.get("method") != "inPlace":
            return False
        shown = recorded is not None and same_values(
            recorded.get("containers") or {}, last_applied["containers"]
        )
        if shown and before is not None and before.phase == "Pending":
            return True  # the status says so already
        since = unreported.since if unreported is not None else now
        return now - since < self.config.pending_after


def _seconds_until(when: datetime, now: datetime) -> float:
    """How soon to look again at `when` (a timer firing a little early finds the same
    decisions and asks again, so never less than 50 ms)."""
    return max(0.05, (when - now).total_seconds())


def _dumped(last_applied: Any) -> dict[str, Any] | None:
    if last_applied is None:
        return None
    return last_applied.model_dump(by_alias=True, mode="json", exclude_none=True)


def _new_in_place(recorded: Mapping[str, Any] | None, last_applied: Mapping[str, Any]) -> bool:
    """The status records a change made in place that it did not record before."""
    if last_applied.get("method") != "inPlace":
        return False
    return recorded is None or not same_values(
        recorded.get("containers") or {}, last_applied["containers"]
    )


def _runs(view: ClusterView, pod: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    """The pod's spec has these values for their containers."""
    current = format_resources_of(view, pod)
    return same_values({c: v for c, v in current.items() if c in values}, values)


def _resized_note(
    view: ClusterView,
    values: Mapping[str, Any],
    running: Sequence[Mapping[str, Any]],
    resized: str | None,
) -> str:
    """The `Resized` event of a change: its values and how many pods have them in place
    (the pod resized in this pass is not in the view yet); a replacement admitted with
    them (a fallback's eviction) is told apart, not counted as resized."""
    having = [p for p in running if _runs(view, p, values)]
    admitted = {_pod_name(p) for p in having if _admitted_with(p, values)}
    names = {_pod_name(p) for p in having} - admitted
    if resized is not None:
        names.add(resized)
    count = f"{len(names)} of {len(running)} pods"
    if admitted:
        count += f", {len(admitted)} replaced and sized at admission"
    if len(names) + len(admitted) < len(running):
        count += ", the others follow"
    return f"resized in place: {describe_resources(values)} ({count})"


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _record_version(record: RightsizingRecommendation | None) -> str:
    return (record.metadata.resource_version or "") if record is not None else ""


def _restores(decision: PodDecision) -> bool:
    """The decision applies rollback restore values to its pod."""
    return decision.outcome == "apply" and any(
        s.policy_kind in ROLLBACK_KINDS for s in decision.selected
    )


def _readiness_counts(
    running: Sequence[Mapping[str, Any]], decisions: Sequence[PodDecision]
) -> list[Mapping[str, Any]]:
    """The running pods whose readiness holds a disruption back: all but those still
    waiting for a rollback restore. Those are unready because of the change being rolled
    back (an OOM loop); waiting for them to recover would keep the bad values in force."""
    return [p for p, d in zip(running, decisions, strict=True) if not _restores(d)]


def _same_objects(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    return len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True))


def format_resources_of(view: ClusterView, pod: Mapping[str, Any]) -> Values:
    """A pod's containers' resources as quantities (what kerf sizes)."""
    return {c: format_resources(r) for c, r in pod_facts(view, pod)[1].items()}


def _label(ref: WorkloadRef) -> str:
    return f"{ref.kind}/{ref.namespace}/{ref.name}"


def _applied(decision: PodDecision, method: str) -> dict[str, Any]:
    applied: dict[str, Any] = {"method": method, "containers": decision.values}
    if decision.proposal_id:
        applied["proposal"] = decision.proposal_id
    if decision.fingerprint:
        # The plan's fingerprint: rollback monitoring watches the recommendation it names.
        applied["fingerprint"] = decision.fingerprint
    return applied


def _last_applied(
    previous: dict[str, Any] | None,
    done: _Pass,
    running: Sequence[Mapping[str, Any]],
    decisions: Sequence[PodDecision],
    workload: Workload,
    view: ClusterView,
    now: datetime,
) -> dict[str, Any] | None:
    """`lastApplied` after this pass: kept while the same values roll out (its time is the
    cooldown clock, started by the first pod); new when other values were applied now or
    are found running on the pods unrecorded."""
    found = done.applied or _unrecorded(running, decisions, workload, view)
    if found is None:
        return previous
    if previous is not None and same_values(previous.get("containers") or {}, found["containers"]):
        fingerprint = found.get("fingerprint")
        if fingerprint and previous.get("fingerprint") != fingerprint:
            # The same values under other keys (e.g. multi-policy toggled): a new
            # recommendation for rollback monitoring, applied already.
            return {**previous, "fingerprint": fingerprint}
        return previous
    # The restart counts as they were when the change was sent: rollback monitoring
    # counts the failures beyond them, whatever second the API stamps them with.
    return {"at": stamp(now), **found, "baseline": restart_counts(running)}


def _unrecorded(
    running: Sequence[Mapping[str, Any]],
    decisions: Sequence[PodDecision],
    workload: Workload,
    view: ClusterView,
) -> dict[str, Any] | None:
    """Values kerf's plan asks that already run on a pod but differ from the workload's
    template: kerf put them there (at admission, or a resize whose record was lost)."""
    for pod, decision in zip(running, decisions, strict=True):
        if decision.outcome != "skipped" or decision.reason != "NoSignificantChange":
            continue
        current = format_resources_of(view, pod)
        changed = {
            c: values
            for c, values in current.items()
            if c in workload.containers
            and not same_values({c: values}, {c: _template(workload, c)})
        }
        if changed:
            found: dict[str, Any] = {
                "method": "admission" if _admitted_with(pod, changed) else "inPlace",
                "containers": changed,
            }
            if decision.fingerprint:
                found["fingerprint"] = decision.fingerprint
            return found
    return None


def _admitted_with(pod: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    """The webhook set these values when it admitted the pod (its info annotation names
    them): else they were set in place since."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(POD_INFO)
    try:
        info = orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return False
    admitted = info.get("containers") if isinstance(info, dict) else None
    if not isinstance(admitted, dict):
        return False
    return same_values({c: admitted.get(c) or {} for c in values}, values)


def _template(workload: Workload, container: str) -> dict[str, dict[str, str]]:
    values = workload.containers.get(container) or {}
    return {f: dict(v) for f, v in values.items() if v}


def _summary(
    view: ClusterView,
    running: Sequence[Mapping[str, Any]],
    decisions: Sequence[PodDecision],
    done: _Pass,
    last_applied: Mapping[str, Any] | None,
) -> Summary:
    current = format_resources_of(view, running[0]) if running else {}
    selected = [s.as_dict() for s in decisions[0].selected] if decisions else []
    live = (
        last_applied is not None
        # the kubelet runs them: a resize it refused (Error) or defers is not live
        and all(
            _runs(view, p, last_applied["containers"]) and resources_running(p) for p in running
        )
        and bool(running)
    )
    # A proposal waiting for approval, or approved and held (the cooldown between steps).
    audit = next((d for d in decisions if d.proposal_id and d.proposal_target), None)
    proposal = (
        ShownProposal(
            audit.proposal_id,
            {c: format_resources(r) for c, r in audit.proposal.items()},
            {c: format_resources(r) for c, r in audit.proposal_target.items()},
            audit.proposal_target_id,
            audit.proposal_schedule,
        )
        if audit is not None and audit.proposal_id
        else None
    )
    filtered = list(
        {tuple(f.as_dict().items()): f.as_dict() for d in decisions for f in d.filtered}.values()
    )
    common: dict[str, Any] = dict(
        current=current, selected=selected, proposal=proposal, live=live, filtered=filtered
    )
    if done.blocked is not None:
        return Summary("blocked", done.blocked[0], done.blocked[1], **common)
    if done.busy or any(d.outcome == "apply" for d in decisions):
        return Summary("apply", None, "a change is being applied", **common)
    if not decisions:
        return Summary("pending", "NoRunningPods", "no running pod to decide for", **common)
    chosen = next((d for d in decisions if d.outcome == "blocked"), decisions[0])
    return Summary(
        chosen.outcome,
        chosen.reason,
        chosen.message,
        next_allowed_at=chosen.next_allowed_at,
        **common,
    )


def _approval_used(
    record: RightsizingRecommendation | None,
    last_applied: Mapping[str, Any] | None,
    decisions: Sequence[PodDecision],
    done: _Pass,
) -> str | None:
    """The approval (`approve=<id>`) is used up once its proposal has rolled out: the last
    applied change carries it and no pod has anything left to apply."""
    previous = record.status.approved_proposal if record and record.status else None
    wanted = record.metadata.annotations.get(APPROVE) if record else None
    if (
        wanted
        and wanted != previous
        and last_applied is not None
        and last_applied.get("proposal") == wanted
        and not done.busy
        and not any(d.outcome == "apply" for d in decisions)
    ):
        return wanted
    return previous
