"""The models: SPEC §2 defaults for every kind and one clear message per invalid object."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.model.crd import (
    DEFAULT_PRECEDENCE,
    DEFAULT_WORKLOAD_TYPES,
    KINDS,
    AutomationStrategy,
    ContainerArgsPolicy,
    GlobalConfiguration,
    GpuReactivePolicy,
    InvalidObject,
    PolicyEvaluation,
    ProactivePolicy,
    RollbackPolicy,
    StaticPolicy,
    parse_object,
)

API = "rightsizing.kubex.ai/v1alpha1"
SOURCE = "policies/shop.yaml"


def _obj(
    kind: str, spec: dict[str, Any] | None = None, name: str = "p", ns: str | None = "shop"
) -> dict[str, Any]:
    if KINDS[kind].cluster_scoped:
        ns = None
    doc: dict[str, Any] = {"apiVersion": API, "kind": kind, "metadata": {"name": name}}
    if ns:
        doc["metadata"]["namespace"] = ns
    if spec is not None:
        doc["spec"] = spec
    return doc


CLUSTER_SCOPE = {"namespaceSelector": {"operator": "In", "values": ["prod-*"]}}
REF = {"automationStrategyRef": {"name": "default"}}
STATIC = {**REF, "resources": {"containers": {"app": {"requests": {"cpu": "250m"}}}}}
ROLLBACK = {
    "monitoringPeriod": "5m",
    "rollbackTarget": "manifest",
    "adoptionThresholdPercent": 80,
    "backoff": {"timePeriod": "1m", "multiplyByTurn": 2, "maxAttempts": 3},
}
PROM = {"namespaceLabel": "namespace", "podLabel": "pod", "containerLabel": "container"}
GPU_METRICS = {
    "compute": {"prometheus": {**PROM, "metric": "DCGM_FI_PROF_SM_ACTIVE"}},
    "memory": {
        "prometheus": {**PROM, "metric": "kai_gpu_memory", "interpretation": "currentAllocation"}
    },
}
GPU = {**REF, "metrics": GPU_METRICS}
ARGS = {"containers": {"*": {"args": [{"name": "--verbose"}]}}, "scope": CLUSTER_SCOPE}


def _error(doc: dict[str, Any]) -> str:
    with pytest.raises(InvalidObject) as info:
        parse_object(doc, SOURCE)
    return str(info.value)


def _strategy(enablement: dict[str, Any]) -> dict[str, Any]:
    return _obj("AutomationStrategy", {"enablement": enablement}, name="s")


# --------------------------------------------------------------------------- defaults


def test_policy_evaluation_defaults() -> None:
    obj = parse_object(_obj("PolicyEvaluation", name="policy-evaluation"))
    assert isinstance(obj, PolicyEvaluation)
    assert [(p.type, p.priority) for p in obj.spec.precedence] == list(DEFAULT_PRECEDENCE)
    assert dict(DEFAULT_PRECEDENCE) == {
        "RollbackPolicy": 130,
        "ClusterRollbackPolicy": 130,
        "GpuReactivePolicy": 120,
        "ClusterGpuReactivePolicy": 110,
        "ContainerArgsPolicy": 100,
        "StaticPolicy": 90,
        "ClusterStaticPolicy": 90,
        "ProactivePolicy": 70,
        "ClusterProactivePolicy": 70,
    }


def test_global_configuration_defaults() -> None:
    obj = parse_object(_obj("GlobalConfiguration", name="global-config"))
    assert isinstance(obj, GlobalConfiguration)
    spec = obj.spec
    assert spec.automation_enabled is True
    assert spec.multi_policy_container_rightsizing_enabled is False
    assert spec.protected_namespace_patterns == ["kube-*", "openshift-*", "gmp-*"]
    assert spec.tolerance_percent == 5
    assert spec.recommendation_reload_interval == "1h"
    assert spec.webhook_lease_max_age == "60s"
    # Every guardrail unset: the built-in defaults show through the layers.
    assert spec.guardrail_defaults.model_dump(exclude_none=True) == {}


def test_automation_strategy_defaults() -> None:
    obj = parse_object(_obj("AutomationStrategy", name="s"))
    assert isinstance(obj, AutomationStrategy)
    enablement = obj.spec.enablement
    for field in (enablement.cpu.requests, enablement.memory.requests, enablement.memory.limits):
        assert (field.upsize, field.downsize, field.set_from_unspecified) == (True, True, True)
    cpu_limits = enablement.cpu.limits
    assert (cpu_limits.upsize, cpu_limits.downsize, cpu_limits.set_from_unspecified) == (
        True,
        True,
        False,
    )
    for gpu in (enablement.gpu.requests, enablement.gpu.limits):
        assert (gpu.upsize, gpu.downsize, gpu.set_from_unspecified) == (False, False, False)
    assert (obj.spec.in_place_resize.enabled, obj.spec.in_place_resize.container_restart) == (
        True,
        False,
    )
    assert obj.spec.pod_eviction.enabled is True
    assert obj.spec.scheduling.inclusion_windows == []


def test_window_defaults() -> None:
    window = {"name": "night", "start": "22:00", "end": "06:00"}
    obj = parse_object(_obj("AutomationStrategy", {"scheduling": {"inclusionWindows": [window]}}))
    [parsed] = obj.spec.scheduling.inclusion_windows
    assert (parsed.timezone, parsed.weekdays) == ("UTC", [])


def test_static_policy_defaults() -> None:
    obj = parse_object(_obj("StaticPolicy", STATIC))
    assert isinstance(obj, StaticPolicy)
    assert (obj.spec.weight, obj.spec.mode) == (0, "auto")
    assert obj.spec.scope.workload_types == list(DEFAULT_WORKLOAD_TYPES)
    assert "StrimziPodSet" not in obj.spec.scope.workload_types
    assert obj.spec.scope.containers is None  # absent = every container
    assert obj.spec.guardrails.model_dump(exclude_none=True) == {}


def test_proactive_policy_defaults() -> None:
    obj = parse_object(_obj("ProactivePolicy", REF))
    assert isinstance(obj, ProactivePolicy)
    assert obj.spec.safety_checks.max_analysis_age_days == 5
    assert (obj.spec.weight, obj.spec.mode) == (0, "auto")


def test_gpu_reactive_policy_defaults_are_kubex_s() -> None:
    obj = parse_object(_obj("GpuReactivePolicy", GPU))
    assert isinstance(obj, GpuReactivePolicy)
    assert obj.spec.min_pod_metrics_age == "15m"
    assert obj.spec.experimental is None
    compute, memory = obj.spec.metrics.compute, obj.spec.metrics.memory
    up, back = compute.upsize, compute.scale_back
    assert (up.threshold_percent, up.metrics_window, up.headroom_percent, up.max_percent) == (
        120,
        "10m",
        20,
        200,
    )
    assert (back.threshold_percent, back.metrics_window, back.headroom_percent) == (80, "10m", 20)
    assert compute.prometheus.interpretation == "fullGPU"
    assert memory.prometheus.interpretation == "currentAllocation"


def test_global_configuration_prometheus_defaults() -> None:
    obj = parse_object(_obj("GlobalConfiguration", {}, name="global-config"))
    assert isinstance(obj, GlobalConfiguration)
    assert obj.spec.prometheus.url is None
    assert obj.spec.prometheus.request_timeout == "30s"
    assert obj.spec.gpu_reactive_check_interval == "1m"


def test_rollback_policy_defaults() -> None:
    obj = parse_object(_obj("RollbackPolicy", ROLLBACK))
    assert isinstance(obj, RollbackPolicy)
    assert obj.spec.weight == 0
    assert obj.spec.enable_monitoring_reopen is True
    assert obj.spec.scope.workload_types == list(DEFAULT_WORKLOAD_TYPES)


def test_container_args_policy_defaults() -> None:
    obj = parse_object(_obj("ContainerArgsPolicy", ARGS))
    assert isinstance(obj, ContainerArgsPolicy)
    [op] = obj.spec.containers["*"].args
    assert (op.operation, op.value) == ("AddOrUpdate", None)
    assert (obj.spec.weight, obj.spec.replace_existing_pods) == (0, False)


def test_strimzi_allowed_when_listed() -> None:
    spec = {**ROLLBACK, "scope": {"workloadTypes": ["StrimziPodSet"]}}
    assert parse_object(_obj("RollbackPolicy", spec)).spec.scope.workload_types == ["StrimziPodSet"]


def test_integer_quantities_are_read_as_text() -> None:
    spec = {**REF, "resources": {"containers": {"*": {"requests": {"cpu": 1}}}}}
    obj = parse_object(_obj("StaticPolicy", spec))
    assert obj.spec.resources.containers["*"].requests == {"cpu": "1"}


def test_window_may_end_at_midnight_and_cross_it() -> None:
    windows = [
        {"name": "evening", "start": "18:00", "end": "24:00"},
        {"name": "night", "start": "22:00", "end": "06:00"},
    ]
    parse_object(_obj("AutomationStrategy", {"scheduling": {"exclusionWindows": windows}}))


def test_per_container_bounds_override_the_resource_bounds() -> None:
    """A container may set its own pair outside the resource's pair (an override)."""
    requests = {
        "floor": "100m",
        "ceiling": "1",
        "containers": {"big": {"floor": "2", "ceiling": "4"}},
    }
    parse_object(_strategy({"cpu": {"requests": requests}}))


# --------------------------------------------------------------------------- errors


def _assert_one_message(message: str, label: str, path: str, detail: str) -> None:
    assert message.startswith(f"{SOURCE}: {label}: "), message
    assert path in message and detail in message, message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("enablement", "path", "detail"),
    [
        (
            {"memory": {"limits": {"floor": "2Gi", "ceiling": "1Gi"}}},
            "spec.enablement.memory.limits",
            "floor 2Gi is above ceiling 1Gi",
        ),
        (
            {"cpu": {"requests": {"containers": {"app": {"floor": "2", "ceiling": "500m"}}}}},
            "spec.enablement.cpu.requests.containers.app",
            "floor 2 is above ceiling 500m",
        ),
        (
            {"cpu": {"requests": {"ceiling": "1", "containers": {"app": {"floor": "2"}}}}},
            "spec.enablement.cpu.requests",
            "container app: effective floor 2 is above ceiling 1",
        ),
        (
            {"cpu": {"requests": {"floor": "2", "containers": {"app": {"ceiling": "1"}}}}},
            "spec.enablement.cpu.requests",
            "container app: effective floor 2 is above ceiling 1",
        ),
    ],
)
def test_floor_above_ceiling(enablement: dict[str, Any], path: str, detail: str) -> None:
    _assert_one_message(_error(_strategy(enablement)), "AutomationStrategy shop/s", path, detail)


@pytest.mark.parametrize("value", [0, 101])
def test_adoption_threshold_is_1_to_100(value: int) -> None:
    doc = _obj("RollbackPolicy", {**ROLLBACK, "adoptionThresholdPercent": value})
    _assert_one_message(
        _error(doc),
        "RollbackPolicy shop/p",
        "spec.adoptionThresholdPercent",
        str(1 if value == 0 else 100),
    )


def _gpu_with(signal: str, part: str, values: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(GPU)
    spec["metrics"][signal][part] = {**spec["metrics"][signal].get(part, {}), **values}
    return _obj("GpuReactivePolicy", spec)


@pytest.mark.parametrize(
    ("part", "values", "path", "detail"),
    [
        ("upsize", {"thresholdPercent": 0}, "upsize.thresholdPercent", "greater than or equal"),
        ("upsize", {"maxPercent": 0}, "upsize.maxPercent", "greater than or equal"),
        ("upsize", {"headroomPercent": -1}, "upsize.headroomPercent", "greater than or equal"),
        ("upsize", {"metricsWindow": "30s"}, "upsize.metricsWindow", "under 1m"),
        ("scaleBack", {"metricsWindow": "59s"}, "scaleBack.metricsWindow", "under 1m"),
        ("scaleBack", {"thresholdPercent": 0}, "scaleBack.thresholdPercent", "greater than"),
        ("prometheus", {"interpretation": "half"}, "prometheus.interpretation", "fullGPU"),
        ("prometheus", {"metric": "gpu-util"}, "prometheus.metric", "pattern"),
        ("prometheus", {"podLabel": "pod.name"}, "prometheus.podLabel", "pattern"),
    ],
)
def test_bad_gpu_signals(part: str, values: dict[str, Any], path: str, detail: str) -> None:
    _assert_one_message(
        _error(_gpu_with("memory", part, values)),
        "GpuReactivePolicy shop/p",
        f"spec.metrics.memory.{path}",
        detail,
    )


def test_gpu_signals_are_both_required() -> None:
    spec = {**REF, "metrics": {"compute": GPU_METRICS["compute"]}}
    _assert_one_message(
        _error(_obj("GpuReactivePolicy", spec)),
        "GpuReactivePolicy shop/p",
        "spec.metrics.memory",
        "Field required",
    )


@pytest.mark.parametrize(("age", "ok"), [("0s", True), ("1m", True), ("30s", False)])
def test_min_pod_metrics_age_is_zero_or_a_minute(age: str, ok: bool) -> None:
    doc = _obj("GpuReactivePolicy", {**GPU, "minPodMetricsAge": age})
    if ok:
        parse_object(doc)
    else:
        _assert_one_message(
            _error(doc), "GpuReactivePolicy shop/p", "spec.minPodMetricsAge", "at least 1m"
        )


@pytest.mark.parametrize(
    "old", [{"upsize": {"utilizationThresholdPercent": 80}}, {"scaleBack": {"after": "1h"}}]
)
def test_kerf_s_former_gpu_fields_are_refused(old: dict[str, Any]) -> None:
    assert "unknown field" in _error(_obj("GpuReactivePolicy", {**GPU, **old}))


@pytest.mark.parametrize(
    ("window", "path", "detail"),
    [
        (
            {"name": "w", "start": "10:00", "end": "10:00"},
            "spec.scheduling.inclusionWindows[0]",
            "start and end are both 10:00",
        ),
        (
            {"name": "w", "start": "24:00", "end": "06:00"},
            "spec.scheduling.inclusionWindows[0].start",
            "pattern",
        ),
        (
            {"name": "w", "start": "10:00", "end": "24:30"},
            "spec.scheduling.inclusionWindows[0].end",
            "pattern",
        ),
        (
            {"name": "w", "start": "9:00", "end": "10:00"},
            "spec.scheduling.inclusionWindows[0].start",
            "pattern",
        ),
    ],
)
def test_bad_windows(window: dict[str, str], path: str, detail: str) -> None:
    doc = _obj("AutomationStrategy", {"scheduling": {"inclusionWindows": [window]}}, name="s")
    _assert_one_message(_error(doc), "AutomationStrategy shop/s", path, detail)


@pytest.mark.parametrize("kind", ["StaticPolicy", "ProactivePolicy", "GpuReactivePolicy"])
def test_missing_strategy_ref(kind: str) -> None:
    full = {"StaticPolicy": STATIC, "GpuReactivePolicy": GPU}.get(kind, REF)
    spec = {k: v for k, v in full.items() if k != "automationStrategyRef"}
    _assert_one_message(
        _error(_obj(kind, spec)), f"{kind} shop/p", "spec.automationStrategyRef", "Field required"
    )


def test_empty_strategy_ref_name() -> None:
    doc = _obj("ProactivePolicy", {"automationStrategyRef": {"name": ""}})
    _assert_one_message(
        _error(doc), "ProactivePolicy shop/p", "spec.automationStrategyRef.name", "at least 1"
    )


@pytest.mark.parametrize(
    ("kind", "spec"),
    [
        ("ClusterRollbackPolicy", ROLLBACK),
        ("ClusterStaticPolicy", STATIC),
        ("ClusterProactivePolicy", REF),
        ("ClusterGpuReactivePolicy", GPU),
        ("ContainerArgsPolicy", {**ARGS, "scope": {}}),
    ],
)
def test_cluster_kinds_need_namespace_selector(kind: str, spec: dict[str, Any]) -> None:
    _assert_one_message(
        _error(_obj(kind, spec)), f"{kind} p", "spec.scope.namespaceSelector", "required"
    )


def test_namespaced_kinds_take_no_namespace_selector() -> None:
    doc = _obj("RollbackPolicy", {**ROLLBACK, "scope": CLUSTER_SCOPE})
    _assert_one_message(
        _error(doc), "RollbackPolicy shop/p", "spec.scope.namespaceSelector", "only cluster kinds"
    )


def test_container_args_policy_needs_a_scope() -> None:
    doc = _obj("ContainerArgsPolicy", {"containers": ARGS["containers"]})
    _assert_one_message(_error(doc), "ContainerArgsPolicy p", "spec.scope", "Field required")


@pytest.mark.parametrize("name", ["verbose", "-", "--a=b", "--a b", ""])
def test_arg_name_pattern(name: str) -> None:
    doc = _obj("ContainerArgsPolicy", {**ARGS, "containers": {"app": {"args": [{"name": name}]}}})
    _assert_one_message(
        _error(doc),
        "ContainerArgsPolicy p",
        "spec.containers.app.args[0].name",
        "should match pattern",
    )


def test_arg_name_pattern_accepts_flags() -> None:
    for name in ("-v", "--verbose", "-Xmx", "--max-heap"):
        doc = _obj(
            "ContainerArgsPolicy", {**ARGS, "containers": {"app": {"args": [{"name": name}]}}}
        )
        parse_object(doc)


def test_remove_takes_no_value() -> None:
    op = {"name": "--verbose", "operation": "Remove", "value": "1"}
    doc = _obj("ContainerArgsPolicy", {**ARGS, "containers": {"app": {"args": [op]}}})
    _assert_one_message(
        _error(doc), "ContainerArgsPolicy p", "spec.containers.app.args[0]", "Remove takes no value"
    )


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        ({"key": "tier", "operator": "In"}, "operator In needs at least one value"),
        (
            {"key": "tier", "operator": "NotIn", "values": []},
            "operator NotIn needs at least one value",
        ),
        ({"key": "tier", "operator": "Exists", "values": ["a"]}, "operator Exists takes no values"),
    ],
)
def test_selector_operators(expression: dict[str, Any], detail: str) -> None:
    doc = _obj(
        "RollbackPolicy",
        {**ROLLBACK, "scope": {"labelSelector": {"matchExpressions": [expression]}}},
    )
    _assert_one_message(
        _error(doc), "RollbackPolicy shop/p", "spec.scope.labelSelector.matchExpressions[0]", detail
    )


@pytest.mark.parametrize("quantity", ["-1", "1.5.5", "12Mb", "", True, 0.5])
def test_bad_quantities(quantity: Any) -> None:
    spec = {**REF, "resources": {"containers": {"app": {"requests": {"memory": quantity}}}}}
    _assert_one_message(
        _error(_obj("StaticPolicy", spec)),
        "StaticPolicy shop/p",
        "spec.resources.containers.app.requests.memory",
        "",
    )


@pytest.mark.parametrize("duration", ["5", "-5m", "1d", "5 m", ""])
def test_bad_durations(duration: str) -> None:
    doc = _obj("RollbackPolicy", {**ROLLBACK, "monitoringPeriod": duration})
    _assert_one_message(
        _error(doc), "RollbackPolicy shop/p", "spec.monitoringPeriod", "invalid duration"
    )


def test_a_day_in_a_resource_is_refused_in_hours() -> None:
    doc = _obj("RollbackPolicy", {**ROLLBACK, "monitoringPeriod": "7d"})
    _assert_one_message(
        _error(doc), "RollbackPolicy shop/p", "spec.monitoringPeriod", "write 7d as 168h"
    )


@pytest.mark.parametrize("ratio", ["1.1", "0.7x", "nan", " 0.5"])
def test_bad_ratios(ratio: str) -> None:
    doc = _obj("StaticPolicy", {**STATIC, "guardrails": {"minConfidence": ratio}})
    _assert_one_message(
        _error(doc), "StaticPolicy shop/p", "spec.guardrails.minConfidence", "between 0 and 1"
    )


def test_unknown_field_typo() -> None:
    spec = copy.deepcopy(ROLLBACK)
    spec["backoff"]["maxAttempt"] = 3
    message = _error(_obj("RollbackPolicy", spec))
    _assert_one_message(
        message, "RollbackPolicy shop/p", "spec.backoff.maxAttempt", "unknown field"
    )


def test_several_problems_in_one_line() -> None:
    message = _error(_obj("RollbackPolicy", {**ROLLBACK, "weight": -1, "rollbackTarget": "x"}))
    _assert_one_message(message, "RollbackPolicy shop/p", "spec.weight", "")
    assert "spec.rollbackTarget" in message and "; " in message


@pytest.mark.parametrize(
    ("kind", "name", "detail"),
    [
        ("PolicyEvaluation", "default", "metadata.name: must be 'policy-evaluation'"),
        ("GlobalConfiguration", "config", "metadata.name: must be 'global-config'"),
    ],
)
def test_singleton_names(kind: str, name: str, detail: str) -> None:
    _assert_one_message(_error(_obj(kind, name=name)), f"{kind} {name}", "metadata.name", detail)


def test_namespace_rules() -> None:
    doc = _obj("RollbackPolicy", ROLLBACK, ns=None)
    _assert_one_message(_error(doc), "RollbackPolicy p", "metadata.namespace", "required")
    doc = _obj("ClusterRollbackPolicy", {**ROLLBACK, "scope": CLUSTER_SCOPE})
    doc["metadata"]["namespace"] = "shop"
    _assert_one_message(
        _error(doc), "ClusterRollbackPolicy shop/p", "metadata.namespace", "must be empty"
    )


def test_precedence_types_unique() -> None:
    spec = {
        "precedence": [
            {"type": "StaticPolicy", "priority": 1},
            {"type": "StaticPolicy", "priority": 2},
        ]
    }
    doc = _obj("PolicyEvaluation", spec, name="policy-evaluation")
    _assert_one_message(
        _error(doc), "PolicyEvaluation policy-evaluation", "spec", "StaticPolicy twice"
    )


def test_negative_weight() -> None:
    _assert_one_message(
        _error(_obj("StaticPolicy", {**STATIC, "weight": -1})),
        "StaticPolicy shop/p",
        "spec.weight",
        "greater than",
    )


def test_kind_and_version_errors() -> None:
    assert _error({"apiVersion": API, "kind": "Nope", "metadata": {"name": "x"}}) == (
        f"{SOURCE}: Nope x: unknown kind 'Nope'"
    )
    doc = _obj("RollbackPolicy", ROLLBACK) | {"apiVersion": "v1"}
    assert "apiVersion must be rightsizing.kubex.ai/v1alpha1" in _error(doc)
