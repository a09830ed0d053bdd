"""Pydantic models for every kerf custom resource (SPEC §2).

These models are the single source of truth for validation and for the CRD schemas
(`tools/crdgen.py` generates `manifests/crds/` from them). Attributes are snake_case; the
YAML/JSON form is camelCase through aliases, exactly as users write it.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from app.model.durations import DurationError, in_hours, parse_duration
from app.model.quantities import QuantityError, parse_quantity

API_GROUP = "rightsizing.kubex.ai"
API_VERSION = f"{API_GROUP}/v1alpha1"

DEFAULT_WORKLOAD_TYPES: tuple[WorkloadType, ...] = (
    "Deployment",
    "StatefulSet",
    "CronJob",
    "Rollout",
    "Job",
    "AnalysisRun",
    "DaemonSet",
    "Model",
)
WorkloadType = Literal[
    "Deployment",
    "StatefulSet",
    "CronJob",
    "Rollout",
    "Job",
    "AnalysisRun",
    "DaemonSet",
    "Model",
    "StrimziPodSet",
]
Weekday = Literal["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
Mode = Literal["auto", "audit"]

DEFAULT_PRECEDENCE: tuple[tuple[str, int], ...] = (
    ("RollbackPolicy", 130),
    ("ClusterRollbackPolicy", 130),
    ("GpuReactivePolicy", 120),
    ("ClusterGpuReactivePolicy", 110),
    ("ContainerArgsPolicy", 100),
    ("StaticPolicy", 90),
    ("ClusterStaticPolicy", 90),
    ("ProactivePolicy", 70),
    ("ClusterProactivePolicy", 70),
)


# Non-negative Kubernetes quantities: the resource.Quantity grammar without a sign and
# with an integer exponent, exactly what app.model.quantities parses. The CRD carries the same
# pattern, so the API server and the model accept the same texts.
QUANTITY_PATTERN = r"^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
# Positive quantities (the values a policy sets): the same grammar with a mantissa that has
# a non-zero digit. A pattern, not CEL, so every API server that validates patterns refuses
# a zero: a memory limit of 0 would be lowered step by step to the minimum.
POSITIVE_QUANTITY_PATTERN = (
    r"^\+?([0-9]*[1-9][0-9]*(\.[0-9]*)?|[0-9]*\.[0-9]*[1-9][0-9]*)"
    r"([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
# Policy weights order policies; far beyond any useful order, a weight like 1e30 is a typo.
MAX_WEIGHT = 1_000_000
# Non-negative Go durations (time.ParseDuration without a sign): a negative wait is a typo.
# The micro signs are literal characters: RE2 (the API server's regex engine) has no \u escape.
DURATION_PATTERN = (
    r"^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|" + "\u00b5s|\u03bcs" + r"|ms|s|m|h))+)$"
)
# A decimal from 0 to 1 as a string ("0.7"), as the guardrails seed writes it.
RATIO_PATTERN = r"^(0(\.[0-9]*)?|1(\.0*)?|\.[0-9]+)$"
TIME_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
END_TIME_PATTERN = r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$"
ARG_NAME_PATTERN = r"^--?[^\s=]+$"
INT32_MAX = 2**31 - 1
# Bounds on free-form strings keep the API server's CEL cost estimate small.
MAX_QUANTITY_LENGTH = 64
MAX_DURATION_LENGTH = 64


def _int_to_text(value: Any) -> Any:
    """YAML `cpu: 1` arrives as an int; the CRD allows it (int-or-string), so must we."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


# Statuses are parsed again whenever the reconciler reads a record anew, and their few
# distinct quantities repeat across every workload.
@lru_cache(maxsize=4096)
def _check_quantity(value: str) -> str:
    if len(value) > MAX_QUANTITY_LENGTH or not re.fullmatch(QUANTITY_PATTERN, value):
        raise ValueError(
            f"invalid quantity {value!r}: expected a non-negative quantity such as "
            "250m, 1.5Gi, 129M or 1e3"
        )
    try:
        parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    return value


@lru_cache(maxsize=4096)
def _check_positive_quantity(value: str) -> str:
    _check_quantity(value)
    if not re.fullmatch(POSITIVE_QUANTITY_PATTERN, value) or parse_quantity(value) <= 0:
        raise ValueError(
            f"invalid quantity {value!r}: a request or limit must be more than zero, such "
            "as 250m, 1.5Gi or 2"
        )
    return value


def _check_duration(value: str) -> str:
    if len(value) > MAX_DURATION_LENGTH or not re.fullmatch(DURATION_PATTERN, value):
        hours = in_hours(value)
        instead = f" (write {value} as {hours}: a resource has no day unit)" if hours else ""
        raise ValueError(
            f"invalid duration {value!r}: expected a non-negative Go duration such as "
            f"30s, 10m, 1h30m or 1.5h{instead}"
        )
    try:
        parse_duration(value)
    except DurationError as exc:
        raise ValueError(str(exc)) from None
    return value


#: The fields of type Ratio: decimal strings, as Kubex writes them.
RATIO_FIELDS = frozenset({"minConfidence", "throttlingRatio"})


def quote_ratios(doc: Any, path: str = "") -> list[str]:
    """Ratios written as numbers in a file (`minConfidence: 0.8`) turned into the strings
    the CRDs hold (`"0.8"`), in place; one note each, saying to quote it. Only the files
    `kerf explain` reads can hold one: the API server refuses a number there."""
    notes: list[str] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            where = f"{path}.{key}" if path else str(key)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if key in RATIO_FIELDS and number:
                doc[key] = str(value)
                notes.append(
                    f"{where}: {value} is a number; the API server takes only a string, "
                    f'quote it: {key}: "{doc[key]}"'
                )
            else:
                notes += quote_ratios(value, where)
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            notes += quote_ratios(value, f"{path}[{index}]")
    return notes


def _check_ratio(value: str) -> str:
    if not re.fullmatch(RATIO_PATTERN, value):
        raise ValueError(f'{value!r} must be a decimal between 0 and 1, such as "0.7"')
    return value


# Quantities and durations stay strings in the object (as users wrote them); the
# validators guarantee they parse, and the CRD carries the matching pattern.
Quantity = Annotated[
    str,
    BeforeValidator(_int_to_text),
    AfterValidator(_check_quantity),
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "pattern": QUANTITY_PATTERN,
            "maxLength": MAX_QUANTITY_LENGTH,
        }
    ),
]
PositiveQuantity = Annotated[
    str,
    BeforeValidator(_int_to_text),
    AfterValidator(_check_positive_quantity),
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "pattern": POSITIVE_QUANTITY_PATTERN,
            "maxLength": MAX_QUANTITY_LENGTH,
            # The pattern checks strings only: `memory: 0` arrives as an integer.
            "minimum": 1,
        }
    ),
]
Duration = Annotated[
    str,
    AfterValidator(_check_duration),
    WithJsonSchema(
        {"type": "string", "pattern": DURATION_PATTERN, "maxLength": MAX_DURATION_LENGTH}
    ),
]
Ratio = Annotated[
    str,
    AfterValidator(_check_ratio),
    WithJsonSchema({"type": "string", "pattern": RATIO_PATTERN}),
]


def _cel(*rules: tuple[str, str]) -> dict[str, Any]:
    """CRD `x-kubernetes-validations` for a model: (CEL rule, message) pairs.

    They mirror the model's own validators, so the API server rejects what kerf rejects.
    """
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


def _q(path: str) -> str:
    """CEL for the quantity at `path`; string() because int-or-string fields may hold ints."""
    return f"quantity(string({path}))"


class KerfModel(BaseModel):
    """Base: camelCase aliases, unknown fields rejected (a typo is an error, not a no-op)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )


# --------------------------------------------------------------------------- scope


class LabelSelectorRequirement(KerfModel):
    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                "(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",
                "In and NotIn need at least one value; Exists and DoesNotExist take none",
            )
        )
    )

    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _values_fit_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class LabelSelector(KerfModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class NamespaceSelector(KerfModel):
    operator: Literal["In", "NotIn"]
    values: list[str] = Field(min_length=1)


class Scope(KerfModel):
    label_selector: LabelSelector | None = None
    workload_types: list[WorkloadType] = Field(default_factory=lambda: list(DEFAULT_WORKLOAD_TYPES))
    namespace_selector: NamespaceSelector | None = None
    containers: list[str] | None = None


# --------------------------------------------------------------------------- guardrails


class RollbackGuardrails(KerfModel):
    """Health thresholds after a change; None = inherit from the next layer."""

    watch_duration: Duration | None = None
    oom_kills: int | None = Field(default=None, ge=0)
    restarts: int | None = Field(default=None, ge=0)
    throttling_ratio: Ratio | None = None


class ApplySettings(KerfModel):
    fallback_after: Duration | None = None


class Guardrails(KerfModel):
    """A guardrails block. Every field is optional so the layers (built-in defaults ←
    GlobalConfiguration.guardrailDefaults ← policy) can be merged; the CRD therefore sets
    no defaults here, or the API server would fill them in and hide the lower layers."""

    learning_period: Duration | None = None
    min_confidence: Ratio | None = None
    max_change_percent: int | None = Field(default=None, ge=1, le=100)
    min_cpu: Quantity | None = Field(default=None, alias="minCPU")
    min_memory: Quantity | None = None
    cooldown: Duration | None = None
    rollback: RollbackGuardrails | None = None
    allow_single_replica_disruption: bool | None = None
    apply: ApplySettings | None = None


# --------------------------------------------------------------------------- strategy


_FLOOR_BELOW_CEILING = (
    f"!has(self.floor) || !has(self.ceiling) || "
    f"{_q('self.floor')}.compareTo({_q('self.ceiling')}) <= 0",
    "floor must not be above ceiling",
)
# Per-container bounds override the resource's field by field, so a container that sets
# only one bound is checked against the other bound it inherits.
_CONTAINER_FLOOR_BELOW_INHERITED_CEILING = (
    "!has(self.ceiling) || !has(self.containers) || self.containers.all(c, "
    "!has(self.containers[c].floor) || has(self.containers[c].ceiling) || "
    f"{_q('self.containers[c].floor')}.compareTo({_q('self.ceiling')}) <= 0)",
    "a container's floor must not be above the ceiling it inherits",
)
_INHERITED_FLOOR_BELOW_CONTAINER_CEILING = (
    "!has(self.floor) || !has(self.containers) || self.containers.all(c, "
    "!has(self.containers[c].ceiling) || has(self.containers[c].floor) || "
    f"{_q('self.floor')}.compareTo({_q('self.containers[c].ceiling')}) <= 0)",
    "a container's ceiling must not be below the floor it inherits",
)
# Enough for any real pod; a bound keeps the CEL cost of iterating the map small.
MAX_CONTAINER_OVERRIDES = 64


def _check_bounds(floor: str | None, ceiling: str | None, what: str) -> None:
    if (
        floor is not None
        and ceiling is not None
        and parse_quantity(floor) > parse_quantity(ceiling)
    ):
        raise ValueError(f"{what}floor {floor} is above ceiling {ceiling}")


class ContainerBounds(KerfModel):
    model_config = ConfigDict(json_schema_extra=_cel(_FLOOR_BELOW_CEILING))

    floor: Quantity | None = None
    ceiling: Quantity | None = None

    @model_validator(mode="after")
    def _floor_below_ceiling(self) -> ContainerBounds:
        _check_bounds(self.floor, self.ceiling, "")
        return self


class FieldEnablement(ContainerBounds):
    """Switches for one resource field; requests and memory limits default to all on.

    `containers.<name>.{floor,ceiling}` override the field's bounds one by one; the
    effective pair of every container must still have floor <= ceiling.
    """

    model_config = ConfigDict(
        json_schema_extra=_cel(
            _FLOOR_BELOW_CEILING,
            _CONTAINER_FLOOR_BELOW_INHERITED_CEILING,
            _INHERITED_FLOOR_BELOW_CONTAINER_CEILING,
        )
    )

    upsize: bool = True
    downsize: bool = True
    set_from_unspecified: bool = True
    containers: dict[str, ContainerBounds] = Field(
        default_factory=dict, max_length=MAX_CONTAINER_OVERRIDES
    )

    @model_validator(mode="after")
    def _container_bounds_with_inherited(self) -> FieldEnablement:
        for name, bounds in sorted(self.containers.items()):
            floor = bounds.floor if bounds.floor is not None else self.floor
            ceiling = bounds.ceiling if bounds.ceiling is not None else self.ceiling
            _check_bounds(floor, ceiling, f"container {name}: effective ")
        return self


class CpuLimitsEnablement(FieldEnablement):
    """CPU limits are not invented for a container without one (throttling risk)."""

    set_from_unspecified: bool = False


class GpuFieldEnablement(FieldEnablement):
    """GPU changes are opt-in: every switch defaults to off."""

    upsize: bool = False
    downsize: bool = False
    set_from_unspecified: bool = False


class CpuEnablement(KerfModel):
    requests: FieldEnablement = Field(default_factory=FieldEnablement)
    limits: CpuLimitsEnablement = Field(default_factory=CpuLimitsEnablement)


class MemoryEnablement(KerfModel):
    requests: FieldEnablement = Field(default_factory=FieldEnablement)
    limits: FieldEnablement = Field(default_factory=FieldEnablement)


class GpuEnablement(KerfModel):
    requests: GpuFieldEnablement = Field(default_factory=GpuFieldEnablement)
    limits: GpuFieldEnablement = Field(default_factory=GpuFieldEnablement)


class Enablement(KerfModel):
    cpu: CpuEnablement = Field(default_factory=CpuEnablement)
    memory: MemoryEnablement = Field(default_factory=MemoryEnablement)
    gpu: GpuEnablement = Field(default_factory=GpuEnablement)
    #: Kubex's KAI conversion switch: accepted, named when set (app/model/strategy_fields.py)
    override_scheduler: Literal["none", "kai"] = "none"


class InPlaceResize(KerfModel):
    enabled: bool = True
    container_restart: bool = False


class PodEviction(KerfModel):
    enabled: bool = True
    #: an eviction a PodDisruptionBudget refuses (429) is tried again later
    retry_pod_disruption_budget: bool = True


class Window(KerfModel):
    """A weekly time window; start > end crosses midnight, `24:00` is allowed as end only."""

    model_config = ConfigDict(
        json_schema_extra=_cel(("self.start != self.end", "start and end must differ"))
    )

    name: str = Field(min_length=1)
    timezone: str = "UTC"
    weekdays: list[Weekday] = Field(default_factory=list)
    start: str = Field(pattern=TIME_PATTERN, max_length=5)
    end: str = Field(pattern=END_TIME_PATTERN, max_length=5)

    @model_validator(mode="after")
    def _start_differs_from_end(self) -> Window:
        if self.start == self.end:
            raise ValueError(f"window {self.name!r}: start and end are both {self.start}")
        return self


class Scheduling(KerfModel):
    inclusion_windows: list[Window] = Field(default_factory=list)
    exclusion_windows: list[Window] = Field(default_factory=list)


# A CPU headroom: a percent of the node's allocatable ("10%") or an amount ("500m").
HEADROOM_PATTERN = r"^([0-9]{1,2}|100)%$|" + QUANTITY_PATTERN[1:-1].join("^$")


def _check_headroom(value: str) -> str:
    if not re.fullmatch(HEADROOM_PATTERN, value):
        raise ValueError(f"invalid headroom {value!r}: a percent such as 10% or a quantity")
    return value


Headroom = Annotated[
    str,
    BeforeValidator(_int_to_text),
    AfterValidator(_check_headroom),
    WithJsonSchema(
        {"x-kubernetes-int-or-string": True, "pattern": HEADROOM_PATTERN, "maxLength": 64}
    ),
]


class GpuKaiContract(KerfModel):
    gpu_kai_contract: Literal["none", "v1alpha1-2026-07"]


class KaiVllm(KerfModel):
    gpu_memory_utilization_buffer_percent: int | None = Field(default=None, ge=0, le=100)


class KaiSettings(KerfModel):
    """How a KAI-scheduled workload's GPU share is written (docs/gpu.md)."""

    #: the kai.scheduler/queue label a pod gets with a new gpu-fraction when
    #: `setQueueWhenSpecified` is true (app/policy/kai.py)
    queue: str = "kubex-unlimited-gpu-queue"
    #: whether a new gpu-fraction also sets the queue label, over an existing one; false:
    #: the pod's own label (or its absence) stays
    set_queue_when_specified: bool = False
    vllm: KaiVllm | None = None


class StrategySafetyChecks(KerfModel):
    """Kubex's safety checks of a strategy, with Kubex's defaults but one
    (`retainGuaranteedQOS`: kerf keeps Guaranteed QoS unless told not to, SPEC §2).
    docs/reference.md says which kerf carries out and how."""

    enable_pause_until_annotation_check: bool = True
    enable_resource_quota_filter: bool = True
    enable_hpa_filter: bool = True
    enable_vpa_filter: bool = True
    block_resize_on_vpa_controlled_resources: bool = False
    enable_limit_range_filter: bool = True
    enable_pod_limit_range_filter: bool = True
    retain_guaranteed_qos: bool = Field(default=True, alias="retainGuaranteedQOS")
    min_cpu_change_percent: int = Field(default=5, ge=0, le=100)
    min_memory_change_percent: int = Field(default=5, ge=0, le=100)
    min_ready_duration: Duration = "10s"
    require_owner_pods_ready: bool = False
    respect_workload_max_unavailable: bool = True
    resize_retry_interval: Duration = "30s"
    require_node_allocatable: bool = True
    node_cpu_headroom: Headroom = "10%"
    node_memory_headroom: Quantity = "200Mi"


class AutomationStrategySpec(KerfModel):
    enablement: Enablement = Field(default_factory=Enablement)
    in_place_resize: InPlaceResize = Field(default_factory=InPlaceResize)
    pod_eviction: PodEviction = Field(default_factory=PodEviction)
    #: a container whose CPU and memory requests equal its limits keeps them equal: a
    #: change of one sets both, so a Guaranteed pod never becomes Burstable
    retain_guaranteed_qos: bool = Field(default=True, alias="retainGuaranteedQoS")
    scheduling: Scheduling = Field(default_factory=Scheduling)
    safety_checks: StrategySafetyChecks = Field(default_factory=StrategySafetyChecks)
    experimental: GpuKaiContract | None = None
    kai: KaiSettings = Field(default_factory=KaiSettings)


# --------------------------------------------------------------------------- policies


class ObjectRef(KerfModel):
    name: str = Field(min_length=1)


class ResourceValues(KerfModel):
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)


class ClaimRef(KerfModel):
    """A container's dynamic resource claim, as a pod spec names it."""

    name: str = Field(min_length=1)
    request: str | None = None


class PolicyValues(KerfModel):
    """The values a policy sets: each more than zero (a pod's own values, recorded in a
    status, may be zero)."""

    requests: dict[str, PositiveQuantity] = Field(default_factory=dict)
    limits: dict[str, PositiveQuantity] = Field(default_factory=dict)
    #: Kubex's field; accepted, not set on pods (app/model/strategy_fields.py tells it)
    claims: list[ClaimRef] = Field(default_factory=list)


class StaticResources(KerfModel):
    containers: dict[str, PolicyValues] = Field(min_length=1)


class SafetyChecks(KerfModel):
    max_analysis_age_days: int = Field(default=5, ge=1)


class StaticPolicySpec(KerfModel):
    automation_strategy_ref: ObjectRef
    resources: StaticResources
    scope: Scope = Field(default_factory=Scope)
    weight: int = Field(default=0, ge=0, le=MAX_WEIGHT)
    mode: Mode = "auto"
    guardrails: Guardrails = Field(default_factory=Guardrails)


class RecommenderSettings(KerfModel):
    """How `kerf recommend` sizes the workloads a proactive policy covers; a field left out
    takes the recommender's flag. No defaults in the CRD, or the API server would fill
    them in and hide the flags."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                "!has(self.learningPeriod) || duration(self.learningPeriod) > duration('0s')",
                "learningPeriod must be positive",
            )
        )
    )

    #: CPU request: this percentile of the usage rate (95: the p95)
    cpu_percentile: float | None = Field(default=None, ge=1, le=100)
    #: memory request: the maximum working set plus this many percent
    memory_headroom_percent: float | None = Field(default=None, ge=0, le=100)
    #: an OOM-killed container gets at least this factor × the limit it was killed at
    oom_bump_factor: float | None = Field(default=None, ge=1, le=10)
    #: ratio: limits keep the template's limit/request ratio; keep: no limits written
    limits: Literal["ratio", "keep"] | None = None
    #: coverage at which the confidence stops rising
    learning_period: Duration | None = None

    @model_validator(mode="after")
    def _positive_learning_period(self) -> RecommenderSettings:
        if self.learning_period is not None and parse_duration(self.learning_period) <= timedelta(
            0
        ):
            raise ValueError(f"learningPeriod {self.learning_period} must be positive")
        return self


class ProactivePolicySpec(KerfModel):
    automation_strategy_ref: ObjectRef
    safety_checks: SafetyChecks = Field(default_factory=SafetyChecks)
    scope: Scope = Field(default_factory=Scope)
    weight: int = Field(default=0, ge=0, le=MAX_WEIGHT)
    mode: Mode = "auto"
    guardrails: Guardrails = Field(default_factory=Guardrails)
    recommender: RecommenderSettings | None = None


_WINDOW_AT_LEAST_A_MINUTE = (
    "!has(self.metricsWindow) || duration(self.metricsWindow) >= duration('1m')",
    "metricsWindow must be at least 1m",
)
# A Prometheus metric name and label names, as Prometheus spells them.
METRIC_NAME_PATTERN = r"^[A-Za-z_:][A-Za-z0-9_:]*$"
LABEL_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _check_window(value: str) -> str:
    if parse_duration(value) < timedelta(minutes=1):
        raise ValueError(f"metricsWindow {value} is under 1m")
    return value


class GpuUpsize(KerfModel):
    """When one pod's GPU usage asks for more (Kubex's `upsize`, with Kubex's defaults)."""

    model_config = ConfigDict(json_schema_extra=_cel(_WINDOW_AT_LEAST_A_MINUTE))

    #: a pod's usage, in percent of its allocation, above which the metric asks for more
    threshold_percent: int = Field(default=120, ge=1, le=INT32_MAX)
    metrics_window: Duration = "10m"
    #: percent added on top of the usage in the target
    headroom_percent: int = Field(default=20, ge=0, le=INT32_MAX)
    #: the cap, in percent of the baseline allocation
    max_percent: int = Field(default=200, ge=1, le=INT32_MAX)

    @field_validator("metrics_window")
    @classmethod
    def _window(cls, value: str) -> str:
        return _check_window(value)


class GpuScaleBack(KerfModel):
    """When every pod's GPU usage allows less (Kubex's `scaleBack`, with Kubex's defaults)."""

    model_config = ConfigDict(json_schema_extra=_cel(_WINDOW_AT_LEAST_A_MINUTE))

    threshold_percent: int = Field(default=80, ge=1, le=INT32_MAX)
    metrics_window: Duration = "10m"
    headroom_percent: int = Field(default=20, ge=0, le=INT32_MAX)

    @field_validator("metrics_window")
    @classmethod
    def _window(cls, value: str) -> str:
        return _check_window(value)


class GpuPrometheusMetric(KerfModel):
    """The Prometheus series of one GPU signal and the labels that name its container."""

    metric: str = Field(min_length=1, max_length=256, pattern=METRIC_NAME_PATTERN)
    #: fullGPU: percent of one whole GPU; currentAllocation: percent of the container's
    #: current GPU allocation
    interpretation: Literal["fullGPU", "currentAllocation"] = "fullGPU"
    namespace_label: str = Field(min_length=1, max_length=128, pattern=LABEL_NAME_PATTERN)
    pod_label: str = Field(min_length=1, max_length=128, pattern=LABEL_NAME_PATTERN)
    container_label: str = Field(min_length=1, max_length=128, pattern=LABEL_NAME_PATTERN)


class GpuSignal(KerfModel):
    upsize: GpuUpsize = Field(default_factory=GpuUpsize)
    scale_back: GpuScaleBack = Field(default_factory=GpuScaleBack)
    prometheus: GpuPrometheusMetric


class GpuMetrics(KerfModel):
    """Both signals are required: the higher of their targets wins."""

    compute: GpuSignal
    memory: GpuSignal


class GpuReactivePolicySpec(KerfModel):
    """Kubex's published GpuReactivePolicy format (docs/gpu.md gives the rules)."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                "!has(self.minPodMetricsAge) || "
                "duration(self.minPodMetricsAge) == duration('0s') || "
                "duration(self.minPodMetricsAge) >= duration('1m')",
                "minPodMetricsAge must be zero or at least 1m",
            )
        )
    )

    automation_strategy_ref: ObjectRef
    metrics: GpuMetrics
    #: a pod's metrics count once it is this old
    min_pod_metrics_age: Duration = "15m"
    experimental: GpuKaiContract | None = None
    scope: Scope = Field(default_factory=Scope)
    weight: int = Field(default=0, ge=0, le=MAX_WEIGHT)
    mode: Mode = "auto"

    @field_validator("min_pod_metrics_age")
    @classmethod
    def _zero_or_a_minute(cls, value: str) -> str:
        age = parse_duration(value)
        if timedelta(0) < age < timedelta(minutes=1):
            raise ValueError(f"minPodMetricsAge {value} must be zero or at least 1m")
        return value


class ArgOperation(KerfModel):
    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                "!has(self.operation) || self.operation != 'Remove' || !has(self.value)",
                "Remove takes no value",
            )
        )
    )

    name: str = Field(pattern=ARG_NAME_PATTERN)
    operation: Literal["AddOrUpdate", "Remove"] = "AddOrUpdate"
    value: str | None = None

    @model_validator(mode="after")
    def _remove_has_no_value(self) -> ArgOperation:
        if self.operation == "Remove" and self.value is not None:
            raise ValueError(f"argument {self.name}: Remove takes no value")
        return self


class ContainerArgs(KerfModel):
    args: list[ArgOperation] = Field(min_length=1)


class ContainerArgsPolicySpec(KerfModel):
    containers: dict[str, ContainerArgs] = Field(min_length=1)
    scope: Scope
    weight: int = Field(default=0, ge=0, le=MAX_WEIGHT)
    replace_existing_pods: bool = False


class Backoff(KerfModel):
    time_period: Duration
    multiply_by_turn: int = Field(ge=1)
    max_attempts: int = Field(ge=1)


class RollbackPolicySpec(KerfModel):
    scope: Scope = Field(default_factory=Scope)
    monitoring_period: Duration
    rollback_target: Literal["manifest", "lastSuccessful"]
    adoption_threshold_percent: int = Field(ge=1, le=100)
    backoff: Backoff
    weight: int = Field(default=0, ge=0, le=MAX_WEIGHT)
    enable_monitoring_reopen: bool = True


class Precedence(KerfModel):
    type: str = Field(min_length=1)
    priority: int = Field(ge=0)


class PolicyEvaluationSpec(KerfModel):
    # A list-map keyed by type: the API server itself rejects a type listed twice.
    precedence: list[Precedence] = Field(
        default_factory=lambda: [Precedence(type=t, priority=p) for t, p in DEFAULT_PRECEDENCE],
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )

    @model_validator(mode="after")
    def _types_unique(self) -> PolicyEvaluationSpec:
        seen: set[str] = set()
        for entry in self.precedence:
            if entry.type in seen:
                raise ValueError(f"precedence lists type {entry.type} twice")
            seen.add(entry.type)
        return self


class Opaque(BaseModel):
    """A Kubernetes object kerf passes on unread (a security context): kept whole."""

    model_config = ConfigDict(extra="allow", frozen=True)


class WebhookHealth(KerfModel):
    """Kubex's webhook probe thresholds; kerf judges its webhook by its Lease
    (`webhookLeaseMaxAge`), and these tune how many probes flip the condition."""

    failure_threshold: int = Field(default=2, ge=1)
    success_threshold: int = Field(default=3, ge=1)
    transition_check_interval: Duration = "10s"


class WebhookProbe(KerfModel):
    """Kubex's dry-run probe Pod settings (accepted; kerf probes through its Lease)."""

    image: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    resources: ResourceValues = Field(default_factory=ResourceValues)
    pod_security_context: Opaque = Field(default_factory=Opaque)
    security_context: Opaque = Field(default_factory=Opaque)


class GlobalPrometheus(KerfModel):
    """Where GpuReactivePolicies read their series."""

    #: unset: the recommender's --prometheus URL
    url: str | None = Field(default=None, max_length=2048, pattern=r"^https?://")
    request_timeout: Duration = "30s"


class GlobalConfigurationSpec(KerfModel):
    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                "!has(self.recommendationReloadInterval) || "
                "duration(self.recommendationReloadInterval) >= duration('1m')",
                "recommendationReloadInterval must be at least 1m",
            ),
            (
                "!has(self.proposalSyncInterval) || "
                "duration(self.proposalSyncInterval) >= duration('1m')",
                "proposalSyncInterval must be at least 1m",
            ),
            (
                "!has(self.webhookOwnerResolutionRetryTimeout) || "
                "duration(self.webhookOwnerResolutionRetryTimeout) > duration('0s')",
                "webhookOwnerResolutionRetryTimeout must be more than 0s",
            ),
            (
                "!has(self.gpuReactiveCheckInterval) || "
                "duration(self.gpuReactiveCheckInterval) >= duration('1m')",
                "gpuReactiveCheckInterval must be at least 1m",
            ),
        )
    )

    automation_enabled: bool = True
    multi_policy_container_rightsizing_enabled: bool = False
    protected_namespace_patterns: list[str] = Field(
        default_factory=lambda: ["kube-*", "openshift-*", "gmp-*"]
    )
    tolerance_percent: int = Field(default=5, ge=0, le=100)
    guardrail_defaults: Guardrails = Field(default_factory=Guardrails)
    recommendation_reload_interval: Duration = "1h"
    webhook_lease_max_age: Duration = "60s"
    # Kubex's fields, with its defaults; docs/reference.md says what kerf does with each.
    rescan_interval: Duration = "6h"
    mutation_log_interval: Duration = "5m"
    snapshot_interval: Duration = "30m"
    heartbeat_interval: Duration = "5m"
    kubex_api_request_timeout: Duration = Field(default="30s", alias="kubexAPIRequestTimeout")
    suppress_fetch_recommendations: bool = False
    respect_kubex_automation: bool = True
    webhook_health: WebhookHealth = Field(default_factory=WebhookHealth)
    webhook_probe: WebhookProbe = Field(default_factory=WebhookProbe)
    # Kubex's proposal sync and its webhook's owner look-up retries: kerf keeps proposals in
    # RightsizingRecommendation status and finds owners in its view, so these change nothing.
    proposal_sync_enabled: bool = False
    proposal_sync_interval: Duration = "5m"
    webhook_owner_resolution_retry_timeout: Duration = "1s"
    prometheus: GlobalPrometheus = Field(default_factory=GlobalPrometheus)
    #: how often the recommender evaluates the GpuReactivePolicies
    gpu_reactive_check_interval: Duration = "1m"

    @field_validator(
        "recommendation_reload_interval", "proposal_sync_interval", "gpu_reactive_check_interval"
    )
    @classmethod
    def _at_least_a_minute(cls, value: str, info: ValidationInfo) -> str:
        if parse_duration(value) < timedelta(minutes=1):
            raise ValueError(f"{to_camel(info.field_name or '')} {value} is under 1m")
        return value

    @field_validator("webhook_owner_resolution_retry_timeout")
    @classmethod
    def _more_than_zero(cls, value: str) -> str:
        if parse_duration(value) <= timedelta(0):
            raise ValueError(f"webhookOwnerResolutionRetryTimeout {value} is not more than 0s")
        return value


class TargetRef(KerfModel):
    api_version: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)


class RightsizingRecommendationSpec(KerfModel):
    target_ref: TargetRef


# ------------------------------------------------- Kubex kinds kerf stores and does not act on
# Kubex's schemas (kubex-crds 1.11.0), so a migrated user's objects apply unchanged; the
# reconciler tells each object once that kerf does not act on it (reconciler/storedkinds.py).


class CompactionScope(KerfModel):
    """Kubex's compaction scope: no `containers` (compaction moves whole pods)."""

    label_selector: LabelSelector | None = None
    namespace_selector: NamespaceSelector
    workload_types: list[WorkloadType] = Field(default_factory=lambda: list(DEFAULT_WORKLOAD_TYPES))


class UtilizationThresholds(KerfModel):
    cpu: int = Field(default=25, ge=0, le=100)
    memory: int = Field(default=25, ge=0, le=100)
    pods: int = Field(default=100, ge=0, le=100)


class HighNodeUtilization(KerfModel):
    number_of_nodes: int = Field(default=0, ge=0, le=INT32_MAX)
    thresholds: UtilizationThresholds | None = None


class DefaultEvictor(KerfModel):
    evict_daemon_set_pods: bool = False
    evict_local_storage_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = True
    node_fit: bool = True
    label_selector: LabelSelector | None = None


class Descheduler(KerfModel):
    enabled: bool = True
    #: a cron schedule ("*/30 * * * *"); empty is Kubex's default
    interval: str | None = None
    max_no_of_pods_to_evict_per_node: int = Field(default=1, ge=0, le=INT32_MAX)
    max_no_of_pods_to_evict_per_namespace: int = Field(default=1, ge=0, le=INT32_MAX)
    max_no_of_pods_to_evict_total: int = Field(default=1, ge=0, le=INT32_MAX)
    loop_detection_threshold: int | None = Field(default=None, ge=0, le=INT32_MAX)
    loop_detection_window: Duration | None = None
    suppression_duration: Duration | None = None
    node_selector: LabelSelector | None = None
    high_node_utilization: HighNodeUtilization | None = None
    default_evictor: DefaultEvictor | None = None


class CompactionScheduler(KerfModel):
    use_kubex_scheduler: bool = True
    external_scheduler_name: str | None = None


class ClusterCompactionPolicySpec(KerfModel):
    scope: CompactionScope
    enabled: bool = True
    set_labels_by_eviction: bool = False
    weight: int = Field(default=0, ge=0, le=INT32_MAX)
    scheduler: CompactionScheduler | None = None
    descheduler: Descheduler | None = None


Patch = Annotated[
    dict[str, Any],
    Field(min_length=1),
    WithJsonSchema(
        {"type": "object", "minProperties": 1, "x-kubernetes-preserve-unknown-fields": True}
    ),
]


class ObjectPatchSpec(KerfModel):
    target_ref: TargetRef
    #: a merge patch for the target, kept as written
    patch: Patch
    retry_amount: int = Field(default=3, ge=0, le=INT32_MAX)


class GpuConsolidationPolicySpec(KerfModel):
    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                "!has(self.requeueAfter) || duration(self.requeueAfter) >= duration('1s')",
                "requeueAfter must be at least 1s",
            )
        )
    )

    experimental: GpuKaiContract
    node_selector: LabelSelector
    utilization_threshold_percent: int = Field(default=75, ge=1, le=100)
    requeue_after: Duration = "1m"

    @field_validator("requeue_after")
    @classmethod
    def _at_least_a_second(cls, value: str) -> str:
        if parse_duration(value) < timedelta(seconds=1):
            raise ValueError(f"requeueAfter {value} is under 1s")
        return value


# --------------------------------------------------------------------------- status


# Conditions are a list-map keyed by type, as in every Kubernetes API (server-side apply
# merges them per type).
_CONDITIONS_LIST: dict[str, Any] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
}


class Condition(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None
    observed_generation: int | None = None


class LastApplied(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    at: datetime
    method: Literal["admission", "inPlace", "evict"] | None = None
    containers: dict[str, ResourceValues] = Field(default_factory=dict)
    #: the approved audit proposal this change carries out (None outside audit mode)
    proposal: str | None = None
    #: the recommendation fingerprint these values came from (rollback monitoring)
    fingerprint: str | None = None
    #: each live pod's restart count per container when the change was sent (pod uid →
    #: container → count): rollback monitoring counts the failures beyond it
    baseline: dict[str, dict[str, int]] | None = None


class LastRollback(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    at: datetime
    resources: list[str] = Field(default_factory=list)
    reason: str | None = None


class Proposal(BaseModel):
    """A change waiting for approval (audit mode); `id` is what the approve annotation names."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    id: str
    #: what an approval applies now: the step the guardrails allow (maxChangePercent, …)
    containers: dict[str, ResourceValues] = Field(default_factory=dict)
    #: what the policies ask in the end; later steps are proposed again, one at a time
    target: dict[str, ResourceValues] = Field(default_factory=dict)
    #: what the `approve-target` annotation names to approve every step toward `target`
    target_id: str | None = None
    #: the steps left to `target`, this one included
    steps: int | None = None
    #: the earliest time of this step: a cooldown after the last change (absent: no change yet)
    next_at: datetime | None = None
    #: the least time between two steps
    cooldown: str | None = None


class RecordSummary(BaseModel):
    """What `kubectl get rightsizingrecommendations` shows: requests and limits summed over
    the containers, `current→target` (one value when it stays), and a reason true for
    the phase."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    cpu: str | None = None
    memory: str | None = None
    cpu_limit: str | None = None
    memory_limit: str | None = None
    reason: str | None = None
    #: the winning policies, `Kind/name`
    policy: str | None = None


class SelectedPolicy(BaseModel):
    """The winning policy of one target (SPEC §7 `selected[]`)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    container: str
    field: str
    resource: str
    value: str
    policy_kind: str
    policy_namespace: str = ""
    policy_name: str
    annotation_key: str


class LastEvent(BaseModel):
    """The last Blocked/Skipped event recorded for the workload: the dedup key, kept in
    status so a restarted reconciler does not record it again."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    reason: str
    values: str = ""


class PendingEvent(BaseModel):
    """An Event of a change that the status records and that may not be told yet: written
    with the status, created under its own name (a second create is refused, so it is told
    once), then cleared. A reconciler that finds one tells it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    #: the Event's metadata.name
    name: str
    reason: str
    note: str
    type: Literal["Normal", "Warning"] = "Normal"
    action: str
    #: the Event's eventTime (MicroTime): when the change was made, not when it is told
    event_time: str


class PendingEviction(BaseModel):
    """An eviction about to be asked for, recorded before it is: whoever finds it tells its
    Events if the pod went (the eviction happened) and drops it if the pod is still there
    unchanged (it did not)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    pod_uid: str
    pod_name: str
    #: the values the eviction applies (its replacement is admitted with them); empty for
    #: one that applies no plan of its own (a fallback, an unschedulable pod's replacement)
    containers: dict[str, ResourceValues] = Field(default_factory=dict)
    proposal: str | None = None
    fingerprint: str | None = None
    #: the Events the eviction makes, named already (so they are told once, whoever tells)
    events: list[PendingEvent] = Field(default_factory=list)


class FilteredValue(BaseModel):
    """A value the last decision dropped because it would take the pods past a bound of
    their namespace (a LimitRange, a ResourceQuota), and the bound."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    container: str
    field: str
    resource: str
    #: LimitRangeViolation or ResourceQuotaExceeded
    reason: str
    message: str


class GpuCandidateStatus(BaseModel):
    """What one GPU signal proposed in the last evaluation."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    signal: str
    direction: str
    #: GPU units, as a decimal ("2.4")
    total: str
    pod: str


class GpuStatus(BaseModel):
    """The last GpuReactivePolicy evaluation of the workload (written by the recommender):
    the baseline it keeps per container, and the recommendation with its driving metric."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    #: `Kind namespace/name` of the policy evaluated
    policy: str
    reason: str
    message: str = ""
    evaluated_at: datetime | None = None
    #: each container's GPU allocation before the first upsize (GPU units)
    baseline: dict[str, str] = Field(default_factory=dict)
    #: the recommendation in force: GPU units per container, their total and its driver
    containers: dict[str, str] = Field(default_factory=dict)
    total: str | None = None
    driving_metric: str | None = None
    direction: str | None = None
    #: what the recommendation sets: nvidia.com/gpu per container, or a KAI gpu-fraction
    values: dict[str, str] = Field(default_factory=dict)
    candidates: list[GpuCandidateStatus] = Field(default_factory=list)


class RecommendationStatus(BaseModel):
    """Status written by the reconciler; lenient (extra allowed) so older writers load."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    phase: (
        Literal[
            "Pending",
            "Proposed",
            "Applied",
            "Blocked",
            "Skipped",
            "RollingBack",
            "RolledBack",
            "Failed",
        ]
        | None
    ) = None
    conditions: list[Condition] = Field(default_factory=list, json_schema_extra=_CONDITIONS_LIST)
    observed_generation: int | None = None
    proposal: Proposal | None = None
    last_applied: LastApplied | None = None
    last_rollback: LastRollback | None = None
    next_allowed_at: datetime | None = None
    #: `Kind/name` of the workload, and the reason of the last decision
    workload: str | None = None
    reason: str | None = None
    #: the printer columns' values
    summary: RecordSummary | None = None
    #: every container's resources as its running pods have them
    current: dict[str, ResourceValues] = Field(default_factory=dict)
    selected: list[SelectedPolicy] = Field(default_factory=list)
    #: values the last decision dropped for a LimitRange or ResourceQuota
    filtered: list[FilteredValue] = Field(default_factory=list)
    #: the proposal id an approval was used for (each approval applies once)
    approved_proposal: str | None = None
    last_event: LastEvent | None = None
    #: Events an earlier kerf recorded with this status before creating them (kerf now
    #: creates them first): told by the next pass, and dropped by its status write
    pending_events: list[PendingEvent] = Field(default_factory=list)
    #: an eviction recorded before it was asked for, until the status after it is written
    pending_eviction: PendingEviction | None = None
    #: the last GpuReactivePolicy evaluation (docs/gpu.md)
    gpu: GpuStatus | None = None


class Status(BaseModel):
    """Generic status of the policy kinds: conditions and observedGeneration."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    conditions: list[Condition] = Field(default_factory=list, json_schema_extra=_CONDITIONS_LIST)
    observed_generation: int | None = None


# --------------------------------------------------------------------------- objects


class OwnerReference(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    api_version: str
    kind: str
    name: str
    uid: str | None = None
    controller: bool | None = None


class ObjectMeta(BaseModel):
    """The metadata kerf reads; other fields are kept but not interpreted."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True
    )

    name: str = Field(min_length=1)
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    creation_timestamp: datetime | None = None
    generation: int = 1
    resource_version: str | None = None
    owner_references: list[OwnerReference] = Field(default_factory=list)


def scope_problem(cls: type[KerfResource], metadata: ObjectMeta, spec: Any) -> str | None:
    """What is wrong with an object of `cls` whose metadata and spec these are, for its
    kind's scope (namespaced, cluster-wide, a singleton), or None."""
    if cls.cluster_scoped and metadata.namespace:
        return "metadata.namespace: must be empty, the kind is cluster-scoped"
    if not cls.cluster_scoped and not metadata.namespace:
        return "metadata.namespace: required, the kind is namespaced"
    if cls.singleton_name and metadata.name != cls.singleton_name:
        return f"metadata.name: must be {cls.singleton_name!r}, the kind is a cluster singleton"
    scope = getattr(spec, "scope", None)
    if cls.cluster_scoped and scope is not None and scope.namespace_selector is None:
        return "spec.scope.namespaceSelector: required for a cluster kind"
    if not cls.cluster_scoped and scope is not None and scope.namespace_selector is not None:
        return "spec.scope.namespaceSelector: only cluster kinds take one"
    return None


class KerfResource(BaseModel):
    """A kerf custom resource: apiVersion, kind, metadata, spec, status."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    cluster_scoped: ClassVar[bool] = False
    #: A fixed object name for the cluster singletons.
    singleton_name: ClassVar[str | None] = None
    #: additionalPrinterColumns of the CRD: (name, type, jsonPath), with a fourth item,
    #: the priority, for a column only `-o wide` shows.
    printer_columns: ClassVar[tuple[tuple[str, str, str] | tuple[str, str, str, int], ...]] = ()
    short_names: ClassVar[tuple[str, ...]] = ()
    #: False for the Kubex kinds kerf stores and does not act on (StoredKind)
    acted_on: ClassVar[bool] = True

    api_version: Literal["rightsizing.kubex.ai/v1alpha1"]
    kind: str
    metadata: ObjectMeta
    status: Status | None = None

    @model_validator(mode="after")
    def _scope_rules(self) -> KerfResource:
        problem = scope_problem(type(self), self.metadata, getattr(self, "spec", None))
        if problem is not None:
            raise ValueError(problem)
        return self


class PolicyResource(KerfResource):
    """Common base of kinds that target workloads through a scope."""

    printer_columns: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("Weight", "integer", ".spec.weight"),
        ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
        ("Age", "date", ".metadata.creationTimestamp"),
    )


class PolicyEvaluation(KerfResource):
    short_names = ("policyeval",)
    cluster_scoped = True
    singleton_name = "policy-evaluation"
    kind: Literal["PolicyEvaluation"]
    spec: PolicyEvaluationSpec = Field(default_factory=PolicyEvaluationSpec)


class GlobalConfiguration(KerfResource):
    short_names = ("kerfconfig",)
    cluster_scoped = True
    singleton_name = "global-config"
    printer_columns = (
        ("Automation", "boolean", ".spec.automationEnabled"),
        ("MultiPolicy", "boolean", ".spec.multiPolicyContainerRightsizingEnabled"),
        ("Webhook", "boolean", ".status.webhookHealth.healthy"),
        ("Age", "date", ".metadata.creationTimestamp"),
    )
    kind: Literal["GlobalConfiguration"]
    spec: GlobalConfigurationSpec = Field(default_factory=GlobalConfigurationSpec)


class AutomationStrategy(KerfResource):
    short_names = ("autostrategy",)
    printer_columns = (
        ("InPlace", "boolean", ".spec.inPlaceResize.enabled"),
        ("Eviction", "boolean", ".spec.podEviction.enabled"),
        ("Age", "date", ".metadata.creationTimestamp"),
    )
    kind: Literal["AutomationStrategy"]
    spec: AutomationStrategySpec = Field(default_factory=AutomationStrategySpec)


class ClusterAutomationStrategy(AutomationStrategy):
    short_names = ("cautostrategy",)
    cluster_scoped = True
    kind: Literal["ClusterAutomationStrategy"]  # type: ignore[assignment]


class StaticPolicy(PolicyResource):
    short_names = ("staticpol",)
    kind: Literal["StaticPolicy"]
    spec: StaticPolicySpec


class ClusterStaticPolicy(StaticPolicy):
    short_names = ("cstaticpol",)
    cluster_scoped = True
    kind: Literal["ClusterStaticPolicy"]  # type: ignore[assignment]


class ProactivePolicy(PolicyResource):
    short_names = ("proactivepol",)
    kind: Literal["ProactivePolicy"]
    spec: ProactivePolicySpec


class ClusterProactivePolicy(ProactivePolicy):
    short_names = ("cproactivepol",)
    cluster_scoped = True
    kind: Literal["ClusterProactivePolicy"]  # type: ignore[assignment]


class GpuReactivePolicy(PolicyResource):
    short_names = ("gpupol",)
    kind: Literal["GpuReactivePolicy"]
    spec: GpuReactivePolicySpec


class ClusterGpuReactivePolicy(GpuReactivePolicy):
    short_names = ("cgpupol",)
    cluster_scoped = True
    kind: Literal["ClusterGpuReactivePolicy"]  # type: ignore[assignment]


class ContainerArgsPolicy(PolicyResource):
    short_names = ("argspol",)
    cluster_scoped = True
    kind: Literal["ContainerArgsPolicy"]
    spec: ContainerArgsPolicySpec


class RollbackPolicyStatus(Status):
    """Written by the reconciler: the workloads this policy governs, by rollback mode."""

    monitoring: int = 0
    rolled_back: int = 0
    failed_permanent: int = 0


class RollbackPolicy(PolicyResource):
    short_names = ("rollbackpol",)
    printer_columns = (
        ("Target", "string", ".spec.rollbackTarget"),
        ("Period", "string", ".spec.monitoringPeriod"),
        ("Weight", "integer", ".spec.weight"),
        ("Monitoring", "integer", ".status.monitoring"),
        ("RolledBack", "integer", ".status.rolledBack"),
        ("Failed", "integer", ".status.failedPermanent"),
        ("Age", "date", ".metadata.creationTimestamp"),
    )
    kind: Literal["RollbackPolicy"]
    spec: RollbackPolicySpec
    status: RollbackPolicyStatus | None = None


class ClusterRollbackPolicy(RollbackPolicy):
    short_names = ("crollbackpol",)
    cluster_scoped = True
    kind: Literal["ClusterRollbackPolicy"]  # type: ignore[assignment]


class RightsizingRecommendation(KerfResource):
    short_names = ("rsrec",)
    printer_columns = (
        ("CPU", "string", ".status.summary.cpu"),
        ("Memory", "string", ".status.summary.memory"),
        ("Phase", "string", ".status.phase"),
        ("Reason", "string", ".status.summary.reason"),
        ("CPU-Limit", "string", ".status.summary.cpuLimit", 1),
        ("Memory-Limit", "string", ".status.summary.memoryLimit", 1),
        ("Policy", "string", ".status.summary.policy", 1),
        ("Next", "string", ".status.nextAllowedAt", 1),
        ("Age", "date", ".metadata.creationTimestamp"),
    )
    kind: Literal["RightsizingRecommendation"]
    spec: RightsizingRecommendationSpec
    status: RecommendationStatus | None = None  # type: ignore[assignment]


#: `Supported=False` on a StoredKind: the condition the reconciler writes once.
SUPPORTED = "Supported"
NOT_IMPLEMENTED = "NotImplemented"


class StoredKind(KerfResource):
    """A Kubex kind kerf stores for compatibility and does not act on: accepted with
    Kubex's schema so a migrated config applies, and told once (reconciler/storedkinds.py)."""

    acted_on = False
    #: what Kubex does with it that kerf does not, for the condition and Event
    not_done: ClassVar[str] = ""
    printer_columns = (
        ("Supported", "string", f'.status.conditions[?(@.type=="{SUPPORTED}")].status'),
        ("Reason", "string", f'.status.conditions[?(@.type=="{SUPPORTED}")].reason'),
        ("Age", "date", ".metadata.creationTimestamp"),
    )

    @classmethod
    def unsupported_message(cls) -> str:
        name = cls.model_fields["kind"].annotation.__args__[0]  # type: ignore[union-attr]
        return f"kerf stores {name} for Kubex compatibility and does not act on it: {cls.not_done}"


class ClusterCompactionPolicy(StoredKind):
    cluster_scoped = True
    not_done = (
        "kerf has no compaction scheduler or descheduler; no workload is labelled, "
        "scheduled or evicted to pack nodes"
    )
    kind: Literal["ClusterCompactionPolicy"]
    spec: ClusterCompactionPolicySpec


class ObjectPatch(StoredKind):
    not_done = "kerf patches no objects; the target is left as it is"
    kind: Literal["ObjectPatch"]
    spec: ObjectPatchSpec


class ClusterObjectPatch(StoredKind):
    cluster_scoped = True
    not_done = ObjectPatch.not_done
    kind: Literal["ClusterObjectPatch"]
    spec: ObjectPatchSpec


class GpuConsolidationPolicy(StoredKind):
    cluster_scoped = True
    not_done = "kerf has no GPU node consolidation; no GPU workload is moved or evicted"
    kind: Literal["GpuConsolidationPolicy"]
    spec: GpuConsolidationPolicySpec


KINDS: dict[str, type[KerfResource]] = {
    cls.model_fields["kind"].annotation.__args__[0]: cls  # type: ignore[union-attr]
    for cls in (
        PolicyEvaluation,
        GlobalConfiguration,
        AutomationStrategy,
        ClusterAutomationStrategy,
        StaticPolicy,
        ClusterStaticPolicy,
        ProactivePolicy,
        ClusterProactivePolicy,
        GpuReactivePolicy,
        ClusterGpuReactivePolicy,
        ContainerArgsPolicy,
        RollbackPolicy,
        ClusterRollbackPolicy,
        RightsizingRecommendation,
        ClusterCompactionPolicy,
        ObjectPatch,
        ClusterObjectPatch,
        GpuConsolidationPolicy,
    )
}
#: The kinds kerf acts on: what the webhook, the recommender and the view's decisions read.
ACTED_ON_KINDS: tuple[str, ...] = tuple(k for k, cls in KINDS.items() if cls.acted_on)
#: The Kubex kinds kerf stores only (StoredKind).
STORED_KINDS: tuple[str, ...] = tuple(k for k, cls in KINDS.items() if not cls.acted_on)


def plural(kind: str) -> str:
    """Lowercase plural of a kind, as its REST resource is named: `StaticPolicy` → `staticpolicies`."""
    word = kind.lower()
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "ies"
    if re.search(r"(s|x|z|ch|sh)$", word):
        return word + "es"
    return word + "s"


class InvalidObject(ValueError):
    """A kerf object failed validation; the message names the source, object and field."""


def object_label(doc: Any) -> str:
    """`Kind namespace/name` (or `Kind name`) of a raw object, for messages."""
    if not isinstance(doc, dict):
        return "object"
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    name = meta.get("name", "<unnamed>")
    ns = meta.get("namespace")
    return f"{doc.get('kind', '<no kind>')} {ns + '/' if ns else ''}{name}"


def _loc(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif isinstance(item, str) and not re.match(r"^(function-|literal\[|[a-z_]+\[)", item):
            parts.append(("." if parts else "") + item)
    return "".join(parts)


def format_validation_error(exc: ValidationError, within: tuple[str, ...] = ()) -> str:
    """One line per problem: `field.path: message`, joined with '; ' (`within`: the path
    of the validated part in its document)."""
    lines = []
    for err in exc.errors():
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown field (misspelt?)"
        loc = _loc((*within, *err["loc"]))
        lines.append(f"{loc}: {message}" if loc else message)
    return "; ".join(lines)


def kind_of(doc: Any, source: str) -> type[KerfResource]:
    """The model of a kerf object's kind; InvalidObject when it is not a mapping, not of
    kerf's apiVersion or of no kerf kind."""
    label = object_label(doc)
    if not isinstance(doc, dict):
        raise InvalidObject(f"{source}: expected a mapping, got {type(doc).__name__}")
    if doc.get("apiVersion") != API_VERSION:
        raise InvalidObject(
            f"{source}: {label}: apiVersion must be {API_VERSION}, got {doc.get('apiVersion')!r}"
        )
    cls = KINDS.get(doc.get("kind", ""))
    if cls is None:
        raise InvalidObject(f"{source}: {label}: unknown kind {doc.get('kind')!r}")
    return cls


def parse_object(doc: Any, source: str = "<input>") -> KerfResource:
    """Validate one kerf object; raise InvalidObject with one clear message on failure."""
    label = object_label(doc)
    cls = kind_of(doc, source)
    try:
        return cls.model_validate(doc)
    except ValidationError as exc:
        raise InvalidObject(f"{source}: {label}: {format_validation_error(exc)}") from None


CRD_KIND = "CustomResourceDefinition"
#: The label every kerf CRD carries (tools/crdgen.py): what the reconciler watches them by.
CRD_SELECTOR = "app.kubernetes.io/part-of=kerf"
#: The names of kerf's CRDs.
CRD_NAMES: tuple[str, ...] = tuple(sorted(f"{plural(kind)}.{API_GROUP}" for kind in KINDS))
