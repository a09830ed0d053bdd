"""The policy sync (SPEC §1, §3): annotation payloads in both key formats."""

from __future__ import annotations

import re

import orjson

from app.model.annotations import (
    ARGS_KEY,
    decode_payload,
    fixed_key,
    is_recommendation_key,
    parse_key,
    policy_key,
)
from app.model.recommendations import index_rows, parse_rows
from app.model.workloads import Workload
from app.policy.sync import sync_workload
from tests.app import builders as b

WEB = Workload(kind="Deployment", namespace=b.NS, name="web", labels={"app": "web"})


def sync(*policies, multi: bool = False, rows=None, workload: Workload = WEB) -> dict[str, str]:
    return sync_workload(workload, policies, rows or {}, None, multi_policy=multi).annotations


def test_fixed_key_payload_is_the_containers_map() -> None:
    pol = b.static(containers={"app": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}}})
    assert sync(pol) == {
        "static.rightsizing.kubex.ai/desired-resource-requests": '{"app":{"cpu":"250m"}}',
        "static.rightsizing.kubex.ai/desired-resource-limits": '{"app":{"cpu":"500m"}}',
    }


def test_policy_owned_key_payload() -> None:
    pol = b.static("web-static", weight=3)
    out = sync(pol, multi=True)
    key = policy_key("StaticPolicy", b.NS, "web-static", "requests")
    assert list(out) == [key]
    assert re.fullmatch(
        r"static\.rightsizing\.kubex\.ai/h[0-9a-f]{16}-desired-resource-requests", key
    )
    assert len(key.split("/")[1]) <= 63
    assert orjson.loads(out[key]) == {
        "policyKind": "StaticPolicy",
        "policyName": "web-static",
        "policyNamespace": b.NS,
        "policyGeneration": 1,
        "createdAt": "2026-11-01T10:00:00Z",
        "containers": {"app": {"cpu": "250m", "memory": "256Mi"}},
    }
    payload = decode_payload(key, out[key])
    assert payload.created_at is not None and payload.policy_name == "web-static"


def test_prefixes_by_kind() -> None:
    for kind, prefix in [
        ("StaticPolicy", "static"),
        ("ClusterStaticPolicy", "cwstatic"),
        ("ProactivePolicy", "proactive"),
        ("ClusterProactivePolicy", "cwproactive"),
        ("GpuReactivePolicy", "gpureactive"),
        ("ClusterGpuReactivePolicy", "cwgpureactive"),
        ("RollbackPolicy", "rollbackpolicy"),
    ]:
        key = fixed_key(kind, "limits")
        assert key == f"{prefix}.rightsizing.kubex.ai/desired-resource-limits"
        assert parse_key(key).kind == kind  # type: ignore[union-attr]
        hashed = policy_key(kind, "ns", "n", "requests")
        assert parse_key(hashed).hashed  # type: ignore[union-attr]
    assert parse_key("rightsizing.kubex.ai/pause-until") is None
    assert is_recommendation_key(ARGS_KEY)


def test_scope_filters_policies() -> None:
    other_ns = b.static("a", namespace="elsewhere")
    wrong_label = b.static("b", scope={"labelSelector": {"matchLabels": {"app": "api"}}})
    wrong_type = b.static("c", scope={"workloadTypes": ["StatefulSet"]})
    assert sync(other_ns, wrong_label, wrong_type, multi=True) == {}
    cluster_out = b.static(
        "d",
        kind="ClusterStaticPolicy",
        scope={"namespaceSelector": {"operator": "NotIn", "values": ["sh*"]}},
    )
    assert sync(cluster_out, multi=True) == {}
    cluster_in = b.static(
        "e",
        kind="ClusterStaticPolicy",
        scope={"namespaceSelector": {"operator": "In", "values": ["sh*"]}},
    )
    assert len(sync(cluster_in, multi=True)) == 1


def test_scope_containers_restrict_wildcard() -> None:
    pol = b.static(
        containers={"*": {"requests": {"cpu": "100m"}}, "db": {"requests": {"cpu": "200m"}}},
        scope={"containers": ["app", "db"]},
    )
    out = sync(pol)
    assert orjson.loads(out[fixed_key("StaticPolicy", "requests")]) == {
        "app": {"cpu": "100m"},
        "db": {"cpu": "200m"},
    }
    pol = b.static(
        containers={"app": {"requests": {"cpu": "100m"}}, "db": {"requests": {"cpu": "200m"}}},
        scope={"containers": ["db"]},
    )
    assert orjson.loads(sync(pol)[fixed_key("StaticPolicy", "requests")]) == {"db": {"cpu": "200m"}}


def test_proactive_values_come_from_rows() -> None:
    text = orjson.dumps(
        {"recommendations": [b.row(requests={"cpu": "300m"}, limits={"memory": "768Mi"})]}
    )
    rows, warnings = parse_rows(text, "test")
    assert warnings == []
    by_container = index_rows(rows)[("Deployment", b.NS, "web")]
    out = sync(b.proactive(), rows=by_container)
    assert orjson.loads(out[fixed_key("ProactivePolicy", "requests")]) == {"app": {"cpu": "300m"}}
    assert orjson.loads(out[fixed_key("ProactivePolicy", "limits")]) == {"app": {"memory": "768Mi"}}


def test_exactly_one_args_policy_is_published() -> None:
    light = b.args_policy("light", {"*": [{"name": "--a", "value": "1"}]}, weight=1)
    heavy = b.args_policy("heavy", {"app": [{"name": "--b", "operation": "Remove"}]}, weight=9)
    for order in ([light, heavy], [heavy, light]):
        out = sync(*order)
        assert orjson.loads(out[ARGS_KEY]) == {
            "containers": {"app": [{"name": "--b", "operation": "Remove"}]}
        }


def test_args_policy_equal_weight_older_wins() -> None:
    older = b.args_policy("zz", {"*": [{"name": "--old"}]}, created=b.T0)
    newer = b.args_policy("aa", {"*": [{"name": "--new"}]}, created=b.T0.replace(hour=11))
    out = sync(newer, older)
    assert orjson.loads(out[ARGS_KEY])["containers"]["*"][0]["name"] == "--old"


def test_args_policy_outside_scope_is_not_selected() -> None:
    heavy = b.args_policy(
        "heavy",
        {"*": [{"name": "--x"}]},
        weight=9,
        scope={"labelSelector": {"matchLabels": {"app": "api"}}},
    )
    light = b.args_policy("light", {"*": [{"name": "--y"}]}, weight=1)
    assert orjson.loads(sync(heavy, light)[ARGS_KEY])["containers"]["*"][0]["name"] == "--y"
