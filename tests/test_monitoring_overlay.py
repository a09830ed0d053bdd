"""manifests/overlays/monitoring: the kustomize base plus a PodMonitor per service.

kubernetes-validate has no schema for the Prometheus Operator's CRDs: the base's objects are
validated strictly, the PodMonitors' shape is checked against the pods they select.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from tests.webhook.test_manifests import render

ROOT = Path(__file__).resolve().parents[1]
OVERLAY = ROOT / "manifests" / "overlays" / "monitoring"
MONITORING_API = "monitoring.coreos.com/v1"


@pytest.fixture(scope="module")
def overlay() -> list[dict[str, Any]]:
    return render(OVERLAY)


def key(obj: dict[str, Any]) -> tuple[str, str]:
    return (obj["kind"], obj["metadata"]["name"])


def test_the_overlay_is_the_base_plus_two_pod_monitors(overlay: list[dict[str, Any]]) -> None:
    base = render(ROOT / "manifests")
    monitors = [o for o in overlay if o["apiVersion"] == MONITORING_API]
    assert sorted(key(o) for o in monitors) == [
        ("PodMonitor", "kerf-reconciler"),
        ("PodMonitor", "kerf-webhook"),
    ]
    rest = {key(o): o for o in overlay if o["apiVersion"] != MONITORING_API}
    assert rest == {key(o): o for o in base}


def test_the_base_objects_validate_strictly(overlay: list[dict[str, Any]]) -> None:
    version = kubernetes_validate.latest_version()
    for obj in overlay:
        if obj["apiVersion"] in (MONITORING_API, "rightsizing.kubex.ai/v1alpha1"):
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")


@pytest.mark.parametrize("service", ["kerf-webhook", "kerf-reconciler"])
def test_each_pod_monitor_scrapes_the_metrics_port_of_its_pods(
    overlay: list[dict[str, Any]], service: str
) -> None:
    monitor = next(o for o in overlay if key(o) == ("PodMonitor", service))
    deployment = next(o for o in overlay if key(o) == ("Deployment", service))
    template = deployment["spec"]["template"]
    assert monitor["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= template["metadata"]["labels"].items()
    ports = {p["name"] for c in template["spec"]["containers"] for p in c["ports"]}
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    https = endpoint["port"] == "https"
    assert (endpoint.get("scheme") == "https") == https
    assert set(monitor["spec"]) == {"selector", "podMetricsEndpoints"}


def test_the_reconciler_s_namespace_label_survives_the_scrape(
    overlay: list[dict[str, Any]],
) -> None:
    """kerf_reconciler_report_* carry the workloads' namespace, which the dashboard's
    namespace variable filters on: the target's own `namespace` must not replace it."""
    monitor = next(o for o in overlay if key(o) == ("PodMonitor", "kerf-reconciler"))
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["honorLabels"] is True
