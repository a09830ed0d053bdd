"""The cluster view (SPEC §7, §9): state dir loading, indexes, cache invalidation."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.decide import decide_pod
from app.owners import WorkloadRef
from app.statedir import LoadError, load_view
from tests.app import builders as b

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "storefront"


def test_storefront_decisions() -> None:
    v = load_view([EXAMPLE])
    by_name = {p["metadata"]["name"]: p for p in v.pods()}
    web = decide_pod(v, by_name["web-7d4b9-new01"], now=b.NOW, path="admission")
    assert (web.outcome, web.method) == ("apply", "admission")
    assert web.values == {
        "app": {
            "requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        }
    }
    assert {s.policy_name for s in web.selected} == {"web-static"}
    api = decide_pod(v, by_name["api-5f6c7-xyz12"], now=b.NOW, path="running")
    assert (api.outcome, api.method) == ("apply", "inPlace")
    assert api.values == {
        "api": {"requests": {"cpu": "300m", "memory": "384Mi"}, "limits": {"memory": "768Mi"}}
    }


def test_storefront_owner_resolution() -> None:
    v = load_view([EXAMPLE])
    owners = {p["metadata"]["name"]: v.owner_of(p) for p in v.pods()}
    assert owners["web-7d4b9-abcde"].key == ("Deployment", "shop", "web")  # type: ignore[union-attr]
    assert owners["api-5f6c7-xyz12"].key == ("Deployment", "shop", "api")  # type: ignore[union-attr]


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Widget\napiVersion: v1\nmetadata: {name: w}\n")
    with pytest.raises(LoadError, match=r"bad\.yaml.*unknown kind 'Widget'"):
        load_view([tmp_path])
    bad.write_text("a: [\n")
    with pytest.raises(LoadError, match=r"bad\.yaml.*invalid YAML"):
        load_view([tmp_path])


def test_policy_change_invalidates_the_cached_plan() -> None:
    v = b.view(*b.base_objects(), b.static())
    assert b.decide(v, b.pod()).values["app"]["requests"]["cpu"] == "250m"
    v.apply(b.static(containers={"app": {"requests": {"cpu": "300m"}}}))
    assert b.decide(v, b.pod()).values["app"]["requests"]["cpu"] == "300m"
    v.delete("StaticPolicy", b.NS, "web-static")
    assert b.decide(v, b.pod()).reason == "NoMatchingPolicy"


def test_new_recommendations_invalidate_the_cached_plan() -> None:
    v = b.view(*b.base_objects(), b.proactive())
    assert b.decide(v, b.pod()).reason == "NoMatchingPolicy"
    v.apply(b.configmap(b.row()))
    assert b.decide(v, b.pod()).outcome == "apply"


def test_cluster_policy_index_follows_namespace_selector() -> None:
    v = b.view(
        b.static(
            "c",
            kind="ClusterStaticPolicy",
            scope={"namespaceSelector": {"operator": "In", "values": ["prod-*"]}},
        ),
        b.static("n", namespace="prod-eu"),
    )
    assert {p.metadata.name for p in v.policies_for_namespace("prod-eu")} == {"c", "n"}
    assert {p.metadata.name for p in v.policies_for_namespace("staging")} == set()


def test_node_requests_skip_terminal_pods() -> None:
    running = b.pod("web-7d4b9-a", node="node-a")
    done = b.pod("web-7d4b9-b", node="node-a", phase="Succeeded")
    v = b.view(b.node(), running, done)
    assert v.node_requests("node-a") == (400, 512 * 1024 * 1024)
    v.delete("Pod", b.NS, "web-7d4b9-a")
    assert v.node_requests("node-a") == (0, 0)


def test_hpas_for_matches_scale_target() -> None:
    v = b.view(b.deployment(), b.hpa("web"), b.hpa("api"))
    (hpa,) = v.hpas_for(next(iter(v.workloads())))
    assert hpa["spec"]["scaleTargetRef"]["name"] == "web"


def test_unreadable_recommendation_source_keeps_its_rows_and_blocks_proactive() -> None:
    good = b.configmap(b.row(requests={"cpu": "300m", "memory": "256Mi"}))
    v = b.view(*b.base_objects(), b.proactive(), good)
    broken = {**good, "data": {"recommendations.json": "{not json"}}
    v.apply(broken)
    assert v.recommendations_reachable is False
    assert "recommendations.json is not JSON" in v.warnings[-1]
    assert v.rows_for(WorkloadRef("Deployment", "shop", "web"))["app"].requests["cpu"] == "300m"
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("blocked", "HubUnreachable")
    v.apply(good)
    assert v.recommendations_reachable is True
    assert b.decide(v, b.pod()).outcome == "apply"
