"""Prometheus metrics of the webhook, on a registry owned by one app instance.

A registry per app (instead of the process-global default) keeps several apps in one
process, as in the tests, from sharing or double-registering collectors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Admission latency is expected well under a millisecond; the API server's timeout is
# seconds. The buckets resolve both ends.
LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.00075,
    0.001,
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


def create_metrics(sync_age_seconds: Callable[[], float]) -> WebhookMetrics:
    """Create the collectors on a fresh registry; `sync_age_seconds` is read at scrape time."""
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
    sync_age = Gauge(
        "kerf_webhook_view_sync_age_seconds",
        "Seconds since the cluster view was last in sync (NaN before the first sync).",
        registry=registry,
    )
    sync_age.set_function(sync_age_seconds)
    return WebhookMetrics(registry, requests, latency, patched_values, fail_open)
