"""manifests/overlays/recommender: the kustomize base plus kerf's own recommender, valid
against the Kubernetes schemas, allowed what it does, and the same as the chart's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from app.model.crd import plural
from kerf.cli import build_parser
from recommender.main import RECOMMENDER_RESOURCES
from tests.test_chart import one, permissions, template
from tests.webhook.test_manifests import render

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / "manifests" / "overlays" / "recommender"
NAMESPACE = "kerf-system"
PROMETHEUS = "http://prometheus.monitoring.svc:9090"
RECOMMENDER_OBJECTS = [
    ("ClusterRole", "kerf-recommender"),
    ("ClusterRoleBinding", "kerf-recommender"),
    ("Deployment", "kerf-recommender"),
    ("Role", "kerf-recommender-lease"),
    ("RoleBinding", "kerf-recommender-lease"),
    ("ServiceAccount", "kerf-recommender"),
]


@pytest.fixture(scope="module")
def overlay() -> list[dict[str, Any]]:
    return render(OVERLAY)


def key(obj: dict[str, Any]) -> tuple[str, str]:
    return (obj["kind"], obj["metadata"]["name"])


def test_the_overlay_is_the_base_plus_the_recommender(overlay: list[dict[str, Any]]) -> None:
    base = {key(o): o for o in render(ROOT / "manifests")}
    added = sorted(k for k in map(key, overlay) if k not in base)
    assert added == RECOMMENDER_OBJECTS
    assert {k: o for k, o in ((key(o), o) for o in overlay) if k in base} == base


def test_every_object_validates_strictly(overlay: list[dict[str, Any]]) -> None:
    version = kubernetes_validate.latest_version()
    for obj in overlay:
        if obj["apiVersion"] == "rightsizing.kubex.ai/v1alpha1":
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")


def test_the_deployment_runs_kerf_recommend_with_flags_it_takes(
    overlay: list[dict[str, Any]],
) -> None:
    deployment = one(overlay, "Deployment", "kerf-recommender")
    assert deployment["metadata"]["namespace"] == NAMESPACE
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "kerf-recommender"
    [container] = pod["containers"]
    assert container["command"] == ["kerf"]
    parsed = build_parser().parse_args(container["args"])
    assert parsed.prometheus == PROMETHEUS
    assert not parsed.once and not parsed.dry_run
    assert parsed.shards == 64
    # The probes ask the port the service listens on.
    [port] = container["ports"]
    assert port["containerPort"] == parsed.metrics_port
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == port["name"]
    assert {e["name"] for e in container["env"]} == {"POD_NAME", "POD_NAMESPACE"}


def test_the_recommender_may_read_all_it_watches_and_write_configmaps(
    overlay: list[dict[str, Any]],
) -> None:
    granted = {(g, r, v) for g, r, v, _ in permissions(overlay, "ClusterRole", "kerf-recommender")}
    for resource in RECOMMENDER_RESOURCES:
        group = resource.api_version.rpartition("/")[0]
        for verb in ("list", "watch"):
            assert (group, plural(resource.kind), verb) in granted, resource.kind
    for verb in ("get", "create", "patch"):
        assert ("", "configmaps", verb) in granted
    lease = permissions(overlay, "Role", "kerf-recommender-lease")
    assert lease == {
        ("coordination.k8s.io", "leases", verb, "*")
        for verb in ("get", "list", "create", "update", "delete")
    }
    assert one(overlay, "Role", "kerf-recommender-lease")["metadata"]["namespace"] == NAMESPACE


@pytest.mark.parametrize(
    ("kind", "name"),
    [("ClusterRole", "kerf-recommender"), ("Role", "kerf-recommender-lease")],
)
def test_its_rbac_is_the_chart_s(overlay: list[dict[str, Any]], kind: str, name: str) -> None:
    chart = template("recommender.enabled=true", f"recommender.prometheus={PROMETHEUS}")
    assert permissions(overlay, kind, name) == permissions(chart, kind, name)
