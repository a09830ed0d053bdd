"""The REST path the reconciler writes an object's status at: a cluster-scoped kerf object
(GlobalConfiguration, ClusterRollbackPolicy) has no namespace segment."""

from __future__ import annotations

from app.model.crd import API_VERSION
from reconciler.api import object_path


def test_a_namespaced_and_a_cluster_scoped_object() -> None:
    assert object_path(API_VERSION, "RightsizingRecommendation", "shop", "deployment-web") == (
        "/apis/rightsizing.kubex.ai/v1alpha1/namespaces/shop/rightsizingrecommendations/"
        "deployment-web"
    )
    assert object_path(API_VERSION, "ClusterRollbackPolicy", "", "all") == (
        "/apis/rightsizing.kubex.ai/v1alpha1/clusterrollbackpolicies/all"
    )
    assert object_path("v1", "Pod", "shop", "web-1") == "/api/v1/namespaces/shop/pods/web-1"
