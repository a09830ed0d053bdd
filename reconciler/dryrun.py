"""What the reconciler would do, without doing it (`--dry-run`, `--state-dir`): the plan.

A dry run makes the plan of a pass (`reconciler.plan`) for every workload against the
cluster as it is, as the service makes it, and prints it instead of carrying it out: the
policy values it would publish, and for each running pod what its decision says: resize
it in place, evict it, or nothing (blocked or skipped, with the reason). It sends no write, so nothing it reports happened;
each pod is decided on its own, as if the others kept their values. Every pass ends with
a tally: N would resize in place, M would evict, K blocked (by reason).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from app.decide import PodDecision
from app.kube.firstsync import first_sync
from app.kube.informer import ClusterFeed
from app.model.owners import WorkloadRef
from app.runtime.clock import Clock
from app.runtime.jsonlog import log_fields
from app.store.view import ClusterView
from reconciler.execution import ExecutionConfig
from reconciler.memory import WorkloadMemory
from reconciler.metrics import ReconcilerMetrics
from reconciler.plan import plan_workload, sort_pods
from reconciler.service import workloads_of

logger = logging.getLogger("kerf.reconciler")

ActionKind = Literal["patch annotations", "resize", "evict", "blocked", "skip"]


@dataclass(frozen=True, slots=True)
class DryAction:
    """One thing the service would do (or not do, and why) for a workload or a pod."""

    action: ActionKind
    workload: str
    pod: str | None = None
    reason: str | None = None
    message: str = ""
    #: resize or evict: the resources of the containers that change
    containers: dict[str, Any] = field(default_factory=dict)
    #: patch annotations: the keys set or removed
    keys: tuple[str, ...] = ()

    def fields(self) -> dict[str, Any]:
        """The action as the JSON fields a log line or a `--state-dir` line carries."""
        out: dict[str, Any] = {"action": self.action, "workload": self.workload}
        if self.pod is not None:
            out["pod"] = self.pod
        if self.reason is not None:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        if self.containers:
            out["containers"] = self.containers
        if self.keys:
            out["keys"] = list(self.keys)
        return out

    def sentence(self) -> str:
        """What a log line says of the action (always "would": nothing was done)."""
        subject = f"pod {self.pod}" if self.pod else self.workload
        return {
            "patch annotations": f"dry run: would publish policy values on {self.workload}",
            "resize": f"dry run: would resize {subject} in place",
            "evict": f"dry run: would evict {subject}",
            "blocked": f"dry run: {subject} blocked ({self.reason})",
            "skip": f"dry run: {subject} left as it is ({self.reason})",
        }[self.action]


@dataclass(slots=True)
class Tally:
    """The counts of one dry-run pass."""

    workloads: int = 0
    published: int = 0
    in_place: int = 0
    evict: int = 0
    skipped: int = 0
    blocked: Counter[str] = field(default_factory=Counter)

    def add(self, action: DryAction) -> None:
        """Count one action."""
        if action.action == "patch annotations":
            self.published += 1
        elif action.action == "resize":
            self.in_place += 1
        elif action.action == "evict":
            self.evict += 1
        elif action.action == "blocked":
            self.blocked[action.reason or ""] += 1
        else:
            self.skipped += 1

    @property
    def pods(self) -> int:
        """Pods decided in the pass."""
        return self.in_place + self.evict + self.skipped + sum(self.blocked.values())

    def sentence(self) -> str:
        """The summary line: N would resize in place, M would evict, K blocked (by reason)."""
        blocked = sum(self.blocked.values())
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(self.blocked.items()))
        return (
            f"dry run: {self.in_place} would resize in place, {self.evict} would evict, "
            f"{blocked} blocked" + (f" ({reasons})" if reasons else "") + ", "
            f"{self.skipped} left as they are; {self.pods} running pods of "
            f"{self.workloads} workloads, nothing written"
        )

    def fields(self) -> dict[str, Any]:
        """The counts as JSON fields."""
        return {
            "wouldResizeInPlace": self.in_place,
            "wouldEvict": self.evict,
            "blocked": dict(sorted(self.blocked.items())),
            "unchanged": self.skipped,
            "wouldPublish": self.published,
            "pods": self.pods,
            "workloads": self.workloads,
        }


def _pod_label(pod: Any) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def pod_action(workload: str, pod_label: str, decision: PodDecision) -> DryAction:
    """What the service would do with one running pod's decision."""
    if decision.outcome == "apply":
        kind: ActionKind = "evict" if decision.method == "evict" else "resize"
        return DryAction(
            kind, workload, pod_label, message=decision.message, containers=decision.values
        )
    kind = "blocked" if decision.outcome == "blocked" else "skip"
    return DryAction(kind, workload, pod_label, decision.reason, decision.message)


def workload_actions(
    view: ClusterView,
    ref: WorkloadRef,
    now: datetime,
    metrics: ReconcilerMetrics | None = None,
) -> list[DryAction]:
    """The plan the service would make for one workload, as actions: the policy values it
    would publish, and one action per running pod, by its decision (none for a workload
    no policy manages). The plan is made with no memory of earlier writes."""
    workload = view.workload(ref)
    obj = view.get(ref.kind, ref.namespace, ref.name)
    if workload is None or obj is None:
        return []
    label = f"{ref.kind}/{ref.namespace}/{ref.name}"
    pods = sort_pods(view.pods(ref))
    plan = plan_workload(
        view,
        workload,
        obj,
        view.recommendations("record", ref),
        pods,
        WorkloadMemory(),
        now,
        ExecutionConfig().timings,
        (),
    )
    actions: list[DryAction] = []
    if plan.publish:
        actions.append(DryAction("patch annotations", label, keys=tuple(sorted(plan.publish))))
    for pod, decision in zip(plan.running, plan.decisions, strict=True):
        if metrics is not None:
            metrics.decisions.labels(decision.outcome, decision.reason or "").inc()
        actions.append(pod_action(label, _pod_label(pod), decision))
    return actions


def dry_pass(
    view: ClusterView, now: datetime, metrics: ReconcilerMetrics | None = None
) -> tuple[list[DryAction], Tally]:
    """One pass over every workload: what the service would do, and the tally."""
    tally = Tally()
    actions: list[DryAction] = []
    for ref in workloads_of(view):
        found = workload_actions(view, ref, now, metrics)
        if any(a.pod is not None for a in found):
            tally.workloads += 1
        for action in found:
            tally.add(action)
        actions.extend(found)
    return actions, tally


def log_pass(actions: Iterable[DryAction], tally: Tally) -> None:
    """Log every action of a pass, one line each, then the summary line."""
    for action in actions:
        log_fields(logger, action.sentence(), dryRun=True, **action.fields())
    log_fields(logger, tally.sentence(), dryRun=True, summary=tally.fields())


async def run_dry(
    feed: ClusterFeed,
    view: ClusterView,
    *,
    stop: asyncio.Event,
    once: bool,
    interval_s: float,
    clock: Clock,
    metrics: ReconcilerMetrics | None = None,
    api_timeout_s: float | None = None,
) -> int:
    """Watch the cluster and log a dry-run pass once the view is synced, then every
    `interval_s` until `stop` (or only once with `once`). With `api_timeout_s` the first
    sync is bounded (`app.kube.firstsync`: ApiUnavailable)."""
    task = asyncio.create_task(feed.run(), name="feed")
    try:
        if api_timeout_s is not None:
            await first_sync(feed, api_timeout_s, stop=stop)
        else:
            synced = asyncio.create_task(feed.wait_synced())
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({synced, stopped}, return_when=asyncio.FIRST_COMPLETED)
            synced.cancel()
            stopped.cancel()
        while not stop.is_set():
            actions, tally = dry_pass(view, clock(), metrics)
            log_pass(actions, tally)
            if once:
                break
            with contextlib.suppress(TimeoutError):  # the interval passed: the next pass
                await asyncio.wait_for(stop.wait(), interval_s)
        return 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
