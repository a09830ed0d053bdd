"""The fields of a strategy's Kubex `safetyChecks`, `podEviction` and KAI settings that kerf accepts but
does not carry out as set: each is named, once, in a Warning Event on the strategy
(reconciler/policyevents.py). A field at its default, or one kerf honours, is not named;
docs/reference.md says what kerf does for each."""

from __future__ import annotations

from app.model.crd import AutomationStrategySpec, KerfResource, StaticPolicy

#: (field path, model attribute, the value kerf carries out, what kerf does instead)
_NOT_HONOURED: tuple[tuple[str, str, object, str], ...] = (
    (
        "safetyChecks.minReadyDuration",
        "min_ready_duration",
        "10s",
        "kerf waits for every pod of the workload to be Ready before the next disruption, "
        "for no set duration",
    ),
    (
        "safetyChecks.requireOwnerPodsReady",
        "require_owner_pods_ready",
        False,
        "kerf waits for every pod to be Ready before an eviction or a restart, not before "
        "a resize in place without restart",
    ),
    (
        "safetyChecks.respectWorkloadMaxUnavailable",
        "respect_workload_max_unavailable",
        True,
        "kerf disrupts one pod of a workload at a time, whatever its maxUnavailable",
    ),
    (
        "safetyChecks.resizeRetryInterval",
        "resize_retry_interval",
        "30s",
        "kerf retries on its own schedule (reconciler flags)",
    ),
)


def unhonoured_fields(spec: AutomationStrategySpec) -> list[str]:
    """`field: value (what kerf does)` for each field set to a value kerf does not carry out."""
    checks = spec.safety_checks
    found = [
        f"{path}: {_shown(getattr(checks, attr))} ({instead})"
        for path, attr, honoured, instead in _NOT_HONOURED
        if getattr(checks, attr) != honoured
    ]
    if spec.enablement.override_scheduler == "kai":
        found.append(
            "enablement.overrideScheduler: kai (kerf changes a KAI pod's gpu-fraction "
            "but converts no nvidia.com/gpu workload to KAI)"
        )
    if (
        spec.kai.vllm is not None
        and spec.kai.vllm.gpu_memory_utilization_buffer_percent is not None
    ):
        found.append(
            "kai.vllm.gpuMemoryUtilizationBufferPercent: "
            f"{spec.kai.vllm.gpu_memory_utilization_buffer_percent} "
            "(kerf does not rewrite vLLM's --gpu-memory-utilization)"
        )
    if not spec.pod_eviction.retry_pod_disruption_budget:
        found.append(
            "podEviction.retryPodDisruptionBudget: false (kerf retries an eviction a "
            "PodDisruptionBudget refuses, with backoff)"
        )
    return found


def _shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def unhonoured_policy_fields(policy: KerfResource) -> list[str]:
    """The same for a static policy: the containers' `claims`, which kerf does not set."""
    if not isinstance(policy, StaticPolicy):
        return []
    return [
        f"resources.containers.{name}.claims (kerf sets requests and limits only)"
        for name, values in sorted(policy.spec.resources.containers.items())
        if values.claims
    ]
