"""Pod health and adoption for rollback monitoring (SPEC §8): pure functions of pod objects.

A pod is *unhealthy* when one of its containers was OOM-killed `oomKills` times, restarted
`restarts` times, waits in CrashLoopBackOff, is CPU-throttled at or above
`throttlingRatio`, or when the pod cannot be scheduled. A pod *carries* a recommendation
when it runs the values that recommendation applied (the webhook's pod-rightsizing-info at
admission, or the reconciler's last applied values after an in-place resize). A pod
*adopts* it when it carries it and is healthy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from app.model.annotations import DOMAIN, POD_INFO
from app.model.kube_types import RESOURCE_FIELDS, PodDict
from app.model.quantities import GPU_FRACTION, QuantityError, parse_resource
from app.model.workloads import ContainerResources, parse_time, target_containers, target_statuses
from app.policy.guardrails import GuardrailSettings

#: Pod annotation with each container's CPU throttling ratio, `{"app": "0.40"}`: the share
#: of CPU periods in which the container was throttled, written by whatever measures it
#: (a metrics agent in a cluster, the usage model in kubesim).
CPU_THROTTLING = f"{DOMAIN}/cpu-throttling"

#: Failure reasons (SPEC §8), most telling first: when pods fail for different reasons,
#: the most frequent wins and ties go to the earlier one.
OOM_KILLED = "oomKilled"
CRASH_LOOP = "crashLoopBackOff"
RESTARTS = "restarts"
THROTTLED = "throttled"
UNSCHEDULABLE = "unschedulable"
ADOPTION_THRESHOLD_NOT_MET = "adoptionThresholdNotMet"
RESTORE_UNAVAILABLE = "rollbackRecommendationUnavailable"
POD_REASONS: tuple[str, ...] = (OOM_KILLED, CRASH_LOOP, RESTARTS, THROTTLED, UNSCHEDULABLE)


@dataclass(frozen=True, slots=True)
class HealthThresholds:
    """`guardrails.rollback` thresholds: a pod at or above any of them is unhealthy."""

    oom_kills: int = 1
    restarts: int = 3
    throttling_ratio: float = 0.25


def thresholds_for(settings: Iterable[GuardrailSettings]) -> HealthThresholds:
    """The strictest thresholds among the guardrails of the policies that contributed to a
    recommendation (each resolved with `ClusterView.guardrails`); built-in defaults when
    none did. A value of 0 is read as 1: a count of zero events is no evidence."""
    found = list(settings)
    if not found:
        return HealthThresholds()
    return HealthThresholds(
        oom_kills=max(1, min(s.oom_kills for s in found)),
        restarts=max(1, min(s.restarts for s in found)),
        throttling_ratio=min(s.throttling_ratio for s in found),
    )


@dataclass(frozen=True, slots=True)
class PodHealth:
    """The verdict on one pod: `reason` is None for a healthy pod."""

    name: str
    reason: str | None = None
    detail: str = ""

    @property
    def healthy(self) -> bool:
        """True when no threshold was reached."""
        return self.reason is None


def pod_name(pod: PodDict) -> str:
    """The pod's name ("" when missing)."""
    return str((pod.get("metadata") or {}).get("name") or "")


def pod_created(pod: PodDict) -> datetime | None:
    """The pod's creationTimestamp."""
    return parse_time((pod.get("metadata") or {}).get("creationTimestamp"))


def is_live(pod: PodDict) -> bool:
    """A pod that still counts: not being deleted, not evicted or otherwise failed by the
    node (a Failed pod's own crash is read from its container statuses)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if meta.get("deletionTimestamp"):
        return False
    return not (status.get("phase") == "Failed" and status.get("reason") == "Evicted")


def at_api_precision(moment: datetime) -> datetime:
    """`moment` as the API writes container and pod times: whole seconds (`finishedAt`,
    `startedAt` and `creationTimestamp` have no fraction)."""
    return moment.replace(microsecond=0)


def _terminated_since(entry: Mapping[str, Any], since: datetime | None) -> bool:
    """Whether the container's last termination happened at or after `since`, compared at
    the API's one-second precision (a kill in the very second the window opened counts;
    its restart count is evidence about the monitored change only then)."""
    if since is None:
        return True
    finished = parse_time(
        ((entry.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
    )
    return finished is not None and finished >= at_api_precision(since)


def _throttling(pod: PodDict) -> dict[str, float]:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(CPU_THROTTLING)
    if not text:
        return {}
    try:
        raw = orjson.loads(text)
        return {str(k): float(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return {}


def _unschedulable(status: Mapping[str, Any]) -> str | None:
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return str(condition.get("message") or "the pod cannot be scheduled")
    return None


def is_unschedulable(pod: PodDict) -> bool:
    """The scheduler found no node for the pod (`PodScheduled=False`, `Unschedulable`)."""
    return _unschedulable(pod.get("status") or {}) is not None


def restart_counts(pods: Iterable[PodDict]) -> dict[str, dict[str, int]]:
    """Each pod's restart count per container (pod uid → container → count): the baseline
    taken when a change is sent."""
    counts: dict[str, dict[str, int]] = {}
    for pod in pods:
        uid = (pod.get("metadata") or {}).get("uid")
        if uid:
            counts[str(uid)] = {
                str(s.get("name")): int(s.get("restartCount") or 0) for s in target_statuses(pod)
            }
    return counts


def pod_health(
    pod: PodDict,
    thresholds: HealthThresholds,
    since: datetime | None,
    baseline: Mapping[str, int] | None = None,
) -> PodHealth:
    """Judge one pod against the thresholds.

    `baseline` is the pod's restart count per container when the change was sent: only
    restarts and OOM kills beyond it count (a running pod resized in place keeps its old
    count, which says nothing about the change). A pod without one counts them when it was
    created inside the window that opened at `since`, or when the container's last
    termination happened inside it (times compared at the API's one-second precision).
    """
    name = pod_name(pod)
    status = pod.get("status") or {}
    created = pod_created(pod)
    fresh = since is None or (created is not None and created >= at_api_precision(since))
    found: list[tuple[str, str]] = []
    throttling = _throttling(pod)
    for entry in target_statuses(pod):
        container = str(entry.get("name"))
        restarts = int(entry.get("restartCount") or 0)
        before = None if baseline is None else baseline.get(container)
        if before is not None:
            restarts = max(0, restarts - before)
            counted = restarts > 0
        else:
            counted = fresh or _terminated_since(entry, since)
        last = (entry.get("lastState") or {}).get("terminated") or {}
        state = entry.get("state") or {}
        kills = restarts if last.get("reason") == "OOMKilled" and counted else 0
        if (state.get("terminated") or {}).get("reason") == "OOMKilled":
            kills += 1
        if last.get("reason") == "OOMKilled" and counted:
            kills = max(kills, 1)
        if kills >= thresholds.oom_kills:
            found.append((OOM_KILLED, f"container {container} OOM-killed {kills} time(s)"))
        if (state.get("waiting") or {}).get("reason") == "CrashLoopBackOff":
            found.append((CRASH_LOOP, f"container {container} is in CrashLoopBackOff"))
        if counted and restarts >= thresholds.restarts:
            found.append((RESTARTS, f"container {container} restarted {restarts} time(s)"))
        ratio = throttling.get(container)
        if ratio is not None and ratio >= thresholds.throttling_ratio:
            found.append((THROTTLED, f"container {container} CPU-throttled {ratio:.0%}"))
    unschedulable = _unschedulable(status)
    if unschedulable is not None:
        found.append((UNSCHEDULABLE, f"unschedulable: {unschedulable}"))
    if not found:
        return PodHealth(name)
    found.sort(key=lambda item: POD_REASONS.index(item[0]))
    return PodHealth(name, found[0][0], "; ".join(detail for _, detail in found))


def running_resources(pod: PodDict) -> dict[str, ContainerResources]:
    """The resources each container runs with: the kubelet's `status.containerStatuses[]
    .resources` once reported (an in-place resize counts only when actuated), else the
    spec's; a KAI pod's `gpu-fraction` as its first container's request, as every
    decision reads it (`app.model.workloads.pod_resources`)."""
    reported = {
        str(s.get("name")): s.get("resources")
        for s in target_statuses(pod)
        if s.get("resources") is not None
    }
    result: dict[str, ContainerResources] = {}
    for name, container in target_containers(pod).items():
        raw = reported.get(name) or container.get("resources") or {}
        result[name] = {
            fld: {r: str(q) for r, q in (raw.get(fld) or {}).items()} for fld in RESOURCE_FIELDS
        }
    fraction = ((pod.get("metadata") or {}).get("annotations") or {}).get(GPU_FRACTION)
    if fraction is not None and result:
        try:
            parse_resource(GPU_FRACTION, str(fraction))
        except QuantityError:
            return result  # not a number: as if absent
        result[next(iter(result))]["requests"][GPU_FRACTION] = str(fraction)
    return result


def runs_values(pod: PodDict, values: Mapping[str, ContainerResources]) -> bool:
    """Whether the pod runs every value listed in `values` (quantities compared by amount,
    so 1000m equals 1). Containers the pod does not have are ignored; an empty map is
    never matched."""
    if not any(v for res in values.values() for v in res.values()):
        return False
    running = running_resources(pod)
    for container, fields in values.items():
        have = running.get(container)
        if have is None:
            continue
        for fld, wanted in fields.items():
            for resource, quantity in wanted.items():
                actual = have.get(fld, {}).get(resource)
                if actual is None or parse_resource(resource, actual) != parse_resource(
                    resource, quantity
                ):
                    return False
    return True


def pod_info(pod: PodDict) -> tuple[str | None, dict[str, ContainerResources]]:
    """(fingerprint, containers) of the webhook's pod-rightsizing-info annotation."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(POD_INFO)
    if not text:
        return None, {}
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None, {}
    if not isinstance(raw, dict):
        return None, {}
    containers = raw.get("containers")
    return raw.get("fingerprint"), containers if isinstance(containers, dict) else {}


@dataclass(frozen=True, slots=True)
class Applied:
    """What the reconciler last applied to running pods (RightsizingRecommendation
    `status.lastApplied`): the recommendation's fingerprint, when, and the values."""

    fingerprint: str | None
    at: datetime
    containers: Mapping[str, ContainerResources]
    #: pod uid → container → restart count when the change was sent
    baseline: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def carries(pod: PodDict, fingerprint: str, applied: Applied | None) -> bool:
    """Whether the pod runs the recommendation with this fingerprint: the webhook set it at
    admission (pod-rightsizing-info names it and the pod still runs those values — an
    in-place rollback leaves the annotation but changes the values), or the reconciler
    applied it (its last applied values are this fingerprint's and the pod runs them)."""
    info_fingerprint, info_values = pod_info(pod)
    if info_fingerprint == fingerprint and runs_values(pod, info_values):
        return True
    return (
        applied is not None
        and applied.fingerprint == fingerprint
        and runs_values(pod, applied.containers)
    )
