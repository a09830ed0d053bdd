"""Usage histories a test writes for Prometheus: what each replica used, and when, as the
cAdvisor and kube-state-metrics series a scrape of it would have stored (OpenMetrics text
for `promtool tsdb create-blocks-from openmetrics`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

Usage = Callable[[float], float]
MI = 1024 * 1024


def constant(value: float) -> Usage:
    """The same usage all the time."""
    return lambda _t: value


def daily_peak(base: float, peak: float, peak_hours: float) -> Usage:
    """`base`, except `peak` for the first `peak_hours` of every day."""
    return lambda t: peak if (t % 86400) < peak_hours * 3600 else base


def spiky(mean: float, seed: int) -> Usage:
    """Usage jumping at random between a tenth and three times `mean` (a fixed draw per
    time, so the history is reproducible)."""

    def usage(t: float) -> float:
        return mean * random.Random(f"{seed}/{int(t)}").choice((0.1, 0.2, 0.5, 1.0, 3.0))

    return usage


@dataclass(frozen=True)
class Replica:
    """One container of one pod, from `start` to `end` (unix seconds)."""

    namespace: str
    pod: str
    container: str
    cpu: Usage
    memory: Usage
    start: float
    end: float
    #: with a CPU limit, cAdvisor reports CFS periods; `throttled` is their throttled share
    cpu_limit: float | None = None
    throttled: float = 0.0
    #: when the container was OOM-killed (kube-state-metrics' last terminated reason)
    oom_killed_at: float | None = None
    #: points that are missing from the history (a scrape outage), as (from, to) ranges
    outages: tuple[tuple[float, float], ...] = field(default=())

    def times(self, step: float) -> list[float]:
        """Every scrape time of the replica outside its outages."""
        out, t = [], self.start
        while t <= self.end:
            if not any(lo <= t < hi for lo, hi in self.outages):
                out.append(t)
            t += step
        return out

    @property
    def labels(self) -> str:
        return f'namespace="{self.namespace}",pod="{self.pod}",container="{self.container}"'


def _family(name: str, kind: str, lines: list[str]) -> list[str]:
    family = name.removesuffix("_total") if kind == "counter" else name
    return [f"# HELP {family} generated", f"# TYPE {family} {kind}", *lines]


def openmetrics(replicas: Iterable[Replica], step: float = 300.0) -> str:
    """The series of every replica at one scrape per `step`, ending in `# EOF`."""
    replicas = list(replicas)
    cpu, memory, periods, throttled, oom = [], [], [], [], []
    for r in replicas:
        used = 0.0
        times = r.times(step)
        for t in times:
            used += r.cpu(t - r.start) * step
            cpu.append(f"container_cpu_usage_seconds_total{{{r.labels}}} {used} {t:.0f}")
            memory.append(
                f"container_memory_working_set_bytes{{{r.labels}}} {r.memory(t - r.start)} {t:.0f}"
            )
            if r.cpu_limit is not None:
                elapsed = (t - r.start + step) / 0.1
                periods.append(f"container_cpu_cfs_periods_total{{{r.labels}}} {elapsed} {t:.0f}")
                throttled.append(
                    f"container_cpu_cfs_throttled_periods_total{{{r.labels}}} "
                    f"{elapsed * r.throttled} {t:.0f}"
                )
            if r.oom_killed_at is not None and t >= r.oom_killed_at:
                oom.append(
                    f'kube_pod_container_status_last_terminated_reason{{{r.labels},reason="OOMKilled"}}'
                    f" 1 {t:.0f}"
                )
    lines = [
        *_family("container_cpu_usage_seconds_total", "counter", cpu),
        *_family("container_memory_working_set_bytes", "gauge", memory),
    ]
    if periods:
        lines += _family("container_cpu_cfs_periods_total", "counter", periods)
        lines += _family("container_cpu_cfs_throttled_periods_total", "counter", throttled)
    if oom:
        lines += _family("kube_pod_container_status_last_terminated_reason", "gauge", oom)
    return "\n".join([*lines, "# EOF"]) + "\n"
