"""The webhook's counters: a kept labelled child counts into the same sample as `labels()`."""

from __future__ import annotations

from webhook.metrics import create_metrics


def test_counts_land_in_one_sample_per_label_set() -> None:
    metrics = create_metrics(lambda: 0.0)
    for _ in range(3):
        metrics.count_request("apply", "")
        metrics.count_patched("cpu", 2)
        metrics.count_fail_open("Deadline")
        metrics.count_refused("NotJSON")
    metrics.count_request("skipped", "NoPolicy")
    metrics.count_patched("memory")
    # A count through the collector itself reaches the same sample as the kept child.
    metrics.requests.labels("apply", "").inc()
    sample = metrics.registry.get_sample_value
    assert sample("kerf_webhook_requests_total", {"outcome": "apply", "reason": ""}) == 4
    assert sample("kerf_webhook_requests_total", {"outcome": "skipped", "reason": "NoPolicy"}) == 1
    assert sample("kerf_webhook_patched_values_total", {"resource": "cpu"}) == 6
    assert sample("kerf_webhook_patched_values_total", {"resource": "memory"}) == 1
    assert sample("kerf_webhook_fail_open_total", {"cause": "Deadline"}) == 3
    assert sample("kerf_webhook_refused_requests_total", {"reason": "NotJSON"}) == 3
