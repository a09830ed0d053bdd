"""The API calls a converging workload costs (issue 8 part 8): every call the reconciler
makes is counted by verb and resource, and the calls of one rollout are pinned down so a
redundant write is caught."""

from __future__ import annotations

from typing import Any

from app.models import parse_object
from app.owners import WorkloadRef
from app.view import ClusterView
from reconciler.api import RecordingWriter
from reconciler.metrics import reconciler_metrics
from reconciler.reconcile import WorkloadReconciler, _Pass

TARGET = {"cpu": "250m", "memory": "256Mi"}
REF = WorkloadRef("Deployment", "shop", "web")


class SendingWriter(RecordingWriter):
    """Writes that reach a cluster, as far as the reconciler can tell."""

    sends = True


def record_at(version: str) -> Any:
    return parse_object(
        {
            "apiVersion": "rightsizing.kubex.ai/v1alpha1",
            "kind": "RightsizingRecommendation",
            "metadata": {"name": "deployment-web", "namespace": "shop", "resourceVersion": version},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        }
    )


def test_a_record_created_then_written_waits_for_the_written_version() -> None:
    # The create answers version 7 (no status: the status subresource ignores it), the
    # status write 8. A view that has the record at 7 would decide without the status
    # just written and write it (and its events) again.
    reconciler = WorkloadReconciler(
        ClusterView(), SendingWriter(), reconciler_metrics(), webhook_lease=None
    )
    done = _Pass()
    reconciler._wrote(("record", REF.key), "", {"metadata": {"resourceVersion": "7"}}, done)
    reconciler._wrote(("record", REF.key), "7", {"metadata": {"resourceVersion": "8"}}, done)
    workload = {"metadata": {"resourceVersion": "3"}}
    assert reconciler._behind(REF, workload, None)
    assert reconciler._behind(REF, workload, record_at("7"))
    assert not reconciler._behind(REF, workload, record_at("8"))
    assert not reconciler._behind(REF, workload, record_at("7"))  # caught up: forgotten
