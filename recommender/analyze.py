"""One analysis: ask Prometheus, apply the rules to every workload of the view."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from app.model.owners import WorkloadRef
from app.recommend.inputs import Answers, usage_for
from app.recommend.policy import rules_for
from app.recommend.prometheus_query import MAX_POINTS_PER_SERIES, AnswerError, Queries
from app.recommend.rows import Row, row
from app.recommend.rules import (
    Refusal,
    RuleSettings,
    Window,
    recommend_workload,
    workload_confidence,
)
from app.store.view import ClusterView
from recommender.metrics import RecommenderMetrics
from recommender.prometheus import PrometheusApi, Unreachable

logger = logging.getLogger("kerf.recommender")


@dataclass(frozen=True, slots=True)
class Settings:
    """What one analysis reads and how it decides."""

    window_s: float = 168 * 3600.0
    step_s: float = 300.0
    rate_s: float = 300.0
    queries: Queries = Queries()
    rules: RuleSettings = RuleSettings()

    def problem(self) -> str | None:
        """Why these settings cannot work, in one sentence (None when they can)."""
        if self.step_s <= 0 or self.window_s <= 0 or self.rate_s <= 0:
            return "--window, --step and --rate-window must be positive"
        if self.window_s / self.step_s > MAX_POINTS_PER_SERIES:
            return (
                f"--window / --step is {self.window_s / self.step_s:.0f} points a series; "
                f"Prometheus answers at most {MAX_POINTS_PER_SERIES}: raise --step"
            )
        if self.rules.max_gap_s < self.step_s:
            return "--max-gap must be at least --step"
        return None


@dataclass(frozen=True, slots=True)
class Outcome:
    """One workload's result: its rows and score, or the reason it has none."""

    ref: WorkloadRef
    rows: Sequence[Row] = ()
    confidence: float | None = None
    refusal: Refusal | None = None


@dataclass(frozen=True, slots=True)
class Analysis:
    """Every workload's outcome of one run, and the run's own failure if it had one."""

    analyzed_at: datetime
    outcomes: Sequence[Outcome] = ()
    #: PrometheusUnreachable or QueryFailed: no workload got a row
    failure: str | None = None
    #: what the failure was (Prometheus's error, the address that did not answer)
    failure_message: str = ""

    @property
    def rows(self) -> list[Row]:
        """Every row of the run."""
        return [r for outcome in self.outcomes for r in outcome.rows]

    def as_json(self) -> dict[str, Any]:
        """`{"recommendations": [rows], "skipped": [...]}` (`-o json`)."""
        skipped = [
            {
                "namespace": o.ref.namespace,
                "ownerKind": o.ref.kind,
                "ownerName": o.ref.name,
                "reason": o.refusal.reason,
                "message": o.refusal.message,
            }
            for o in self.outcomes
            if o.refusal is not None
        ]
        return {"recommendations": self.rows, "skipped": skipped}


async def _answers(
    api: PrometheusApi,
    settings: Settings,
    window: Window,
    metrics: RecommenderMetrics,
    namespaces: Collection[str] | None = None,
) -> Answers:
    q = settings.queries

    def render(template: str) -> str:
        return q.render(
            template,
            window_s=window.end - window.start,
            rate_s=settings.rate_s,
            namespaces=namespaces,
        )

    async def counted(name: str, call: Any) -> Any:
        try:
            answer = await call
        except Unreachable:
            metrics.queries.labels(name, "unreachable").inc()
            raise
        except AnswerError as exc:
            metrics.queries.labels(name, "error").inc()
            raise AnswerError(f"the {name} query: {exc}") from None
        metrics.queries.labels(name, "ok").inc()
        return answer

    ranges = [
        counted(name, api.query_range(render(t), window.start, window.end, window.step_s))
        for name, t in (("cpu", q.cpu), ("memory", q.memory))
    ]
    instants = [
        counted(name, api.query(render(t), window.end))
        for name, t in (("throttled", q.throttled), ("periods", q.periods), ("oom", q.oom))
    ]
    answers = await asyncio.gather(*ranges, *instants, return_exceptions=True)
    for kind in (Unreachable, AnswerError):
        for answer in answers:
            if isinstance(answer, kind):
                raise answer
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    # No answer is an exception past the loops above, which gather's annotation cannot say.
    cpu, memory, throttled, periods, oom = cast("list[Any]", answers)
    return Answers(cpu=cpu, memory=memory, throttled=throttled, periods=periods, oom=oom)


async def analyze(
    view: ClusterView,
    api: PrometheusApi,
    settings: Settings,
    metrics: RecommenderMetrics,
    now: datetime,
    *,
    own_namespaces: bool = False,
) -> Analysis:
    """Every workload's rows (or reason) from the window that ends at `now`. With
    `own_namespaces` (sharded: the view holds only this replica's buckets) Prometheus is
    asked only about the namespaces of the view's workloads."""
    end = now.timestamp()
    window = Window(end - settings.window_s, end, settings.step_s)
    refs = sorted((w.ref for w in view.workloads()), key=lambda r: r.key)
    namespaces = {ref.namespace for ref in refs} if own_namespaces else None
    try:
        answers = await _answers(api, settings, window, metrics, namespaces)
    except Unreachable as exc:
        return _failed(now, refs, Refusal("PrometheusUnreachable", str(exc)))
    except AnswerError as exc:
        return _failed(now, refs, Refusal("QueryFailed", f"Prometheus refused {exc}"))
    usages = usage_for(view, answers, window, settle_s=settings.rate_s + 2 * settings.step_s)
    workloads = {w.ref: w for w in view.workloads()}
    outcomes: list[Outcome] = []
    for ref in refs:
        usage = usages[ref]
        outcome = (
            usage
            if isinstance(usage, Refusal)
            else recommend_workload(usage, window, rules_for(view, workloads[ref], settings.rules))
        )
        if isinstance(outcome, Refusal):
            outcomes.append(Outcome(ref, refusal=outcome))
            continue
        outcomes.append(
            Outcome(
                ref,
                rows=[row(ref, r, now) for r in outcome],
                confidence=workload_confidence(outcome),
            )
        )
    return Analysis(analyzed_at=now, outcomes=outcomes)


def _failed(now: datetime, refs: Sequence[WorkloadRef], refusal: Refusal) -> Analysis:
    return Analysis(
        analyzed_at=now,
        outcomes=[Outcome(ref, refusal=refusal) for ref in refs],
        failure=refusal.reason,
        failure_message=refusal.message,
    )


def record(analysis: Analysis, metrics: RecommenderMetrics, *, log_failure: bool = True) -> None:
    """The run's metrics and one log line per refused workload; a failed run's one line
    (unless `log_failure` is off: a run by hand says it on stderr itself)."""
    metrics.runs.labels(analysis.failure or "ok").inc()
    if analysis.failure is None:
        metrics.last_success.set(analysis.analyzed_at.timestamp())
    metrics.workloads.clear()
    for outcome in analysis.outcomes:
        if outcome.refusal is None:
            metrics.workloads.labels("recommended", "").inc()
        else:
            metrics.workloads.labels("refused", outcome.refusal.reason).inc()
    metrics.rows.set(len(analysis.rows))
    if analysis.failure is not None:
        if log_failure:
            logger.warning(
                "no recommendations this run",
                extra={"fields": {"reason": analysis.failure, "detail": analysis.failure_message}},
            )
        return
    for outcome in analysis.outcomes:
        fields = {
            "namespace": outcome.ref.namespace,
            "kind": outcome.ref.kind,
            "name": outcome.ref.name,
        }
        if outcome.refusal is not None:
            logger.info(
                "no recommendation",
                extra={
                    "fields": {
                        **fields,
                        "reason": outcome.refusal.reason,
                        "detail": outcome.refusal.message,
                    }
                },
            )
        else:
            logger.info(
                "recommended",
                extra={
                    "fields": {
                        **fields,
                        "confidence": outcome.confidence,
                        "rows": len(outcome.rows),
                    }
                },
            )
