"""The reconciler's API bodies (reconciler/api.py)."""

from __future__ import annotations

from reconciler.api import resize_body

POD = {
    "spec": {
        "initContainers": [
            {"name": "setup", "image": "busybox"},
            {"name": "proxy", "image": "envoy", "restartPolicy": "Always"},
        ],
        "containers": [{"name": "app", "image": "web"}, {"name": "worker", "image": "web"}],
    }
}
CPU = {"requests": {"cpu": "250m"}}


def test_a_sidecar_is_resized_under_init_containers_an_app_container_under_containers() -> None:
    body = resize_body(POD, {"proxy": CPU, "app": CPU})
    assert body == {
        "spec": {
            "containers": [{"name": "app", "resources": CPU}],
            "initContainers": [{"name": "proxy", "resources": CPU}],
        }
    }


def test_only_the_lists_of_changed_containers_are_sent() -> None:
    assert resize_body(POD, {"worker": CPU}) == {
        "spec": {"containers": [{"name": "worker", "resources": CPU}]}
    }
    assert resize_body(POD, {"proxy": CPU}) == {
        "spec": {"initContainers": [{"name": "proxy", "resources": CPU}]}
    }
