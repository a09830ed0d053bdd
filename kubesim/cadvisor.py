"""cAdvisor-style metrics of the simulated containers, from the usage model (kubesim/usage.py).

`GET /metrics/cadvisor` answers in the Prometheus text format, one series per running
container with a usage annotation, labelled `namespace`, `pod` and `container`, on the
simulator's clock:

- `container_cpu_usage_seconds_total`: the CPU it gets (its usage, at most its CPU limit)
  times the time since the container started;
- `container_memory_working_set_bytes`: its memory usage (at most its memory limit);
- `container_cpu_cfs_periods_total` and `container_cpu_cfs_throttled_periods_total`: one
  period per 100 ms while it has a CPU limit, throttled in the share `(usage − limit) / usage`;
- `container_oom_events_total` and kube-state-metrics'
  `kube_pod_container_status_last_terminated_reason`: the OOM kills its status records.

A real Prometheus scraping it sees what a kubelet's cAdvisor would show for that usage
(with the wall clock; a fake clock that jumps makes counters jump the same way).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from fractions import Fraction

from kubesim.clock import parse_rfc3339
from kubesim.quantity import parse
from kubesim.store import Obj
from kubesim.usage import read_usage

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The CFS period the kernel throttles in.
CFS_PERIOD_S = 0.1

_HELP = {
    "container_cpu_usage_seconds_total": ("counter", "Cumulative cpu time consumed in seconds."),
    "container_memory_working_set_bytes": ("gauge", "Current working set in bytes."),
    "container_cpu_cfs_periods_total": ("counter", "Number of elapsed enforcement periods."),
    "container_cpu_cfs_throttled_periods_total": (
        "counter",
        "Number of throttled period intervals.",
    ),
    "container_oom_events_total": ("counter", "Count of out of memory events observed."),
    "kube_pod_container_status_last_terminated_reason": (
        "gauge",
        "Describes the last reason the container was in terminated state.",
    ),
}


def _limit(container: Obj, entry: Obj, resource: str) -> Fraction | None:
    resources = entry.get("resources") or container.get("resources") or {}
    value = (resources.get("limits") or {}).get(resource)
    return parse(value) if value is not None else None


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _container_samples(pod: Obj, now: datetime) -> Iterator[tuple[str, dict[str, str], float]]:
    usage = read_usage(pod)
    if not usage:
        return
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = {
        s.get("name"): s
        for key in ("initContainerStatuses", "containerStatuses")
        for s in status.get(key) or []
    }
    containers = [
        *(c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"),
        *(spec.get("containers") or []),
    ]
    for container in containers:
        name = container.get("name")
        entry = statuses.get(name)
        used = usage.get(name)
        if entry is None or used is None:
            continue
        labels = {
            "namespace": str(meta.get("namespace") or ""),
            "pod": str(meta.get("name")),
            "container": str(name),
        }
        last = (entry.get("lastState") or {}).get("terminated") or {}
        killed = last.get("reason") == "OOMKilled"
        yield "container_oom_events_total", labels, float(entry.get("restartCount") or 0) * killed
        if killed:
            yield (
                "kube_pod_container_status_last_terminated_reason",
                {**labels, "reason": "OOMKilled"},
                1.0,
            )
        started = ((entry.get("state") or {}).get("running") or {}).get("startedAt")
        if not started:
            continue
        elapsed = max(0.0, (now - parse_rfc3339(started)).total_seconds())
        cpu = used.get("cpu", Fraction(0))
        cpu_limit = _limit(container, entry, "cpu")
        granted = min(cpu, cpu_limit) if cpu_limit is not None else cpu
        yield "container_cpu_usage_seconds_total", labels, float(granted) * elapsed
        memory = used.get("memory", Fraction(0))
        memory_limit = _limit(container, entry, "memory")
        if memory_limit is not None:
            memory = min(memory, memory_limit)
        yield "container_memory_working_set_bytes", labels, float(memory)
        if cpu_limit is None:
            continue
        periods = elapsed / CFS_PERIOD_S
        share = float((cpu - cpu_limit) / cpu) if cpu > cpu_limit else 0.0
        yield "container_cpu_cfs_periods_total", labels, periods
        yield "container_cpu_cfs_throttled_periods_total", labels, periods * share


def render(pods: Iterable[Obj], now: datetime) -> str:
    """The text exposition of every running pod's containers at `now`."""
    by_name: dict[str, list[tuple[dict[str, str], float]]] = {name: [] for name in _HELP}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        for name, labels, value in _container_samples(pod, now):
            by_name[name].append((labels, value))
    lines: list[str] = []
    for name, samples in by_name.items():
        kind, text = _HELP[name]
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for labels, value in samples:
            rendered = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            lines.append(f"{name}{{{rendered}}} {value!r}")
    return "\n".join(lines) + "\n"
