"""The webhook's counters and latency histogram: plain counts, exposed as Prometheus
samples at scrape time."""

from __future__ import annotations

import math

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from webhook.metrics import LATENCY_BUCKETS, create_metrics


def test_counts_land_in_one_sample_per_label_set() -> None:
    metrics = create_metrics(lambda: 0.0)
    for _ in range(3):
        metrics.count_request("apply", "")
        metrics.count_patched("cpu", 2)
        metrics.count_fail_open("Deadline")
        metrics.count_refused("NotJSON")
    metrics.count_request("skipped", "NoPolicy")
    metrics.count_patched("memory")
    sample = metrics.registry.get_sample_value
    assert sample("kerf_webhook_requests_total", {"outcome": "apply", "reason": ""}) == 3
    assert sample("kerf_webhook_requests_total", {"outcome": "skipped", "reason": "NoPolicy"}) == 1
    assert sample("kerf_webhook_patched_values_total", {"resource": "cpu"}) == 6
    assert sample("kerf_webhook_patched_values_total", {"resource": "memory"}) == 1
    assert sample("kerf_webhook_fail_open_total", {"cause": "Deadline"}) == 3
    assert sample("kerf_webhook_refused_requests_total", {"reason": "NotJSON"}) == 3
    assert sample("kerf_webhook_refused_requests_total", {"reason": "TooLarge"}) is None


def test_latency_buckets_are_cumulative_and_count_their_bound() -> None:
    metrics = create_metrics(lambda: 0.0)
    durations = [0.00005, 0.0001, 0.0003, 0.0003, 0.002, 7.0]
    for seconds in durations:
        metrics.latency.observe(seconds)
    sample = metrics.registry.get_sample_value
    name = "kerf_webhook_request_duration_seconds"
    for bound in LATENCY_BUCKETS:
        expected = sum(1 for d in durations if d <= bound)
        assert sample(f"{name}_bucket", {"le": str(bound)}) == expected, bound
    assert sample(f"{name}_bucket", {"le": "+Inf"}) == len(durations)
    assert sample(f"{name}_count") == len(durations)
    assert math.isclose(sample(f"{name}_sum") or 0.0, sum(durations))


def test_families_are_exposed_before_anything_is_counted() -> None:
    text = generate_latest(create_metrics(lambda: 0.0).registry).decode()
    kinds = {family.name: family.type for family in text_string_to_metric_families(text)}
    assert kinds["kerf_webhook_requests"] == "counter"
    assert kinds["kerf_webhook_patched_values"] == "counter"
    assert kinds["kerf_webhook_fail_open"] == "counter"
    assert kinds["kerf_webhook_refused_requests"] == "counter"
    assert kinds["kerf_webhook_request_duration_seconds"] == "histogram"
    assert 'kerf_webhook_request_duration_seconds_bucket{le="+Inf"} 0.0' in text
