"""The Kubex kinds kerf stores and does not act on: Kubex's schema and defaults, what is
obviously wrong refused by the models and the CRD alike, read by no decision."""

from __future__ import annotations

from typing import Any

import pytest

from app.kube.informer import WEBHOOK_RESOURCES
from app.model.crd import (
    KINDS,
    STORED_KINDS,
    ClusterCompactionPolicy,
    GpuConsolidationPolicy,
    InvalidObject,
    ObjectPatch,
    StoredKind,
    parse_object,
)
from app.model.workloads import Workload
from app.policy.plans import policies_for
from app.store.view import ClusterView
from reconciler.service import RECONCILER_RESOURCES
from tools.crdgen import validate_against_crd

API = "rightsizing.kubex.ai/v1alpha1"
SCOPE = {"namespaceSelector": {"operator": "In", "values": ["production"]}}
TARGET = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
PATCH = {"metadata": {"labels": {"managed-by": "kubex"}}}
GPU = {"experimental": {"gpuKaiContract": "v1alpha1-2026-07"}, "nodeSelector": {}}


def _obj(kind: str, spec: dict[str, Any], name: str = "p") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if not KINDS[kind].cluster_scoped:
        metadata["namespace"] = "shop"
    return {"apiVersion": API, "kind": kind, "metadata": metadata, "spec": spec}


def test_the_four_kubex_kinds_are_stored_only() -> None:
    assert STORED_KINDS == (
        "ClusterCompactionPolicy",
        "ObjectPatch",
        "ClusterObjectPatch",
        "GpuConsolidationPolicy",
    )
    assert [KINDS[k].cluster_scoped for k in STORED_KINDS] == [True, False, True, True]
    for kind in STORED_KINDS:
        message = KINDS[kind].unsupported_message()  # type: ignore[attr-defined]
        assert message.startswith(
            f"kerf stores {kind} for Kubex compatibility and does not act on it: "
        )
    # The webhook does not read them; the reconciler reads them to tell them once.
    assert not {r.kind for r in WEBHOOK_RESOURCES} & set(STORED_KINDS)
    assert set(STORED_KINDS) <= {r.kind for r in RECONCILER_RESOURCES}


def test_kubexs_defaults() -> None:
    compaction = parse_object(_obj("ClusterCompactionPolicy", {"scope": SCOPE, "descheduler": {}}))
    assert isinstance(compaction, ClusterCompactionPolicy)
    spec = compaction.spec
    assert (spec.enabled, spec.set_labels_by_eviction, spec.weight) == (True, False, 0)
    assert spec.scope.workload_types[:2] == ["Deployment", "StatefulSet"]
    assert spec.descheduler is not None
    assert spec.descheduler.max_no_of_pods_to_evict_total == 1
    patch = parse_object(_obj("ObjectPatch", {"targetRef": TARGET, "patch": PATCH}))
    assert isinstance(patch, ObjectPatch) and patch.spec.retry_amount == 3
    gpu = parse_object(_obj("GpuConsolidationPolicy", GPU))
    assert isinstance(gpu, GpuConsolidationPolicy)
    assert (gpu.spec.utilization_threshold_percent, gpu.spec.requeue_after) == (75, "1m")


@pytest.mark.parametrize(
    ("kind", "spec", "detail"),
    [
        ("ClusterCompactionPolicy", {}, "spec.scope"),
        ("ClusterCompactionPolicy", {"scope": {}}, "spec.scope.namespaceSelector"),
        (
            "ClusterCompactionPolicy",
            {"scope": {**SCOPE, "workloadTypes": ["Pod"]}},
            "spec.scope.workloadTypes",
        ),
        (
            "ClusterCompactionPolicy",
            {"scope": SCOPE, "descheduler": {"highNodeUtilization": {"thresholds": {"cpu": 101}}}},
            "spec.descheduler.highNodeUtilization.thresholds.cpu",
        ),
        (
            "ClusterCompactionPolicy",
            {"scope": SCOPE, "descheduler": {"maxNoOfPodsToEvictPerNode": -1}},
            "spec.descheduler.maxNoOfPodsToEvictPerNode",
        ),
        ("ClusterCompactionPolicy", {"scope": SCOPE, "compact": True}, "spec.compact"),
        ("ObjectPatch", {"targetRef": TARGET}, "spec.patch"),
        ("ObjectPatch", {"targetRef": TARGET, "patch": {}}, "spec.patch"),
        ("ObjectPatch", {"targetRef": {**TARGET, "name": ""}, "patch": PATCH}, "spec.targetRef"),
        ("ClusterObjectPatch", {"patch": PATCH}, "spec.targetRef"),
        ("GpuConsolidationPolicy", {"nodeSelector": {}}, "spec.experimental"),
        (
            "GpuConsolidationPolicy",
            {**GPU, "experimental": {"gpuKaiContract": "yes"}},
            "spec.experimental.gpuKaiContract",
        ),
        (
            "GpuConsolidationPolicy",
            {**GPU, "utilizationThresholdPercent": 0},
            "spec.utilizationThresholdPercent",
        ),
        ("GpuConsolidationPolicy", {**GPU, "requeueAfter": "soon"}, "spec.requeueAfter"),
    ],
)
def test_what_is_obviously_wrong_is_refused(kind: str, spec: dict[str, Any], detail: str) -> None:
    doc = _obj(kind, spec)
    with pytest.raises(InvalidObject, match=detail.replace(".", r"\.")):
        parse_object(doc)
    # The CRD refuses it too (namespaceSelector's requirement, like the CEL rules, is
    # the server's: crdgen's check covers the OpenAPI part).
    if detail != "spec.scope.namespaceSelector":
        assert validate_against_crd(doc), doc


def test_a_requeue_under_a_second_is_refused_by_the_model() -> None:
    # The CRD's CEL rule says the same on the server (tests/kubesim/test_crd_rules.py).
    with pytest.raises(InvalidObject, match="requeueAfter 500ms is under 1s"):
        parse_object(_obj("GpuConsolidationPolicy", {**GPU, "requeueAfter": "500ms"}))


def test_no_decision_reads_a_stored_kind() -> None:
    view = ClusterView()
    view.apply(parse_object(_obj("ClusterCompactionPolicy", {"scope": SCOPE}, name="pack")))
    stored = view.kerf_object("ClusterCompactionPolicy", "", "pack")
    assert isinstance(stored, StoredKind)
    # A cluster kind with a scope, and still not a candidate policy of any namespace.
    assert (
        policies_for(
            view,
            Workload.from_object(
                {"kind": "Deployment", "metadata": {"name": "web", "namespace": "production"}}
            ),
        )
        == []
    )
