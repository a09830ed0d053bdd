"""Workloads and the containers kerf sizes (app/model/workloads.py)."""

from __future__ import annotations

from app.model.workloads import Workload, target_containers, target_statuses
from app.store import slim

TEMPLATE = {
    "initContainers": [
        {"name": "setup", "image": "busybox", "resources": {"requests": {"cpu": "1"}}},
        {
            "name": "proxy",
            "image": "envoy",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "50m"}},
        },
    ],
    "containers": [{"name": "app", "image": "web", "resources": {"requests": {"cpu": "100m"}}}],
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"replicas": 2, "template": {"spec": TEMPLATE}},
}


def test_a_workloads_template_values_include_its_sidecars_not_plain_init_containers() -> None:
    for obj in (DEPLOYMENT, slim.workload(DEPLOYMENT)):
        workload = Workload.from_object(obj)
        assert sorted(workload.containers) == ["app", "proxy"]
        assert workload.containers["proxy"]["requests"] == {"cpu": "50m"}


def test_a_sidecars_status_counts_a_plain_init_containers_does_not() -> None:
    pod = {
        "spec": TEMPLATE,
        "status": {
            "containerStatuses": [{"name": "app"}],
            "initContainerStatuses": [{"name": "setup"}, {"name": "proxy"}],
        },
    }
    assert sorted(target_containers(pod)) == ["app", "proxy"]
    assert [s["name"] for s in target_statuses(pod)] == ["app", "proxy"]
