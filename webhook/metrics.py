"""Prometheus metrics of the webhook, on a registry owned by one app instance.

A registry per app (instead of the process-global default) keeps several apps in one
process, as in the tests, from sharing or double-registering collectors.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import accumulate

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

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
    requests: CountsByLabel
    latency: LatencyHistogram
    patched_values: CountsByLabel
    fail_open: CountsByLabel
    refused: CountsByLabel

    def count_request(self, outcome: str, reason: str) -> None:
        """One answered /mutate request."""
        self.requests.add((outcome, reason))

    def count_patched(self, resource: str, values: int = 1) -> None:
        """`values` container values set to `resource` by an admission patch."""
        self.patched_values.add((resource,), values)

    def count_fail_open(self, cause: str) -> None:
        """One pod allowed unchanged because kerf could not decide."""
        self.fail_open.add((cause,))

    def count_refused(self, reason: str) -> None:
        """One request answered without a decision (400, 413, 408, 431, client gone)."""
        self.refused.add((reason,))


class CountsByLabel:
    """A labelled counter kept as plain numbers and turned into samples at scrape time.

    prometheus_client's counters take a lock on every increment, which is most of what
    the metrics cost per admission; the webhook counts only on its event loop's thread,
    so a dict is enough. A scrape reads a copy of the counts.
    """

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...]):
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self._counts: dict[tuple[str, ...], float] = {}

    def add(self, labels: tuple[str, ...], amount: float = 1) -> None:
        """Count `amount` under `labels` (one value per label name)."""
        counts = self._counts
        counts[labels] = counts.get(labels, 0) + amount

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def describe(self) -> Iterator[Metric]:
        """The family without samples (what the registry and docs/reference.md read)."""
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        """One sample per label set counted so far."""
        family = self._family()
        for labels, value in list(self._counts.items()):
            family.add_metric(list(labels), value)
        yield family


class LatencyHistogram:
    """An unlabelled histogram kept as plain bucket counts, for the same reason as
    `CountsByLabel`; the cumulative buckets are summed at scrape time."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...]):
        self.name = name
        self.documentation = documentation
        self._bounds = buckets
        #: observations per bucket, not cumulative; the last one is above every bound
        self._counts = [0] * (len(buckets) + 1)
        self._sum = 0.0

    def observe(self, seconds: float) -> None:
        """Record one duration."""
        # A bucket counts values up to and including its bound (Prometheus's `le`).
        self._counts[bisect_left(self._bounds, seconds)] += 1
        self._sum += seconds

    def _family(self, buckets: list[tuple[str, float]] | None = None) -> HistogramMetricFamily:
        return HistogramMetricFamily(
            self.name,
            self.documentation,
            buckets=buckets,
            sum_value=self._sum if buckets is not None else None,
        )

    def describe(self) -> Iterator[Metric]:
        """The family without samples."""
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        """The cumulative buckets, the count and the sum."""
        counts = list(self._counts)
        bounds = [*map(floatToGoString, self._bounds), "+Inf"]
        yield self._family(list(zip(bounds, accumulate(counts), strict=True)))


class _MemoCounts(CountsByLabel):
    """`kerf_webhook_decision_memo_total`, read from the view's counts at scrape time
    (the memo is the library's; the webhook only reports it)."""

    def __init__(self, counts: Callable[[], tuple[int, int]]) -> None:
        super().__init__(
            "kerf_webhook_decision_memo",
            "Admission decisions answered from the per-template memo (hit) or made afresh "
            "(miss); pods of workloads the view does not hold are neither.",
            ("result",),
        )
        self._read = counts

    def collect(self) -> Iterator[Metric]:
        """One sample per result: `hit` (answered from the memo), `miss` (decided)."""
        family = self._family()
        hits, misses = self._read()
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
    requests = CountsByLabel(
        "kerf_webhook_requests",
        "Admission requests answered, by decision outcome and reason.",
        ("outcome", "reason"),
    )
    latency = LatencyHistogram(
        "kerf_webhook_request_duration_seconds",
        "Time to answer one /mutate request, from body read to response.",
        LATENCY_BUCKETS,
    )
    patched_values = CountsByLabel(
        "kerf_webhook_patched_values",
        "Values set by admission patches, by resource (cpu, memory, ...; args for arguments).",
        ("resource",),
    )
    fail_open = CountsByLabel(
        "kerf_webhook_fail_open",
        "Requests allowed unchanged because kerf could not decide, by cause.",
        ("cause",),
    )
    refused = CountsByLabel(
        "kerf_webhook_refused_requests",
        "Requests answered without a decision (not JSON, too large or too many JSON values, too slow, "
        "headers over the limits, client gone, too many connections), by reason.",
        ("reason",),
    )
    for collector in (requests, latency, patched_values, fail_open, refused):
        registry.register(collector)
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
