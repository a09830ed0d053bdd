"""Prometheus metrics of the webhook, on a registry owned by one app instance.

A registry per app (instead of the process-global default) keeps several apps in one
process, as in the tests, from sharing or double-registering collectors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric

# Admission latency is expected well under a millisecond; the API server's timeout is
# seconds. The buckets resolve both ends.
LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.00075,
    0.001,
    0.0015,
    0.002,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)


@dataclass(frozen=True, slots=True)
class WebhookMetrics:
    """The collectors the request handler updates."""

    registry: CollectorRegistry
    requests: Counter
    latency: Histogram
    patched_values: Counter
    fail_open: Counter
    refused: Counter
    #: labelled children by labels, one map per collector: `labels()` takes a lock and
    #: builds a key on every call, which shows on the admission path; the label sets are
    #: few and fixed.
    _requests: dict[tuple[str, ...], Any] = field(default_factory=dict, compare=False)
    _patched: dict[tuple[str, ...], Any] = field(default_factory=dict, compare=False)
    _fail_open: dict[tuple[str, ...], Any] = field(default_factory=dict, compare=False)
    _refused: dict[tuple[str, ...], Any] = field(default_factory=dict, compare=False)

    def count_request(self, outcome: str, reason: str) -> None:
        """One answered /mutate request."""
        _child(self._requests, self.requests, (outcome, reason)).inc()

    def count_patched(self, resource: str, values: int = 1) -> None:
        """`values` container values set to `resource` by an admission patch."""
        _child(self._patched, self.patched_values, (resource,)).inc(values)

    def count_fail_open(self, cause: str) -> None:
        """One pod allowed unchanged because kerf could not decide."""
        _child(self._fail_open, self.fail_open, (cause,)).inc()

    def count_refused(self, reason: str) -> None:
        """One request answered without a decision (400, 413, 408, 431, client gone)."""
        _child(self._refused, self.refused, (reason,)).inc()


def _child(kept: dict[tuple[str, ...], Any], collector: Counter, labels: tuple[str, ...]) -> Any:
    """`collector.labels(*labels)`, kept in `kept` (the collector's own map)."""
    child = kept.get(labels)
    if child is None:
        child = kept[labels] = collector.labels(*labels)
    return child


class _MemoCounts:
    """`kerf_webhook_decision_memo_total`, read from the view's counts at scrape time
    (the memo is the library's; the webhook only reports it)."""

    labelnames = ("result",)

    def __init__(self, counts: Callable[[], tuple[int, int]]) -> None:
        self._counts = counts

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(
            "kerf_webhook_decision_memo",
            "Admission decisions answered from the per-template memo (hit) or made afresh "
            "(miss); pods of workloads the view does not hold are neither.",
            labels=self.labelnames,
        )

    def describe(self) -> Iterator[Metric]:
        """The family without samples (what the registry and docs/reference.md read)."""
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        """One sample per result: `hit` (answered from the memo), `miss` (decided)."""
        family = self._family()
        hits, misses = self._counts()
        family.add_metric(["hit"], hits)
        family.add_metric(["miss"], misses)
        yield family


def create_metrics(
    sync_age_seconds: Callable[[], float],
    memo_counts: Callable[[], tuple[int, int]] = lambda: (0, 0),
) -> WebhookMetrics:
    """Create the collectors on a fresh registry; `sync_age_seconds` and `memo_counts`
    (admission memo hits and misses) are read at scrape time."""
    registry = CollectorRegistry(auto_describe=True)
    requests = Counter(
        "kerf_webhook_requests",
        "Admission requests answered, by decision outcome and reason.",
        ["outcome", "reason"],
        registry=registry,
    )
    latency = Histogram(
        "kerf_webhook_request_duration_seconds",
        "Time to answer one /mutate request, from body read to response.",
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    patched_values = Counter(
        "kerf_webhook_patched_values",
        "Values set by admission patches, by resource (cpu, memory, ...; args for arguments).",
        ["resource"],
        registry=registry,
    )
    fail_open = Counter(
        "kerf_webhook_fail_open",
        "Requests allowed unchanged because kerf could not decide, by cause.",
        ["cause"],
        registry=registry,
    )
    refused = Counter(
        "kerf_webhook_refused_requests",
        "Requests answered without a decision (not JSON, too large or too many JSON values, too slow, "
        "headers over the limits, client gone, too many connections), by reason.",
        ["reason"],
        registry=registry,
    )
    sync_age = Gauge(
        "kerf_webhook_view_sync_age_seconds",
        "Seconds since the cluster view was last in sync (NaN before the first sync).",
        registry=registry,
    )
    sync_age.set_function(sync_age_seconds)
    registry.register(_MemoCounts(memo_counts))
    return WebhookMetrics(registry, requests, latency, patched_values, fail_open, refused)


def reference_registry() -> CollectorRegistry:
    """Every webhook collector on a fresh registry, for docs/reference.md (tools.refgen)."""
    return create_metrics(lambda: float("nan")).registry
