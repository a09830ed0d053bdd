"""The cluster view (SPEC §7, §9): state dir loading, indexes, cache invalidation."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.decide import decide_pod
from app.model.owners import WorkloadRef
from app.model.workloads import Workload
from app.policy.plans import policies_for
from app.store.slim import project
from app.store.statedir import LoadError, load_view
from tests.app import builders as b

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "storefront"


def test_storefront_decisions() -> None:
    v = load_view([EXAMPLE], now=b.NOW)
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
    in_prod = Workload.from_object(b.deployment(namespace="prod-eu"))
    in_staging = Workload.from_object(b.deployment(namespace="staging"))
    assert {p.metadata.name for p in policies_for(v, in_prod)} == {"c", "n"}
    assert {p.metadata.name for p in policies_for(v, in_staging)} == set()


def test_node_requests_skip_terminal_pods() -> None:
    running = b.pod("web-7d4b9-a", node="node-a")
    done = b.pod("web-7d4b9-b", node="node-a", phase="Succeeded")
    v = b.view(b.node(), running, done)
    assert v.node_requests("node-a") == (400, 512 * 1024 * 1024)
    v.delete("Pod", b.NS, "web-7d4b9-a")
    assert v.node_requests("node-a") == (0, 0)


def test_node_requests_count_sidecars_init_containers_and_overhead() -> None:
    """What a pod takes from its node, as the kubelet counts it when it admits a pod or a
    resize (and the scheduler when it places one): its sidecars run beside the app for the
    pod's life, a regular init container runs with the sidecars started before it, and a
    RuntimeClass adds its overhead. (kerf counted the app containers only, and sent a real
    kubelet 1.35 an increase it deferred: the node's room was a sidecar's.)"""
    p = b.pod("web-7d4b9-a", node="node-a")  # app: 400m, 512Mi
    p["spec"]["initContainers"] = [
        {"name": "setup", "resources": {"requests": {"cpu": "2", "memory": "64Mi"}}},
        {
            "name": "proxy",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        },
        {"name": "migrate", "resources": {"requests": {"cpu": "300m", "memory": "1Gi"}}},
    ]
    p["spec"]["overhead"] = {"cpu": "50m", "memory": "16Mi"}
    v = b.view(b.node(), p)
    # cpu: max(app + proxy 500m, setup 2, migrate + proxy 400m) + 50m
    # memory: max(app + proxy 640Mi, setup 64Mi, migrate + proxy 1152Mi) + 16Mi
    assert v.node_requests("node-a") == (2050, 1168 * 1024 * 1024)


def test_autoscalers_match_their_target_reference() -> None:
    v = b.view(b.deployment(), b.hpa("web"), b.hpa("api"))
    (hpa,) = v.autoscalers("HorizontalPodAutoscaler", next(iter(v.workloads())))
    assert hpa["spec"]["scaleTargetRef"]["name"] == "web"


def test_unreadable_recommendation_source_keeps_its_rows_and_blocks_proactive() -> None:
    good = b.configmap(b.row(requests={"cpu": "300m", "memory": "256Mi"}))
    v = b.view(*b.base_objects(), b.proactive(), good)
    broken = {**good, "data": {"recommendations.json": "{not json"}}
    v.apply(broken)
    assert any(s.failure for s in v.recommendations("sources"))
    assert "recommendations.json is not JSON" in v.warnings[-1]
    assert (
        v.recommendations("rows", WorkloadRef("Deployment", "shop", "web"))["app"].requests["cpu"]
        == "300m"
    )
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("blocked", "HubUnreachable")
    v.apply(good)
    assert not any(s.failure for s in v.recommendations("sources"))
    assert b.decide(v, b.pod()).outcome == "apply"


def _replicaset(name: str, owner_kind: str, owner_name: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": b.NS,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": owner_kind,
                    "name": owner_name,
                    "controller": True,
                }
            ],
        },
    }


def test_a_replicaset_arriving_after_its_pod_changes_the_kept_owner() -> None:
    p = b.pod()  # names ReplicaSet web-7d4b9, not yet known: the hash label names web
    v = b.view(p)
    assert v.owner_of(p) == WorkloadRef("Deployment", b.NS, "web")
    v.apply(_replicaset("web-7d4b9", "Rollout", "web-canary"))
    assert v.owner_of(p) == WorkloadRef("Rollout", b.NS, "web-canary")
    assert v.pods(WorkloadRef("Rollout", b.NS, "web-canary")) == [project(p)]
    assert v.pods(WorkloadRef("Deployment", b.NS, "web")) == []
    v.delete("ReplicaSet", b.NS, "web-7d4b9")
    assert v.owner_of(p) == WorkloadRef("Deployment", b.NS, "web")
    assert v.pods(WorkloadRef("Deployment", b.NS, "web")) == [project(p)]


def test_a_job_change_changes_the_kept_owner_of_its_pods() -> None:
    p = b.pod("backup-1-x") | {
        "metadata": {
            "name": "backup-1-x",
            "namespace": b.NS,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "backup-1"}],
        }
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "backup-1", "namespace": b.NS},
    }
    v = b.view(p, job)
    assert v.owner_of(p) == WorkloadRef("Job", b.NS, "backup-1")
    owned = {
        **job,
        "metadata": {
            **job["metadata"],
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "CronJob", "name": "backup", "controller": True}
            ],
        },
    }
    v.apply(owned)
    assert v.owner_of(p) == WorkloadRef("CronJob", b.NS, "backup")
    v.delete("Job", b.NS, "backup-1")
    assert v.owner_of(p) == WorkloadRef("Job", b.NS, "backup-1")


def test_a_replaced_pod_is_resolved_again_and_a_pod_outside_the_view_is_resolved() -> None:
    v = b.view(b.pod(), _replicaset("api-7d4b9", "Deployment", "api"))
    moved = b.pod(workload="api")  # same pod name, now from ReplicaSet api-7d4b9
    v.apply(moved)
    assert v.owner_of(moved) == WorkloadRef("Deployment", b.NS, "api")
    outside = b.pod("other", workload="api")
    assert v.owner_of(outside) == WorkloadRef("Deployment", b.NS, "api")
    v.delete("Pod", b.NS, moved["metadata"]["name"])
    v.apply(_replicaset("api-7d4b9", "Rollout", "api"))  # the forgotten pod is not re-added
    assert list(v.pods()) == []
    assert v.owner_of(outside) == WorkloadRef("Rollout", b.NS, "api")


def test_a_decision_follows_the_owner_of_a_late_replicaset() -> None:
    p = b.pod()
    v = b.view(*b.base_objects(), b.static(), p)
    assert b.decide(v, p).owner == WorkloadRef("Deployment", b.NS, "web")
    v.apply(_replicaset("web-7d4b9", "Deployment", "web-v2"))
    assert b.decide(v, p).owner == WorkloadRef("Deployment", b.NS, "web-v2")


def test_node_requests_follow_a_pods_updates_until_it_goes() -> None:
    """What a pod took is taken back from its node's totals when it changes or goes (the
    view computes it again from the pod it had, rather than keeping it per pod)."""
    v = b.view(b.node())
    v.apply(b.pod("web-7d4b9-a", node="node-a"))
    resized = b.pod("web-7d4b9-a", node="node-a", containers={"app": {"requests": {"cpu": "1"}}})
    v.apply(resized)
    assert v.node_requests("node-a") == (1000, 0)
    bad = b.pod("web-7d4b9-b", node="node-a", containers={"app": {"requests": {"cpu": "x"}}})
    v.apply(bad)  # counts nothing (and says why), and takes nothing back when it goes
    assert v.node_requests("node-a") == (1000, 0)
    assert any("web-7d4b9-b" in w for w in v.warnings)
    v.delete("Pod", b.NS, "web-7d4b9-b")
    v.apply(b.pod("web-7d4b9-a", node="node-a", phase="Succeeded"))
    assert v.node_requests("node-a") == (0, 0)
    v.delete("Pod", b.NS, "web-7d4b9-a")
    assert v.node_requests("node-a") == (0, 0)
