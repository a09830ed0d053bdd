"""Prometheus metrics of the recommender, on a registry owned by one service instance."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

RUN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


@dataclass(frozen=True, slots=True)
class RecommenderMetrics:
    """The collectors the recommender updates."""

    registry: CollectorRegistry
    runs: Counter
    run_seconds: Histogram
    queries: Counter
    workloads: Gauge
    rows: Gauge
    writes: Counter
    writes_withheld: Counter
    buckets_held: Gauge
    bucket_namespaces_held: Gauge
    bucket_rebalances: Counter
    bucket_count_mismatch: Gauge
    leader: Gauge
    last_success: Gauge
    gpu_evaluations: Counter


def recommender_metrics(registry: CollectorRegistry | None = None) -> RecommenderMetrics:
    """Every collector of the recommender on `registry` (a new one by default)."""
    registry = registry if registry is not None else CollectorRegistry()
    return RecommenderMetrics(
        registry=registry,
        runs=Counter(
            "kerf_recommender_runs_total",
            "Recommender runs, by result: ok, or why no workload got a row "
            "(PrometheusUnreachable, QueryFailed).",
            ["result"],
            registry=registry,
        ),
        run_seconds=Histogram(
            "kerf_recommender_run_seconds",
            "Duration of one run: the queries, the rules and the ConfigMap writes.",
            buckets=RUN_BUCKETS,
            registry=registry,
        ),
        queries=Counter(
            "kerf_recommender_prometheus_queries_total",
            "Queries sent to Prometheus, by query (cpu, memory, throttled, periods, oom) and "
            "result (ok, error, unreachable).",
            ["query", "result"],
            registry=registry,
        ),
        workloads=Gauge(
            "kerf_recommender_workloads",
            "Workloads of the last run, by outcome (recommended, refused) and reason.",
            ["outcome", "reason"],
            registry=registry,
        ),
        rows=Gauge(
            "kerf_recommender_rows",
            "Recommendation rows the last run computed (one per container).",
            registry=registry,
        ),
        writes=Counter(
            "kerf_recommender_configmap_writes_total",
            "Writes of the recommendation ConfigMaps, by result (created, patched, "
            "unchanged, error).",
            ["result"],
            registry=registry,
        ),
        writes_withheld=Counter(
            "kerf_recommender_writes_withheld_total",
            "Writes not sent, by resource and bucket: this replica no longer held the Lease "
            'the write needs (bucket "": the leader Lease; else the bucket Lease of the '
            "workload's namespace) within its renew deadline.",
            ["resource", "bucket"],
            registry=registry,
        ),
        buckets_held=Gauge(
            "kerf_recommender_buckets_held",
            "Bucket Leases this replica holds (sharded with --shards; 0 with one bucket, "
            "where kerf_recommender_leader tells).",
            registry=registry,
        ),
        bucket_namespaces_held=Gauge(
            "kerf_recommender_bucket_namespaces_held",
            "Namespaces in the buckets this replica holds: the weight the buckets are shared "
            "by (sharded with --shards).",
            registry=registry,
        ),
        bucket_rebalances=Counter(
            "kerf_recommender_bucket_rebalances_total",
            "Bucket Leases this replica gained or gave up, by reason: claimed, released "
            "(moved to a lighter replica, or at shutdown) or lost (not renewed in time, or taken).",
            ["reason"],
            registry=registry,
        ),
        bucket_count_mismatch=Gauge(
            "kerf_recommender_bucket_count_mismatch",
            "1 while a live Lease of this replica's shard set says another bucket count "
            "(--shards changed in a rolling update): it claims no bucket (with --shards 1: "
            "does not take the leader Lease) until those go.",
            registry=registry,
        ),
        leader=Gauge(
            "kerf_recommender_leader",
            "1 while this replica holds the leader Lease (sharded: bucket 00's, whose "
            "holder writes for the whole cluster).",
            registry=registry,
        ),
        last_success=Gauge(
            "kerf_recommender_last_success_timestamp_seconds",
            "Unix time of the last run that reached Prometheus.",
            registry=registry,
        ),
        gpu_evaluations=Counter(
            "kerf_recommender_gpu_evaluations_total",
            "GpuReactivePolicy evaluations of a workload, by reason (GpuUpsize, "
            "GpuScaleBack, GpuPrometheusUnavailable, ...: docs/gpu.md).",
            ["reason"],
            registry=registry,
        ),
    )


def reference_registry() -> CollectorRegistry:
    """Every recommender collector on a fresh registry, for docs/reference.md (tools.refgen)."""
    return recommender_metrics().registry
