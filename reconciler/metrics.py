"""Prometheus metrics of the reconciler, on a registry owned by one service instance
(several instances in one process, as in the tests, never share collectors)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.outcome.report import STATES, Report, build_report
from app.policy.rollback import rollback_state
from app.runtime.clock import Clock, utc_now
from app.store.view import ClusterView

#: The savings totals decide every pod of the view: a scrape within this many seconds of
#: the last computation is answered from it.
REPORT_REUSE_S = 60.0
PASS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True, slots=True)
class ReconcilerMetrics:
    """The collectors the reconciler updates."""

    registry: CollectorRegistry
    decisions: Counter
    resizes: Counter
    evictions: Counter
    fallbacks: Counter
    api_calls: Counter
    pass_failures: Counter
    writes_withheld: Counter
    buckets_held: Gauge
    bucket_namespaces_held: Gauge
    bucket_rebalances: Counter
    bucket_count_mismatch: Gauge
    writes_outlived: Counter
    pass_seconds: Histogram
    unchanged_passes: Counter
    events: Counter
    queue_latency: Histogram
    queue_depth: Gauge
    leader: Gauge
    synced: Gauge

    def api_call(self, verb: str, resource: str, code: str) -> None:
        """One API call and its answer (HTTP code, or `error` for no answer)."""
        self.api_calls.labels(verb, resource, code).inc()


def reconciler_metrics(registry: CollectorRegistry | None = None) -> ReconcilerMetrics:
    """Every collector of the reconciler on `registry` (a new one by default)."""
    registry = registry if registry is not None else CollectorRegistry()
    return ReconcilerMetrics(
        registry=registry,
        decisions=Counter(
            "kerf_reconciler_decisions_total",
            "Running-path pod decisions, by outcome and reason.",
            ["outcome", "reason"],
            registry=registry,
        ),
        resizes=Counter(
            "kerf_reconciler_resizes_total",
            "In-place resizes: requested, done (kubelet runs the values), rejected by the API.",
            ["result"],
            registry=registry,
        ),
        evictions=Counter(
            "kerf_reconciler_evictions_total",
            "Evictions: evicted, refused (PDB, 429: retried later), gone, held (webhook Lease stale).",
            ["result"],
            registry=registry,
        ),
        fallbacks=Counter(
            "kerf_reconciler_resize_fallbacks_total",
            "In-place resizes that fell back to eviction or were blocked, by cause.",
            ["cause", "result"],
            registry=registry,
        ),
        api_calls=Counter(
            "kerf_reconciler_api_requests_total",
            "API calls made by the reconciler, by verb, resource and HTTP code.",
            ["verb", "resource", "code"],
            registry=registry,
        ),
        pass_failures=Counter(
            "kerf_reconciler_pass_failures_total",
            "Passes that failed (an API error or no answer) and were queued again with backoff.",
            ["error"],
            registry=registry,
        ),
        writes_withheld=Counter(
            "kerf_reconciler_writes_withheld_total",
            "Writes not sent, by resource and bucket: this replica no longer held the Lease "
            'the write needs (bucket "": the leader Lease; else the bucket Lease of the '
            "workload's namespace) within its renew deadline.",
            ["resource", "bucket"],
            registry=registry,
        ),
        writes_outlived=Counter(
            "kerf_reconciler_writes_outlived_lease_total",
            "Writes sent as the leader whose answer came once this replica no longer led, "
            "by resource: a pause or a hang after the leader check.",
            ["resource"],
            registry=registry,
        ),
        unchanged_passes=Counter(
            "kerf_reconciler_unchanged_passes_total",
            "Passes that found nothing changed since a quiet pass and decided nothing again.",
            registry=registry,
        ),
        events=Counter(
            "kerf_reconciler_events_total",
            "Events told about workloads, by type and reason (Resized, Pending, Blocked …).",
            ["type", "reason"],
            registry=registry,
        ),
        pass_seconds=Histogram(
            "kerf_reconciler_pass_seconds",
            "Time to reconcile one workload (decide, act, report).",
            buckets=PASS_BUCKETS,
            registry=registry,
        ),
        queue_latency=Histogram(
            "kerf_reconciler_queue_latency_seconds",
            "Time a workload waited in the work queue.",
            buckets=PASS_BUCKETS,
            registry=registry,
        ),
        queue_depth=Gauge(
            "kerf_reconciler_queue_depth", "Workloads waiting in the work queue.", registry=registry
        ),
        buckets_held=Gauge(
            "kerf_reconciler_buckets_held",
            "Bucket Leases this replica holds (sharded with --shards; 0 with one bucket, "
            "where kerf_reconciler_leader tells).",
            registry=registry,
        ),
        bucket_namespaces_held=Gauge(
            "kerf_reconciler_bucket_namespaces_held",
            "Namespaces in the buckets this replica holds: the weight the buckets are shared "
            "by (sharded with --shards).",
            registry=registry,
        ),
        bucket_rebalances=Counter(
            "kerf_reconciler_bucket_rebalances_total",
            "Bucket Leases this replica gained or gave up, by reason: claimed, released "
            "(moved to a lighter replica, or at shutdown) or lost (not renewed in time, or taken).",
            ["reason"],
            registry=registry,
        ),
        bucket_count_mismatch=Gauge(
            "kerf_reconciler_bucket_count_mismatch",
            "1 while a live Lease of this replica's shard set says another bucket count "
            "(--shards changed in a rolling update): it claims no bucket (with --shards 1: "
            "does not take the leader Lease) until those go.",
            registry=registry,
        ),
        leader=Gauge(
            "kerf_reconciler_leader",
            "1 while this replica holds the leader Lease (sharded: bucket 00's, whose "
            "holder writes for the whole cluster).",
            registry=registry,
        ),
        synced=Gauge(
            "kerf_reconciler_view_synced", "1 once the cluster view is synced.", registry=registry
        ),
    )


class SavingsCollector(Collector):
    """The totals of `kerf report` per namespace, computed from the view when scraped (at
    most once per `REPORT_REUSE_S`); nothing before the view is synced."""

    labelnames = ("namespace", "state")

    def __init__(
        self,
        view: ClusterView,
        clock: Clock = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._view = view
        self._clock = clock
        self._monotonic = monotonic
        self._last: tuple[float, Report] | None = None

    def _families(self) -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "kerf_reconciler_report_cpu_cores",
                "CPU cores requested by the live pods of workloads, per namespace: by the "
                "manifest, now, recommended (the selected recommendations) and applied "
                "(through the guardrails).",
                labels=self.labelnames,
            ),
            GaugeMetricFamily(
                "kerf_reconciler_report_memory_bytes",
                "Memory bytes requested by the live pods of workloads, per namespace: by the "
                "manifest, now, recommended and applied, as for the CPU cores.",
                labels=self.labelnames,
            ),
        )

    def describe(self) -> Iterator[Metric]:
        """The two families, without samples."""
        return iter(self._families())

    def report(self) -> Report | None:
        """The latest report (recomputed when older than `REPORT_REUSE_S`)."""
        if not self._view.synced:
            return None
        now = self._monotonic()
        if self._last is None or now - self._last[0] >= REPORT_REUSE_S:
            self._last = (now, build_report(self._view, now=self._clock()))
        return self._last[1]

    def collect(self) -> Iterator[Metric]:
        """One sample per namespace and state of each family."""
        cpu, memory = self._families()
        report = self.report()
        for namespace, totals in (report.namespaces if report else {}).items():
            for state in STATES:
                cpu.add_metric([namespace, state], totals.cores(state))
                memory.add_metric([namespace, state], float(totals.memory_bytes[state]))
        yield cpu
        yield memory


#: The modes of SPEC §8's rollback state, each exported even when no workload is in it.
ROLLBACK_MODES = (
    "idle",
    "monitoring",
    "monitoringSucceeded",
    "rollingBack",
    "backingOff",
    "failedPermanent",
)


class RollbackStatesCollector(Collector):
    """Workloads by the mode of their rollback state, read from the view when scraped."""

    labelnames = ("mode",)

    def __init__(self, view: ClusterView) -> None:
        self._view = view

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "kerf_reconciler_rollback_workloads",
            "Workloads by rollback state mode (SPEC §8); a workload without a rollback "
            "state is not counted.",
            labels=self.labelnames,
        )

    def describe(self) -> Iterator[Metric]:
        """The family, without samples."""
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        """One sample per mode, 0 included; nothing before the view is synced."""
        family = self._family()
        if self._view.synced:
            counts = dict.fromkeys(ROLLBACK_MODES, 0)
            with self._view.lock:
                for workload in self._view.workloads():
                    state = rollback_state(self._view, workload)
                    if state is not None:
                        counts[state.mode] = counts.get(state.mode, 0) + 1
            for mode, count in counts.items():
                family.add_metric([mode], float(count))
        yield family


def reference_registry() -> CollectorRegistry:
    """Every reconciler collector on a fresh registry, for docs/reference.md (tools.refgen)."""
    registry = reconciler_metrics().registry
    registry.register(SavingsCollector(ClusterView()))
    registry.register(RollbackStatesCollector(ClusterView()))
    return registry
