"""Storing an analysis: one labelled ConfigMap per namespace, written only when its rows
change, with a merge patch of kerf's keys only (its labels and `recommendations.json`;
other keys and labels of the object are the user's). The stored object is read before each
write (once a run per namespace): the cluster view keeps only parsed rows."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import aiohttp
from kubernetes_asyncio import client

from app.kube.errors import ApiStatusError
from app.kube.leader import Fence
from app.kube.transport import ApiTransport
from app.model.owners import WorkloadRef
from app.model.patch_types import PatchType
from app.model.recommendations import DATA_KEY, SOURCE_LABEL
from app.recommend.rows import (
    CONFIGMAP_NAME,
    Row,
    changed,
    document,
    existing_rows,
    merged_rows,
)
from recommender.analyze import Analysis
from recommender.metrics import RecommenderMetrics

logger = logging.getLogger("kerf.recommender")

#: An unchanged recommendation is rewritten once a day, so its analysis time stays fresh.
REFRESH_AFTER = timedelta(hours=24)
WriteResult = Literal["created", "patched", "unchanged", "error"]


@dataclass(frozen=True, slots=True)
class Plan:
    """The document one namespace's ConfigMap should hold, and whether it must be written."""

    namespace: str
    rows: list[Row]
    exists: bool
    write: bool


def namespaces(analysis: Analysis) -> dict[str, tuple[list[Row], list[WorkloadRef]]]:
    """Per namespace of the view's workloads: this run's rows, and the workloads refused
    this run (their stored rows are kept). Empty when the run learned nothing."""
    if analysis.failure is not None:
        return {}
    out: dict[str, tuple[list[Row], list[WorkloadRef]]] = defaultdict(lambda: ([], []))
    for outcome in analysis.outcomes:
        rows, kept = out[outcome.ref.namespace]
        if outcome.refusal is None:
            rows.extend(outcome.rows)
        else:
            kept.append(outcome.ref)
    return dict(out)


def plan(
    namespace: str,
    stored: Mapping[str, Any] | None,
    new: list[Row],
    kept: list[WorkloadRef],
    now: datetime,
) -> Plan:
    """What one namespace's ConfigMap (`stored`, None when absent) should hold."""
    old = existing_rows(((stored or {}).get("data") or {}).get(DATA_KEY))
    rows = merged_rows(old, new, kept=kept)
    if stored is None:
        return Plan(namespace, rows, exists=False, write=bool(rows))
    labels = (stored.get("metadata") or {}).get("labels") or {}
    write = labels.get(SOURCE_LABEL) != "true" or changed(
        old, rows, refresh_before=now - REFRESH_AFTER
    )
    return Plan(namespace, rows, exists=True, write=write)


def _body(namespace: str, rows: list[Row]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIGMAP_NAME,
            "namespace": namespace,
            "labels": {SOURCE_LABEL: "true", "app.kubernetes.io/managed-by": "kerf"},
        },
        "data": {DATA_KEY: document(rows)},
    }


def _path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps/{CONFIGMAP_NAME}"


async def read_stored(api_client: client.ApiClient, namespace: str) -> dict[str, Any] | None:
    """The namespace's recommender ConfigMap, or None when there is none."""
    try:
        return await ApiTransport(api_client).request("get", "configmaps", "GET", _path(namespace))
    except ApiStatusError as exc:
        if exc.code == 404:
            return None
        raise


async def write_plan(
    api_client: client.ApiClient, plan: Plan, fence: Fence | None = None
) -> WriteResult:
    """Create the ConfigMap, or merge-patch kerf's keys into it; one attempt (the next run
    writes again when this one failed). `fence` is asked just before the write is sent:
    it raises NotLeading when this replica may not write (none: a single run, no leader)."""
    body = _body(plan.namespace, plan.rows)
    transport = ApiTransport(api_client)
    if fence is not None:
        fence("configmaps", plan.namespace)
    if not plan.exists:
        collection = f"/api/v1/namespaces/{plan.namespace}/configmaps"
        await transport.request("create", "configmaps", "POST", collection, body)
        return "created"
    patch = {"metadata": {"labels": body["metadata"]["labels"]}, "data": body["data"]}
    path = _path(plan.namespace)
    await transport.request("patch", "configmaps", "PATCH", path, patch, PatchType.MERGE)
    return "patched"


async def store(
    api_client: client.ApiClient,
    analysis: Analysis,
    metrics: RecommenderMetrics,
    *,
    dry_run: bool = False,
    fence: Fence | None = None,
) -> dict[str, WriteResult]:
    """Write each namespace's ConfigMap that needs it; `dry_run` reads and sends nothing
    but says what it would write. A failed namespace is logged and left for the next run;
    a write the fence refuses (NotLeading) ends the whole run."""
    results: dict[str, WriteResult] = {}
    for namespace, (new, kept) in sorted(namespaces(analysis).items()):
        try:
            stored = await read_stored(api_client, namespace)
            decided = plan(namespace, stored, new, kept, analysis.analyzed_at)
            if not decided.write:
                result: WriteResult = "unchanged"
            elif dry_run:
                result = "patched" if decided.exists else "created"
            else:
                result = await write_plan(api_client, decided, fence)
        except (ApiStatusError, aiohttp.ClientError, TimeoutError, OSError) as exc:
            result = "error"
            logger.warning(
                "writing the recommendations failed",
                extra={"fields": {"namespace": namespace, "error": str(exc)}},
            )
        else:
            if result != "unchanged":
                logger.info(
                    "would write the recommendations" if dry_run else "recommendations written",
                    extra={
                        "fields": {
                            "namespace": namespace,
                            "result": result,
                            "rows": len(decided.rows),
                        }
                    },
                )
        results[namespace] = result
        if not dry_run:
            metrics.writes.labels(result).inc()
    return results
