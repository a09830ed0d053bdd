"""410 Gone is per resource: the real server's watch cache of a custom resource starts
when its CRD is served, so a watch from an older version is refused in the stream (an
ERROR event carrying a 410 Status, on a 200 answer), while a built-in kind's cache,
started with the server, still replays from the first versions. kerf's informers (the
webhook's and the reconciler's, app/kube/informer.py) list again on that 410."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from app.kube.informer import Informer, api_client_from_config, kerf_resources
from app.store.view import ClusterView
from harness.backend import Backend
from harness.wait import WAIT_S
from tests.conformance.conftest import NamespacedKubectl

RECOMMENDATIONS = "/apis/rightsizing.kubex.ai/v1alpha1/rightsizingrecommendations"


def first_event(kubectl: NamespacedKubectl, path: str) -> dict[str, Any]:
    """The first event of a one-second watch of `path` from resourceVersion 1."""
    out = kubectl("get", "--raw", f"{path}?watch=1&resourceVersion=1&timeoutSeconds=1")
    event: dict[str, Any] = json.loads(out.splitlines()[0])
    return event


def recommendation(name: str) -> str:
    body = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "RightsizingRecommendation",
        "metadata": {"name": name},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
    }
    return json.dumps(body)


@pytest.mark.usefixtures("kerf_crds")
def test_a_watch_from_before_a_custom_resource_was_served_is_gone(
    kubectl: NamespacedKubectl,
) -> None:
    event = first_event(kubectl, RECOMMENDATIONS)
    assert event["type"] == "ERROR"
    status = event["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith("too old resource version: 1 (")


def test_a_watch_of_a_built_in_kind_from_the_first_versions_replays(
    kubectl: NamespacedKubectl,
) -> None:
    event = first_event(kubectl, "/api/v1/namespaces")
    assert event["type"] == "ADDED", event


@pytest.mark.usefixtures("kerf_crds")
async def test_kerf_informer_lists_again_after_a_410(
    backend: Backend, kubectl: NamespacedKubectl
) -> None:
    kubectl("create", "-f", "-", stdin=recommendation("relisted"))
    [resource] = [r for r in kerf_resources() if r.kind == "RightsizingRecommendation"]
    view = ClusterView()
    async with await api_client_from_config(backend.kubeconfig) as api:
        informer = Informer(resource, api, view)
        informer.resource_version = "1"  # as if resuming a watch from long ago
        task = asyncio.create_task(informer.run())
        try:
            deadline = time.monotonic() + WAIT_S
            while not (
                informer.listed
                and view.kerf_object("RightsizingRecommendation", kubectl.namespace, "relisted")
            ):
                assert time.monotonic() < deadline, "the informer did not list again"
                await asyncio.sleep(0.1)
        finally:
            task.cancel()
    # Listed, not replayed: the 410 made it drop the version and list.
    assert informer.resource_version is not None
    assert int(informer.resource_version) > 1
