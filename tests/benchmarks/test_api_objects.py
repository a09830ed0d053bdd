"""The generated cluster as created through a real API server (`--cluster real`)."""

from __future__ import annotations

import orjson

from app.model.recommendations import SOURCE_LABEL
from benchmarks.api_objects import WORKLOAD_LABEL, api_objects, replicas
from benchmarks.explain import documents, split_rows
from benchmarks.reconciler import side_by_side


def test_replicas_add_up_to_the_generated_pods() -> None:
    for workloads, pods in ((1000, 2000), (25, 35), (7, 3)):
        counts = [replicas(w, workloads=workloads, pods=pods) for w in range(workloads)]
        assert sum(counts) == pods
        # pod p belongs to workload p % workloads
        assert counts == [
            sum(1 for p in range(pods) if p % workloads == w) for w in range(workloads)
        ]


def test_rows_are_split_under_the_limit_and_kept_in_order() -> None:
    rows = [
        {"ownerName": f"svc-{i}", "container": "app", "pad": "x" * (i % 50)} for i in range(500)
    ]
    payloads = split_rows(rows, limit=2_000)
    assert len(payloads) > 1
    assert all(len(p) <= 2_000 for p in payloads)
    assert [r for p in payloads for r in orjson.loads(p)["recommendations"]] == rows


def test_a_row_larger_than_the_limit_is_a_payload_of_its_own() -> None:
    rows = [{"a": "x" * 50}, {"b": 1}]
    assert [orjson.loads(p)["recommendations"] for p in split_rows(rows, limit=40)] == [
        [rows[0]],
        [rows[1]],
    ]


def test_api_objects_leave_nodes_replicasets_and_pods_to_the_cluster() -> None:
    objects = api_objects(workloads=30, pods=45, nodes=3, policies=4, namespaces=5)
    kinds = {o["kind"] for o in objects.objects}
    assert kinds == {
        "AutomationStrategy",
        "StaticPolicy",
        "ProactivePolicy",
        "Deployment",
        "ConfigMap",
    }
    assert [n["metadata"]["name"] for n in objects.namespaces][0] == "kerf-system"
    assert len(objects.namespaces) == 6
    deployments = [o for o in objects.objects if o["kind"] == "Deployment"]
    assert objects.pods == sum(d["spec"]["replicas"] for d in deployments) == 45
    selectors = set()
    for d in deployments:
        selector = d["spec"]["selector"]["matchLabels"]
        assert selector[WORKLOAD_LABEL] == d["metadata"]["name"]
        assert selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
        selectors.add(tuple(sorted(selector.items())))
    assert len(selectors) == len(deployments)  # no two ReplicaSets fight over pods
    configmaps = [o for o in objects.objects if o["kind"] == "ConfigMap"]
    assert configmaps and all(c["metadata"]["labels"][SOURCE_LABEL] == "true" for c in configmaps)


def test_the_generated_rows_are_in_configmaps_an_api_server_stores() -> None:
    from kubesim.defaults import validate_object

    docs = list(documents(workloads=12_000, pods=12_000, nodes=10, policies=10, namespaces=10))
    configmaps = [d for d in docs if d["kind"] == "ConfigMap"]
    assert len(configmaps) > 1  # 12,000 workloads' rows are over 1 MiB
    assert all(validate_object("configmaps", "", c) == [] for c in configmaps)
    rows = [
        r
        for c in configmaps
        for r in orjson.loads(c["data"]["recommendations.json"])["recommendations"]
    ]
    assert len(rows) == len({(r["ownerName"], r["container"]) for r in rows}) > 12_000


def test_side_by_side_shows_both_runs_and_a_dash_for_what_one_lacks() -> None:
    sim = {
        "first_pass": {"writes": 7538, "server_cpu_seconds": {"total": 12.5}},
        "peak_rss_mib": 125.6,
    }
    real = {"first_pass": {"writes": 7600}}
    lines = side_by_side(sim, real)
    assert "kubesim" in lines[0] and "real" in lines[0]
    writes = next(line for line in lines if line.startswith("first pass, writes"))
    assert writes.split()[-2:] == ["7,538", "7,600"]
    server = next(line for line in lines if line.startswith("first pass, server CPU"))
    assert server.split()[-2:] == ["12.5", "—"]
