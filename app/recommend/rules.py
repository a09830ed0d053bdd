"""The rules of kerf's recommender (docs/recommender.md): from a container's usage history
to its recommendation row's values, or to the reason there is none.

Pure functions over plain data: the service gathers the history (Prometheus) and the
current resources (the cluster view) into `ContainerUsage`; everything decided from them
is here, so it is tested without a Prometheus.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from app.model.apitime import unix_rfc3339

MI = 1024 * 1024
LimitsMode = Literal["ratio", "keep"]
Point = tuple[float, float]


@dataclass(frozen=True, slots=True)
class RuleSettings:
    """The recommender's knobs (each one a flag of `kerf recommend`)."""

    cpu_percentile: float = 0.95
    memory_headroom: float = 0.15
    oom_factor: float = 1.2
    #: the guardrail's `rollback.throttlingRatio`: at or above it a container is throttled
    throttling_ratio: float = 0.25
    min_cpu_cores: float = 0.010
    min_memory_bytes: int = 32 * MI
    #: the guardrail's `learningPeriod`: coverage counts fully once it reaches this
    learning_hours: float = 168.0
    #: the sample count at which the sample factor reaches 1
    full_samples: int = 1000
    #: a stretch without any point longer than this is a gap
    max_gap_s: float = 900.0
    limits: LimitsMode = "ratio"


@dataclass(frozen=True, slots=True)
class Window:
    """The analysed time range (unix seconds) and the resolution of the range queries."""

    start: float
    end: float
    step_s: float

    @property
    def hours(self) -> float:
        """The window's length in hours."""
        return (self.end - self.start) / 3600


@dataclass(frozen=True, slots=True)
class ContainerUsage:
    """What the history and the view say about one container of a workload, every replica
    pooled."""

    name: str
    #: (unix time, cores) of the CPU usage rate, every replica's points
    cpu: Sequence[Point] = ()
    #: (unix time, bytes) of the working set, every replica's points
    memory: Sequence[Point] = ()
    throttled_periods: float | None = None
    periods: float | None = None
    oom_killed: bool = False
    #: the memory limit (bytes) the container ran with when it was killed, if it had one
    killed_limit_bytes: float | None = None
    #: the highest CPU request (cores) a replica or the template runs with now
    current_cpu_request: float | None = None
    #: limit / request per resource, from the workload's template
    limit_ratios: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ContainerResult:
    """The values of one container's recommendation row."""

    container: str
    requests: dict[str, str]
    limits: dict[str, str]
    coverage_hours: float
    samples: int
    confidence: float
    cpu_throttling_ratio: float | None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a workload gets no row this time: a reason word and a sentence."""

    reason: str
    message: str


def quantile(values: Sequence[float], q: float) -> float:
    """The `q` quantile (0..1) of `values`, linearly interpolated between the closest ranks
    (as Prometheus's `quantile_over_time` does)."""
    if not values:
        raise ValueError("quantile of no values")
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def coverage_hours(timestamps: Sequence[float], window: Window) -> float:
    """The span of the data in hours: first to last point, plus the one step the last point
    stands for, never more than the window."""
    if not timestamps:
        return 0.0
    span = max(timestamps) - min(timestamps) + window.step_s
    return min(span, window.end - window.start) / 3600


def first_gap(
    timestamps: Sequence[float], window: Window, max_gap_s: float
) -> tuple[float, float] | None:
    """The first stretch longer than `max_gap_s` without a point, between the first point
    and the window's end (data that starts late is young, not gapped)."""
    ordered = sorted(set(timestamps))
    for before, after in zip(ordered, [*ordered[1:], window.end], strict=True):
        if after - before > max_gap_s:
            return (before, after)
    return None


def coefficient_of_variation(values: Sequence[float], floor: float) -> float:
    """Standard deviation over mean; the mean is taken as at least `floor`, so a nearly idle
    container's noise does not read as instability."""
    mean = sum(values) / len(values)
    variance = sum((v - mean) ** 2 for v in values) / len(values)
    return math.sqrt(variance) / max(mean, floor)


def confidence(coverage_h: float, samples: int, cv: float, settings: RuleSettings) -> float:
    """coverage factor × sample factor × stability factor, rounded down to 0.01.

    coverage factor = min(1, coverage / learning period); sample factor = min(1, samples /
    full samples); stability factor = 1 / (1 + coefficient of variation of CPU usage).
    """
    coverage_factor = min(1.0, max(0.0, coverage_h) / settings.learning_hours)
    sample_factor = min(1.0, max(0, samples) / settings.full_samples)
    stability_factor = 1.0 / (1.0 + max(0.0, cv))
    # A hair of tolerance: 0.7 computed as 0.6999999 must not round down to 0.69.
    return math.floor(coverage_factor * sample_factor * stability_factor * 100 + 1e-9) / 100


def throttling_ratio(usage: ContainerUsage) -> float | None:
    """Throttled CFS periods over all periods in the window (None without periods)."""
    if usage.periods is None or usage.periods <= 0 or usage.throttled_periods is None:
        return None
    return min(1.0, max(0.0, usage.throttled_periods / usage.periods))


def cpu_request_cores(usage: ContainerUsage, settings: RuleSettings) -> float:
    """The percentile of the usage rate, at least `min_cpu_cores`; a throttled container
    keeps at least the request it runs with."""
    cores = max(
        quantile([v for _, v in usage.cpu], settings.cpu_percentile), settings.min_cpu_cores
    )
    ratio = throttling_ratio(usage)
    if ratio is not None and ratio >= settings.throttling_ratio and usage.current_cpu_request:
        cores = max(cores, usage.current_cpu_request)
    return cores


def memory_request_bytes(usage: ContainerUsage, settings: RuleSettings) -> float:
    """The maximum working set plus the headroom, at least `min_memory_bytes`; an OOM-killed
    container gets at least `oom_factor` × the limit it was killed at (or × its maximum
    working set when it had no limit)."""
    peak = max(v for _, v in usage.memory)
    memory = max(peak * (1 + settings.memory_headroom), settings.min_memory_bytes)
    if usage.oom_killed:
        killed_at = usage.killed_limit_bytes if usage.killed_limit_bytes else peak
        memory = max(memory, settings.oom_factor * killed_at)
    return memory


def _millicores(cores: float) -> int:
    # Round a float's last-bit noise away before rounding up (0.25 * 1000 is 250, not 251).
    return max(1, math.ceil(round(cores * 1000, 6)))


def _mebibytes(amount: float) -> int:
    return max(1, math.ceil(round(amount / MI, 6)))


def _limit(units: int, ratio: float | None) -> int | None:
    if ratio is None:
        return None
    return math.ceil(round(units * max(1.0, ratio), 6))


def _problem(usage: ContainerUsage, window: Window, settings: RuleSettings) -> Refusal | None:
    name = usage.name
    if not usage.cpu and not usage.memory:
        return Refusal("NoSeries", f"container {name}: no CPU or memory series in the window")
    if not usage.cpu or not usage.memory:
        have, lack = ("memory", "CPU") if not usage.cpu else ("CPU", "memory")
        return Refusal("PartialAnswer", f"container {name}: {have} series but no {lack} series")
    values = [v for _, v in usage.cpu] + [v for _, v in usage.memory]
    extra = [usage.throttled_periods, usage.periods]
    if any(math.isnan(v) or math.isinf(v) for v in values + [x for x in extra if x is not None]):
        return Refusal("NotANumber", f"container {name}: Prometheus answered NaN or Inf")
    for series, points in (("CPU", usage.cpu), ("memory", usage.memory)):
        gap = first_gap([t for t, _ in points], window, settings.max_gap_s)
        if gap is not None:
            return Refusal(
                "DataGap",
                f"container {name}: no {series} data from {unix_rfc3339(gap[0])} to {unix_rfc3339(gap[1])}",
            )
    return None


def recommend_container(
    usage: ContainerUsage, window: Window, settings: RuleSettings
) -> ContainerResult | Refusal:
    """One container's row values, or why there is none."""
    problem = _problem(usage, window, settings)
    if problem is not None:
        return problem
    cpu_m = _millicores(cpu_request_cores(usage, settings))
    memory_mi = _mebibytes(memory_request_bytes(usage, settings))
    limits: dict[str, str] = {}
    if settings.limits == "ratio":
        cpu_limit = _limit(cpu_m, usage.limit_ratios.get("cpu"))
        memory_limit = _limit(memory_mi, usage.limit_ratios.get("memory"))
        if cpu_limit is not None:
            limits["cpu"] = f"{cpu_limit}m"
        if memory_limit is not None:
            limits["memory"] = f"{memory_limit}Mi"
    timestamps = [t for t, _ in usage.cpu]
    cover = coverage_hours(timestamps, window)
    samples = min(len(usage.cpu), len(usage.memory))
    cv = coefficient_of_variation([v for _, v in usage.cpu], settings.min_cpu_cores)
    ratio = throttling_ratio(usage)
    return ContainerResult(
        container=usage.name,
        requests={"cpu": f"{cpu_m}m", "memory": f"{memory_mi}Mi"},
        limits=limits,
        coverage_hours=round(cover, 2),
        samples=samples,
        confidence=confidence(cover, samples, cv, settings),
        cpu_throttling_ratio=None if ratio is None else round(ratio, 3),
    )


def recommend_workload(
    containers: Sequence[ContainerUsage], window: Window, settings: RuleSettings
) -> list[ContainerResult] | Refusal:
    """Every container's row values, or the first container's reason there are none: a
    workload gets rows for all of its containers or for none."""
    if not containers:
        return Refusal("NoContainers", "the workload's template has no containers")
    results: list[ContainerResult] = []
    for usage in sorted(containers, key=lambda u: u.name):
        outcome = recommend_container(usage, window, settings)
        if isinstance(outcome, Refusal):
            return outcome
        results.append(outcome)
    return results


def workload_confidence(results: Sequence[ContainerResult]) -> float:
    """The workload's score: the lowest of its containers'."""
    return min(r.confidence for r in results)
