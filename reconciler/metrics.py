"""Prometheus metrics of the reconciler, on a registry owned by one service instance
(several instances in one process, as in the tests, never share collectors)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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
    pass_seconds: Histogram
    unchanged_passes: Counter
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
            "Writes not sent, by resource: this replica no longer held the leader Lease "
            "within its renew deadline.",
            ["resource"],
            registry=registry,
        ),
        unchanged_passes=Counter(
            "kerf_reconciler_unchanged_passes_total",
            "Passes that found nothing changed since a quiet pass and decided nothing again.",
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
        leader=Gauge(
            "kerf_reconciler_leader",
            "1 while this replica holds the leader Lease.",
            registry=registry,
        ),
        synced=Gauge(
            "kerf_reconciler_view_synced", "1 once the cluster view is synced.", registry=registry
        ),
    )


def reference_registry() -> CollectorRegistry:
    """Every reconciler collector on a fresh registry, for docs/reference.md (app.refgen)."""
    return reconciler_metrics().registry
