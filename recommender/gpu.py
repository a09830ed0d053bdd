"""GpuReactivePolicies carried out (docs/gpu.md): every `gpuReactiveCheckInterval`, the
recommender's leader asks Prometheus for each matched workload's GPU signals, decides
(app/recommend/gpu_reactive.py) and writes the result where the rest of kerf reads it: the
`gpu` block of the workload's RightsizingRecommendation status (baseline, recommendation,
driving metric, reason) and the GPU reactive annotation the selection reads, whose value
the reconciler applies through eviction and the webhook like any other.

Bad input (Prometheus unreachable, a refused query, a missing series) is a reason in the
status and one log line when it starts, and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from app.kube.errors import ApiStatusError
from app.kube.leader import Fence
from app.kube.transport import ApiTransport
from app.model.crd import API_VERSION, GpuReactivePolicy, GpuStatus, plural
from app.model.durations import parse_duration
from app.model.patch_types import PatchType
from app.model.records import record_name
from app.model.shards import namespace_of
from app.model.workloads import Workload
from app.recommend.gpu_inputs import (
    PROMETHEUS_UNAVAILABLE,
    QUERY_REFUSED,
    annotation_patch,
    baseline_of,
    gpu_policies,
    gpu_values,
    is_kai,
    parse_usage,
    pod_gpu,
    policy_label,
    previous_of,
    same_status,
    status_of,
    usage_query,
)
from app.recommend.gpu_reactive import (
    AT_BASELINE,
    SERIES_MISSING,
    SIGNALS,
    GpuEvaluation,
    Signal,
    SignalSamples,
    evaluate,
)
from app.runtime.clock import utc_now
from app.store.view import ClusterView
from recommender.metrics import RecommenderMetrics
from recommender.prometheus import AnswerError, PrometheusApi, Unreachable

logger = logging.getLogger("kerf.recommender.gpu")


@dataclass(frozen=True, slots=True)
class GpuOutcome:
    """One workload's evaluation under one policy, and what was written for it."""

    workload: str
    policy: str
    reason: str
    message: str
    values: Mapping[str, str]
    status: Mapping[str, Any]
    wrote_status: bool
    wrote_annotations: bool


def _api_path(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def _object_path(api_version: str, kind: str, namespace: str, name: str) -> str:
    return f"{_api_path(api_version)}/namespaces/{namespace}/{plural(kind)}/{name}"


def check_interval_s(view: ClusterView) -> float:
    """GlobalConfiguration's `gpuReactiveCheckInterval`, in seconds."""
    return parse_duration(view.global_config.gpu_reactive_check_interval).total_seconds()


class GpuReactor:
    """The GPU evaluation of the recommender: `run` is one pass over every workload a
    GpuReactivePolicy matches."""

    def __init__(
        self,
        view: ClusterView,
        session: aiohttp.ClientSession,
        api_client: client.ApiClient,
        default_prometheus: str,
        *,
        dry_run: bool = False,
        metrics: RecommenderMetrics | None = None,
    ) -> None:
        self._view = view
        self._metrics = metrics
        self._session = session
        self._transport = ApiTransport(api_client)
        self._default = default_prometheus
        self._dry_run = dry_run
        #: the last Prometheus failure logged (one line when it starts, one when it ends)
        self._failing: str | None = None

    def _prometheus(self) -> PrometheusApi:
        settings = self._view.global_config.prometheus
        total = parse_duration(settings.request_timeout).total_seconds()
        timeout = aiohttp.ClientTimeout(total=total, sock_connect=min(5.0, total))
        return PrometheusApi(self._session, settings.url or self._default, timeout)

    async def run(
        self, fence: Fence | None = None, now: datetime | None = None
    ) -> list[GpuOutcome]:
        """Evaluate every matched workload; each write through `fence` when one is given."""
        view = self._view
        multi = view.global_config.multi_policy_container_rightsizing_enabled
        api = self._prometheus()
        at = now or utc_now()
        outcomes: list[GpuOutcome] = []
        failure: str | None = None
        for workload in sorted(view.workloads(), key=lambda w: w.ref.key):
            policies = gpu_policies(
                view.policies_for_namespace(workload.namespace), workload, multi_policy=multi
            )
            for policy in policies:
                outcome = await self._one(api, workload, policy, at, fence, multi=multi)
                if outcome.reason in (PROMETHEUS_UNAVAILABLE, QUERY_REFUSED):
                    failure = outcome.message
                outcomes.append(outcome)
                if self._metrics is not None:
                    self._metrics.gpu_evaluations.labels(outcome.reason).inc()
        self._tell_failure(failure)
        return outcomes

    def _tell_failure(self, failure: str | None) -> None:
        if failure is not None and self._failing is None:
            logger.warning(
                "GPU reactive policies: Prometheus failed", extra={"fields": {"error": failure}}
            )
        elif failure is None and self._failing is not None:
            logger.info("GPU reactive policies: Prometheus answers again")
        self._failing = failure

    async def _samples(
        self,
        api: PrometheusApi,
        policy: GpuReactivePolicy,
        namespace: str,
        pods: list[str],
        at: float,
    ) -> tuple[dict[Signal, SignalSamples], int]:
        found: dict[Signal, SignalSamples] = {}
        unlabelled = 0
        for name in SIGNALS:
            signal = getattr(policy.spec.metrics, name)
            metric = signal.prometheus
            windows = []
            for window in (signal.upsize.metrics_window, signal.scale_back.metrics_window):
                low = await api.query(usage_query("min", metric, namespace, pods, window), at)
                high = await api.query(usage_query("max", metric, namespace, pods, window), at)
                usage, missing = parse_usage(metric, low, high)
                windows.append(usage)
                unlabelled += missing
            found[name] = SignalSamples(windows[0], windows[1])
        return found, unlabelled

    async def _one(
        self,
        api: PrometheusApi,
        workload: Workload,
        policy: GpuReactivePolicy,
        now: datetime,
        fence: Fence | None,
        *,
        multi: bool,
    ) -> GpuOutcome:
        view = self._view
        label = policy_label(policy)
        record = view.recommendation_for(workload.ref)
        old: GpuStatus | None = record.status.gpu if record and record.status else None
        live = [
            p
            for p in view.pods_of(workload.ref)
            if (p.get("status") or {}).get("phase") == "Running"
        ]
        pods = [pod_gpu(p) for p in live]
        kai = any(is_kai(p) for p in live)
        baseline = baseline_of(old)
        try:
            samples, unlabelled = await self._samples(
                api, policy, workload.namespace, [p.name for p in pods], now.timestamp()
            )
        except Unreachable as exc:
            evaluation = GpuEvaluation(PROMETHEUS_UNAVAILABLE, str(exc), baseline or {})
        except AnswerError as exc:
            evaluation = GpuEvaluation(QUERY_REFUSED, str(exc), baseline or {})
        else:
            evaluation = evaluate(
                policy.spec, pods, samples, baseline, previous_of(old, label), now
            )
            if evaluation.reason == SERIES_MISSING and unlabelled:
                evaluation = GpuEvaluation(
                    SERIES_MISSING,
                    f"{evaluation.message}; {unlabelled} series lack one of those labels",
                    evaluation.baseline,
                )
        values = gpu_values(evaluation, policy, kai=kai)
        status = status_of(label, evaluation, values, now, old)
        wrote_status = wrote_annotations = False
        if not same_status(old, status):
            if old is None or old.reason != evaluation.reason:
                logger.info(
                    "GPU reactive evaluation",
                    extra={
                        "fields": {
                            "workload": f"{workload.kind}/{workload.namespace}/{workload.name}",
                            "policy": label,
                            "reason": evaluation.reason,
                            "message": evaluation.message,
                            "values": values,
                            "drivingMetric": evaluation.driver,
                        }
                    },
                )
            wrote_status = await self._write_status(workload, record is None, status, fence)
        if values:
            patch = annotation_patch(workload, policy, values, multi_policy=multi, kai=kai)
        elif evaluation.reason == AT_BASELINE:
            patch = annotation_patch(workload, policy, {}, multi_policy=multi, kai=kai, remove=True)
        else:
            patch = {}
        if patch:
            wrote_annotations = await self._write_annotations(workload, patch, fence)
        return GpuOutcome(
            f"{workload.kind}/{workload.namespace}/{workload.name}",
            label,
            evaluation.reason,
            evaluation.message,
            values,
            status,
            wrote_status,
            wrote_annotations,
        )

    async def _send(
        self, verb: str, resource: str, method: str, path: str, body: Any, fence: Fence | None
    ) -> bool:
        if self._dry_run:
            return False
        if fence is not None:
            fence(resource, namespace_of(path))
        try:
            await self._transport.request(
                verb,
                resource,
                method,
                path,
                body,
                PatchType.MERGE if method == "PATCH" else "application/json",
            )
        except (ApiStatusError, aiohttp.ClientError, TimeoutError, OSError) as exc:
            if isinstance(exc, ApiStatusError) and exc.code == 409 and method == "POST":
                return True  # created meanwhile (by the reconciler)
            logger.warning(
                "GPU reactive write failed",
                extra={"fields": {"path": path, "error": str(exc)}},
            )
            return False
        return True

    async def _write_status(
        self, workload: Workload, create: bool, status: Mapping[str, Any], fence: Fence | None
    ) -> bool:
        name = record_name(workload.kind, workload.name)
        namespace = workload.namespace
        if create:
            obj = self._view.get(workload.kind, namespace, workload.name) or {}
            api_version = str(obj.get("apiVersion") or "apps/v1")
            owner: dict[str, Any] = {
                "apiVersion": api_version,
                "kind": workload.kind,
                "name": workload.name,
                "blockOwnerDeletion": False,
                "controller": False,
            }
            if workload.uid:
                owner["uid"] = workload.uid
            body = {
                "apiVersion": API_VERSION,
                "kind": "RightsizingRecommendation",
                "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
                "spec": {
                    "targetRef": {
                        "apiVersion": api_version,
                        "kind": workload.kind,
                        "name": workload.name,
                    }
                },
            }
            path = f"{_api_path(API_VERSION)}/namespaces/{namespace}/rightsizingrecommendations"
            if not await self._send(
                "create", "rightsizingrecommendations", "POST", path, body, fence
            ):
                return False
        path = _object_path(API_VERSION, "RightsizingRecommendation", namespace, name) + "/status"
        return await self._send(
            "patch",
            "rightsizingrecommendations/status",
            "PATCH",
            path,
            {"status": {"gpu": status}},
            fence,
        )

    async def _write_annotations(
        self, workload: Workload, patch: Mapping[str, str | None], fence: Fence | None
    ) -> bool:
        obj = self._view.get(workload.kind, workload.namespace, workload.name) or {}
        api_version = str(obj.get("apiVersion") or "apps/v1")
        path = _object_path(api_version, workload.kind, workload.namespace, workload.name)
        body = {"metadata": {"annotations": dict(patch)}}
        return await self._send("patch", plural(workload.kind), "PATCH", path, body, fence)
