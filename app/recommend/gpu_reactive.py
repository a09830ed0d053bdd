"""The GpuReactivePolicy decision (docs/gpu.md): one pure function from a workload's pods,
their GPU usage over the policy's windows, the baseline and the previous recommendation to
the GPU total the workload should have, split over its containers.

Quantities are GPU units (1.0 = one whole GPU; a KAI `gpu-fraction` of 0.5 is 0.5). Usage
arrives in percent, as Prometheus reports it, and is turned into GPU units by the signal's
`interpretation`. The service that reads Prometheus (recommender/gpu.py) carries the result
out; nothing here does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from app.model.crd import GpuReactivePolicySpec, GpuSignal
from app.model.durations import parse_duration

Signal = Literal["compute", "memory"]
SIGNALS: tuple[Signal, ...] = ("compute", "memory")
Direction = Literal["upsize", "scaleBack"]
#: Comparisons of GPU totals ignore float noise below this (a millionth of a GPU).
EPSILON = 1e-6
#: KAI fractions are written with two decimals, rounded up.
KAI_STEP = 0.01

# Reasons of an evaluation (the status's `gpu.reason`).
UPSIZE = "GpuUpsize"
SCALE_BACK = "GpuScaleBack"
KEPT = "GpuKeptPrevious"
AT_BASELINE = "GpuNoChange"
NO_ELIGIBLE_PODS = "GpuNoEligiblePods"
LOWER_REFUSED = "GpuLowerRefused"
SERIES_MISSING = "GpuSeriesMissing"


@dataclass(frozen=True, slots=True)
class PodGpu:
    """One pod of the workload: when it started and each container's current GPU
    allocation (a container without one is not listed)."""

    name: str
    start_time: datetime | None
    allocation: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Usage:
    """One container's usage over a window, in percent as the metric reports it: the
    lowest and the highest sample."""

    low: float
    high: float


#: (pod, container) -> usage over one window
Samples = Mapping[tuple[str, str], Usage]


@dataclass(frozen=True, slots=True)
class SignalSamples:
    """One signal's usage over its upsize window and over its scale-back window."""

    upsize: Samples
    scale_back: Samples


@dataclass(frozen=True, slots=True)
class Previous:
    """The recommendation in force: its total, the metric that drove it (None when it
    predates that record) and its split."""

    total: float
    driver: Signal | None
    containers: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Candidate:
    """What one signal proposes: a total for the pod it was judged on."""

    signal: Signal
    direction: Direction
    total: float
    pod: str
    #: the usage that drove it, in GPU units, and the pod's allocation
    usage: float
    allocation: float


@dataclass(frozen=True, slots=True)
class GpuEvaluation:
    """The result: `containers` is the recommendation (empty: none), `baseline` what the
    status keeps."""

    reason: str
    message: str
    baseline: Mapping[str, float]
    containers: Mapping[str, float] = field(default_factory=dict)
    total: float | None = None
    driver: Signal | None = None
    direction: Direction | None = None
    candidates: tuple[Candidate, ...] = ()


def eligible_pods(pods: list[PodGpu], min_age: str, now: datetime) -> list[PodGpu]:
    """Pods that started at least `min_age` ago and have a container with a GPU."""
    age = parse_duration(min_age)
    return [
        p
        for p in pods
        if p.start_time is not None
        and now - p.start_time >= age
        and any(v > 0 for v in p.allocation.values())
    ]


def _allocated(pod: PodGpu) -> dict[str, float]:
    return {c: v for c, v in pod.allocation.items() if v > 0}


def in_gpus(signal: GpuSignal, percent: float, allocation: float) -> float:
    """A usage in percent as GPU units: of one whole GPU (fullGPU) or of the container's
    own allocation (currentAllocation)."""
    whole = 1.0 if signal.prometheus.interpretation == "fullGPU" else allocation
    return percent / 100.0 * whole


def _pod_usage(
    signal: GpuSignal, pod: PodGpu, samples: Samples, use_high: bool
) -> tuple[float, bool]:
    """The pod's total usage in GPU units (its containers' lowest or highest samples
    summed) and whether every container had samples."""
    total, complete = 0.0, True
    for container, allocation in _allocated(pod).items():
        usage = samples.get((pod.name, container))
        if usage is None:
            complete = False
            continue
        total += in_gpus(signal, usage.high if use_high else usage.low, allocation)
    return total, complete


def upsize_candidate(
    name: Signal, signal: GpuSignal, pods: list[PodGpu], samples: Samples, baseline: float
) -> Candidate | None:
    """Judged per pod: a pod whose usage stayed above the threshold for the whole window
    (its lowest samples) asks for more; the hottest such pod's peak plus headroom is the
    total, capped at maxPercent of the baseline."""
    up = signal.upsize
    hottest: Candidate | None = None
    for pod in pods:
        allocation = sum(_allocated(pod).values())
        low, _ = _pod_usage(signal, pod, samples, use_high=False)
        if low * 100.0 <= allocation * up.threshold_percent + EPSILON:
            continue
        high, _ = _pod_usage(signal, pod, samples, use_high=True)
        peak = max(high, low)
        if hottest is None or peak > hottest.usage:
            target = min(
                peak * (1 + up.headroom_percent / 100.0), baseline * up.max_percent / 100.0
            )
            hottest = Candidate(name, "upsize", target, pod.name, peak, allocation)
    return hottest


def scale_back_candidate(
    name: Signal, signal: GpuSignal, pods: list[PodGpu], samples: Samples, baseline: float
) -> Candidate | None:
    """Judged across the owner: every pod stayed below threshold × its allocation for the
    whole window (its highest samples), with samples for every container; the hottest
    pod's peak plus headroom is the total, never below the baseline."""
    back = signal.scale_back
    hottest: Candidate | None = None
    for pod in pods:
        allocation = sum(_allocated(pod).values())
        high, complete = _pod_usage(signal, pod, samples, use_high=True)
        if not complete or high * 100.0 >= allocation * back.threshold_percent - EPSILON:
            return None
        if hottest is None or high > hottest.usage:
            hottest = Candidate(name, "scaleBack", 0.0, pod.name, high, allocation)
    if hottest is None:
        return None
    target = max(hottest.usage * (1 + back.headroom_percent / 100.0), baseline)
    return Candidate(name, "scaleBack", target, hottest.pod, hottest.usage, hottest.allocation)


def signal_candidate(
    name: Signal, signal: GpuSignal, pods: list[PodGpu], samples: SignalSamples, baseline: float
) -> Candidate | None:
    """One signal's proposal: an upsize if a pod asks for one, else a scale-back."""
    return upsize_candidate(name, signal, pods, samples.upsize, baseline) or scale_back_candidate(
        name, signal, pods, samples.scale_back, baseline
    )


def choose(
    candidates: Mapping[Signal, Candidate], previous: Previous | None
) -> tuple[Candidate | None, Signal | None, str]:
    """Compute against memory: the higher total wins (a tie keeps the driving metric). A
    total below the one in force is accepted from the metric that drove it, or from the
    other one when the driving metric proposes one too, at or below it; never when the
    recommendation in force names no driver. Returns (the accepted candidate, the driver
    recorded with it, why not when none)."""
    if not candidates:
        return None, None, ""
    top = max(c.total for c in candidates.values())
    tied = [s for s in SIGNALS if s in candidates and candidates[s].total >= top - EPSILON]
    driver = previous.driver if previous and previous.driver in tied else tied[0]
    chosen = candidates[driver]
    if previous is None or chosen.total >= previous.total - EPSILON:
        return chosen, driver, ""
    if previous.driver is None:
        return None, None, "the recommendation in force names no driving metric"
    if driver == previous.driver:
        return chosen, driver, ""
    if previous.driver in candidates:
        # chosen is the highest, so the driving metric's own candidate is at or below it
        return chosen, driver, ""
    return (
        None,
        None,
        f"{driver} proposes less, and {previous.driver}, which drove the recommendation "
        "in force, proposes nothing",
    )


def redistribute(total: float, allocation: Mapping[str, float]) -> dict[str, float]:
    """The total split over the containers in proportion to their current allocations."""
    whole = sum(allocation.values())
    return {c: total * v / whole for c, v in sorted(allocation.items())}


def evaluate(
    spec: GpuReactivePolicySpec,
    pods: list[PodGpu],
    samples: Mapping[Signal, SignalSamples],
    baseline: Mapping[str, float] | None,
    previous: Previous | None,
    now: datetime,
) -> GpuEvaluation:
    """The GPU recommendation of one workload under one policy (docs/gpu.md)."""
    eligible = eligible_pods(pods, spec.min_pod_metrics_age, now)
    if not eligible:
        return GpuEvaluation(
            NO_ELIGIBLE_PODS,
            f"no pod with a GPU has run for minPodMetricsAge ({spec.min_pod_metrics_age})",
            dict(baseline or {}),
        )
    keys = {(p.name, c) for p in eligible for c in _allocated(p)}
    for name in SIGNALS:
        windows = samples.get(name)
        if windows is None or not keys & (set(windows.upsize) | set(windows.scale_back)):
            metric = getattr(spec.metrics, name).prometheus
            return GpuEvaluation(
                SERIES_MISSING,
                f"{name}: no series of {metric.metric} for the workload's GPU containers (by "
                f"labels {metric.namespace_label}, {metric.pod_label}, {metric.container_label})",
                dict(baseline or {}),
            )
    current = _allocated(eligible[0])
    kept = {c: v for c, v in (baseline or {}).items() if c in current}
    base = {c: kept.get(c, v) for c, v in current.items()}
    base_total = sum(base.values())
    candidates: dict[Signal, Candidate] = {}
    for name in SIGNALS:
        found = signal_candidate(
            name, getattr(spec.metrics, name), eligible, samples[name], base_total
        )
        if found is not None:
            candidates[name] = found
    chosen, driver, refused = choose(candidates, previous)
    found_all = tuple(candidates[s] for s in SIGNALS if s in candidates)
    if chosen is not None:
        pod = next(p for p in eligible if p.name == chosen.pod)
        return GpuEvaluation(
            UPSIZE if chosen.direction == "upsize" else SCALE_BACK,
            f"{driver} {chosen.direction}: pod {chosen.pod} uses "
            f"{_gpus(chosen.usage)} of {_gpus(chosen.allocation)}; total {_gpus(chosen.total)}"
            f" (baseline {_gpus(base_total)})",
            base,
            redistribute(chosen.total, _allocated(pod)),
            chosen.total,
            driver,
            chosen.direction,
            found_all,
        )
    differs = any(abs(current[c] - base[c]) > EPSILON for c in current)
    if differs and previous is not None:
        return GpuEvaluation(
            KEPT,
            (refused + "; " if refused else "")
            + f"the recommendation in force ({_gpus(previous.total)}) stays",
            base,
            dict(previous.containers),
            previous.total,
            previous.driver,
            None,
            found_all,
        )
    return GpuEvaluation(
        LOWER_REFUSED if refused else AT_BASELINE,
        refused or "no signal crossed a threshold",
        base,
        candidates=found_all,
    )


def _gpus(value: float) -> str:
    return f"{value:.2f} GPU"


def whole_gpus(value: float, cap: float | None = None) -> int:
    """An nvidia.com/gpu count: rounded up, but not past the cap (maxPercent of the
    baseline) when the cap allows a whole GPU; at least one."""
    count = math.ceil(value - EPSILON)
    if cap is not None and count > cap + EPSILON and math.floor(cap + EPSILON) >= 1:
        count = math.floor(cap + EPSILON)
    return max(count, 1)


def kai_fraction(value: float) -> str:
    """A KAI `gpu-fraction`: rounded up to two decimals, within (0, 1] (a fraction shares
    one GPU; KAI takes no fraction above one)."""
    steps = math.ceil(value / KAI_STEP - EPSILON)
    fraction = min(max(steps, 1), round(1 / KAI_STEP)) * KAI_STEP
    return f"{fraction:.2f}".rstrip("0").rstrip(".")
