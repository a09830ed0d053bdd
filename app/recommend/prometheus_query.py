"""Prometheus's HTTP API answers as typed series, and the queries kerf's recommender asks.

Pure: no I/O. `parse_matrix` and `parse_vector` read the JSON of `/api/v1/query_range` and
`/api/v1/query`; `Queries` holds the PromQL templates (the defaults read cAdvisor's and
kube-state-metrics' usual series) and renders them for a window.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

#: Prometheus refuses a range query of more points than this per series.
MAX_POINTS_PER_SERIES = 11_000

#: Containers of the pod sandbox ("POD") and the pod-level cgroup (no container label)
#: are not containers of the workload.
_CONTAINERS = 'container!="",container!="POD"{namespaces}'

DEFAULT_CPU = f"rate(container_cpu_usage_seconds_total{{{_CONTAINERS}}}[{{rate}}])"
DEFAULT_MEMORY = f"container_memory_working_set_bytes{{{_CONTAINERS}}}"
DEFAULT_THROTTLED = (
    f"sum by (namespace, pod, container) "
    f"(increase(container_cpu_cfs_throttled_periods_total{{{_CONTAINERS}}}[{{window}}]))"
)
DEFAULT_PERIODS = (
    f"sum by (namespace, pod, container) "
    f"(increase(container_cpu_cfs_periods_total{{{_CONTAINERS}}}[{{window}}]))"
)
DEFAULT_OOM = (
    "max by (namespace, pod, container) (max_over_time("
    'kube_pod_container_status_last_terminated_reason{reason="OOMKilled"{namespaces}}[{window}]))'
    " or max by (namespace, pod, container) "
    f"(increase(container_oom_events_total{{{_CONTAINERS}}}[{{window}}]) > 0)"
)


class AnswerError(ValueError):
    """Prometheus answered, but not with a usable result (an error status, wrong type)."""


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a range query: its labels and its (unix time, value) points."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class Sample:
    """One series of an instant query: its labels and its value."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class Queries:
    """The PromQL the recommender asks; `{window}` and `{rate}` are filled in per run."""

    cpu: str = DEFAULT_CPU
    memory: str = DEFAULT_MEMORY
    throttled: str = DEFAULT_THROTTLED
    periods: str = DEFAULT_PERIODS
    oom: str = DEFAULT_OOM

    def render(
        self,
        template: str,
        *,
        window_s: float,
        rate_s: float,
        namespaces: Collection[str] | None = None,
    ) -> str:
        """`template` with its placeholders replaced: `{window}` and `{rate}` by
        Prometheus durations, `{namespaces}` (inside a selector) by a matcher of
        `namespaces`, or by nothing when every namespace is asked for (None)."""
        return (
            template.replace("{window}", promql_duration(window_s))
            .replace("{rate}", promql_duration(rate_s))
            .replace("{namespaces}", namespace_matcher(namespaces))
        )


def namespace_matcher(namespaces: Collection[str] | None) -> str:
    """`,namespace=~"a|b"` for a selector's end (namespace names are DNS labels: no
    character a regex reads specially); "" for every namespace (None)."""
    if namespaces is None:
        return ""
    return f',namespace=~"{"|".join(sorted(namespaces))}"'


def promql_duration(seconds: float) -> str:
    """A PromQL duration (`300s`) for a whole number of seconds (at least 1)."""
    return f"{max(1, math.ceil(seconds))}s"


def _value(raw: Any) -> float:
    # Prometheus writes every value as a string: "0.25", "NaN", "+Inf".
    if not isinstance(raw, str):
        raise AnswerError(f"value {raw!r} is not a string")
    try:
        return float(raw)
    except ValueError:
        raise AnswerError(f"value {raw!r} is not a number") from None


def _data(body: bytes, expected: str) -> list[Any]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise AnswerError(f"the answer is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise AnswerError("the answer is not a JSON object")
    if document.get("status") != "success":
        raise AnswerError(
            f"{document.get('errorType') or 'error'}: {document.get('error') or 'no message'}"
        )
    data = document.get("data") or {}
    if data.get("resultType") != expected:
        raise AnswerError(f"expected a {expected}, got {data.get('resultType')!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise AnswerError("the answer has no result list")
    return result


def _labels(item: Mapping[str, Any]) -> dict[str, str]:
    metric = item.get("metric") or {}
    return {str(k): str(v) for k, v in metric.items()}


def parse_matrix(body: bytes) -> list[Series]:
    """The series of a `query_range` answer; an error answer raises AnswerError."""
    series: list[Series] = []
    for item in _data(body, "matrix"):
        points = tuple((float(t), _value(v)) for t, v in item.get("values") or ())
        series.append(Series(_labels(item), points))
    return series


def parse_vector(body: bytes) -> list[Sample]:
    """The samples of an instant `query` answer; an error answer raises AnswerError."""
    samples: list[Sample] = []
    for item in _data(body, "vector"):
        _, raw = item.get("value") or (None, None)
        samples.append(Sample(_labels(item), _value(raw)))
    return samples


def container_key(labels: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(namespace, pod, container) of a series, or None when a label is missing."""
    namespace, pod, container = (labels.get(k) for k in ("namespace", "pod", "container"))
    if not namespace or not pod or not container:
        return None
    return (namespace, pod, container)
