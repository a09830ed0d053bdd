"""One pass over one workload (SPEC §7): plan, act, report.

1. **Plan** (`reconciler.plan`): from the view, the workload's memory and the library's
   decisions (`decide_pod` per running pod, `app.outcome.rollout` for the one action on a pod),
   everything the pass will write, before it writes anything.
2. **Act** (`reconciler.act`): the plan's writes through `reconciler.api`'s writer: the
   policy values published, the pod resized or evicted, the rollback state. A resize the
   API rejects is the one write whose answer changes the plan: the plan is computed again
   (its fallback is decided) and its action carried out.
3. **Report** (`reconciler.report`): the status and Events, built from the plan and what
   the writes answered, then written.

The workload's memory (`reconciler.memory`) is one record, dropped when the workload is
gone. A pass that wrote nothing is remembered with the objects it read: until one of them
changes or its decisions' horizon comes, a pass over it decides nothing again. So is one
whose only writes reported it, with the record version its status write answered: the
write's echo changes no field the decisions read (else the view drops the plan, and the
pass decides again), and the status is the one the pass would write again. So is one
that only followed a rollout in place under way, until a pod changes or the rollout is due
as Pending. A pass that finds the view behind this reconciler's own writes waits for the
watch, which queues the workload again when the view catches up.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from app.kube.leader import NotLeading
from app.model.owners import WorkloadRef
from app.model.records import record_version
from app.policy.plans import plan_for
from app.policy.podstate import resize_progress
from app.runtime.clock import Clock, utc_now
from app.store.inputs import running_inputs, same_inputs
from app.store.view import ClusterView
from reconciler.act import Actuator
from reconciler.api import Writer
from reconciler.events import merged
from reconciler.execution import ExecutionConfig
from reconciler.memory import Inventory, Steady, WorkloadMemory
from reconciler.metrics import ReconcilerMetrics
from reconciler.outcome import Outcome
from reconciler.plan import LeaseAge, PassPlan, ReadPod, plan_pass, sort_pods, steady_until
from reconciler.ratelimit import TokenBucket
from reconciler.report import Report, action_events, plan_report

logger = logging.getLogger("kerf.reconciler")


def _seconds_until(when: datetime, now: datetime) -> float:
    """How soon to look again at `when` (a timer firing a little early finds the same
    decisions and asks again, so never less than 50 ms)."""
    return max(0.05, (when - now).total_seconds())


def _version(obj: Any) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


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
        evictions = eviction_bucket or TokenBucket(self.config.eviction_rate)
        self.actuator = Actuator(view, writer, metrics, self.config, evictions)
        #: one record per workload (`reconciler.memory`)
        self.memory = Inventory()

    @property
    def clock(self) -> Clock:
        """The clock decisions read."""
        return self._clock

    @property
    def webhook_lease(self) -> LeaseAge | None:
        """When the webhook last renewed its Lease (None outside a cluster)."""
        return self._lease

    def forget_unreported(self) -> None:
        """Drop the rollouts not reported yet (a change of leader: the next pass reads
        what was applied from the pods and the record)."""
        self.memory.forget_unreported()

    def keep(self, keys: Any) -> None:
        """Forget the memory of every workload but these (the view's)."""
        self.memory.keep(keys)

    async def reconcile(self, ref: WorkloadRef) -> float | None:
        """One pass; returns when to look at the workload again (None: on change only)."""
        view = self.view
        workload = view.workload(ref)
        obj = view.get(ref.kind, ref.namespace, ref.name)
        if workload is None or obj is None:
            self.memory.forget(ref.key)  # gone: nothing of it is kept
            return None
        memory = self.memory.get(ref.key)
        record = view.recommendations("record", ref)
        versions = {"workload": _version(obj), "record": _record_version(record)}
        pods = view.pods(ref)
        if (
            memory.behind(versions)
            or memory.unseen_annotations(workload.annotations)
            or memory.awaits(pods)
        ):
            # The view has not seen this reconciler's last write to the workload, its
            # record or a pod yet: a pass now would decide from what was there before (and
            # write or record it again). The watch queues the workload when it does.
            return memory.wait_s()
        now = self._clock()
        plan = plan_for(view, workload)
        # What the pass's decisions read, as the stages declare it (app/store/inputs.py).
        inputs = running_inputs(view, ref, plan)
        steady = memory.steady
        if (
            steady is not None
            and now < steady.until
            and steady.record == versions["record"]
            and same_inputs(steady.inputs, inputs)
        ):
            # Nothing this workload's decision reads has changed, nor the record's status
            # since the last pass found or wrote it, and no time it depends on has come:
            # the last pass's outcome stands (it wrote nothing but its report). Queuing it
            # cancelled the look at the time its decisions change: ask for it again.
            self.metrics.unchanged_passes.inc()
            if steady.again is not None:
                return min(steady.again, _seconds_until(steady.until, now))
            return _seconds_until(steady.until, now) if steady.timed else None
        memory.steady = None
        pass_plan = await plan_pass(
            view,
            workload,
            obj,
            record,
            sort_pods(pods),
            memory,
            now,
            self.config.timings,
            inputs,
            lease=self._lease,
            read_pod=self._read_pod,
        )
        done = Outcome(record=record)
        try:
            return await self._carry_out(pass_plan, memory, done)
        except NotLeading:
            raise  # whoever leads reads what happened from the cluster, not this memory
        except Exception:
            # This pass's actions may have been made but not told: their Events wait for
            # the next pass (the Resized and Blocked ones it works out again itself).
            memory.untold = merged(memory.untold, action_events(ref, done, now))
            raise

    async def _carry_out(
        self, plan: PassPlan, memory: WorkloadMemory, done: Outcome
    ) -> float | None:
        act = self.actuator
        await act.publish(plan, memory, done)
        if not plan.managed:
            return None
        for decision in plan.decisions:
            self.metrics.decisions.labels(decision.outcome, decision.reason or "").inc()
        act.settle(plan, done)
        _take(plan, done)
        act.note_holds(plan)
        action = plan.rollout.action
        if action is not None:
            rejected = await act.act(plan, action, memory, done)
            if rejected is not None:
                # The proposal is remembered as rejected: planned again, it falls back.
                again = await self._plan_again(plan, memory)
                done.busy, done.blocked, done.report, done.requeue = False, None, False, None
                _take(again, done)
                act.note_holds(again)
                if again.rollout.action is not None:
                    await act.act(again, again.rollout.action, memory, done)
        await act.step_rollback(plan, memory, done)
        report = plan_report(
            self.view,
            plan.workload,
            plan.obj,
            plan.running,
            plan.decisions,
            plan.record,
            memory,
            done,
            plan.now,
            pending_after=self.config.pending_after,
            rollback=plan.rollback,
        )
        acted = done.wrote
        await act.report(plan, report, memory, done)
        if not (acted or done.busy) and done.requeue is None:
            # Written or not, the status now is the one this pass reports: its echo (the
            # version the write answered) finds the same inputs unless the write changed a
            # field the decisions read.
            until, timed = steady_until(plan, self.config.steady_horizon)
            record = done.versions.get("record", _record_version(plan.record))
            memory.steady = Steady(until, plan.inputs, timed, record)
            if timed:
                return _seconds_until(until, plan.now)
        elif memory.unreported is not None and _follows(plan, report, done, self.config.follow_s):
            # Until an input changes (the kubelet reports the resize done) or the rollout
            # is due as Pending, a pass would only wait again: the polls of a rollout
            # under way cost a lookup, not a plan.
            until, _ = steady_until(plan, self.config.steady_horizon)
            due = memory.unreported.since + self.config.pending_after
            if due > plan.now:
                until = min(until, due)
            memory.steady = Steady(
                until, plan.inputs, True, _record_version(plan.record), again=done.requeue
            )
        return done.requeue

    async def _plan_again(self, plan: PassPlan, memory: WorkloadMemory) -> PassPlan:
        pods = sort_pods(self.view.pods(plan.ref))
        return await plan_pass(
            self.view,
            plan.workload,
            plan.obj,
            plan.record,
            pods,
            memory,
            plan.now,
            self.config.timings,
            plan.inputs,
            lease=self._lease,
            read_pod=None,
        )


def _follows(plan: PassPlan, report: Report, done: Outcome, follow_s: float) -> bool:
    """The pass only followed a rollout in place under way: no action, no write, no
    rollback step, its status held until the rollout is done, and no resize that the node
    defers or fails (their waits end at a time of their own)."""
    return (
        report.hold is not None
        and not done.wrote
        and done.requeue == follow_s
        and plan.rollout.action is None
        and plan.rollout.fallback is None
        and plan.rollback is None
        and plan.settle is None
        and all(resize_progress(p).stage in ("none", "inProgress") for p in plan.running)
    )


def _take(plan: PassPlan, done: Outcome) -> None:
    """What the plan's rollout leaves the workload in, before its action's answer."""
    rollout = plan.rollout
    done.busy = done.busy or rollout.busy
    done.blocked = rollout.blocked or done.blocked
    done.report = done.report or rollout.report
    done.again_in(rollout.again_in)


def _record_version(record: Any) -> str:
    return record_version(record)
