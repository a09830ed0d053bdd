"""kubesim evaluates kerf's CRD `x-kubernetes-validations` rules as the real server does:
every rule in manifests/crds compiles, each one passes and fails where it should, and a
custom resource breaking one is refused on create and update."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim.cel import compile_expression, evaluate_rule
from kubesim.crdrules import compile_errors, compile_rules, rule_causes
from kubesim.crds import validate_crd
from kubesim.errors import Cause
from kubesim.schema import prepare

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
GROUP, VERSION = "rightsizing.kubex.ai", "v1alpha1"
FLOOR = "!has(self.floor) || !has(self.ceiling) || quantity(string(self.floor)).compareTo(quantity(string(self.ceiling))) <= 0"
CONTAINER_FLOOR = "!has(self.ceiling) || !has(self.containers) || self.containers.all(c, !has(self.containers[c].floor) || has(self.containers[c].ceiling) || quantity(string(self.containers[c].floor)).compareTo(quantity(string(self.ceiling))) <= 0)"
CONTAINER_CEILING = "!has(self.floor) || !has(self.containers) || self.containers.all(c, !has(self.containers[c].ceiling) || has(self.containers[c].floor) || quantity(string(self.floor)).compareTo(quantity(string(self.containers[c].ceiling))) <= 0)"

#: every distinct rule in kerf's CRDs: values of `self` it accepts, and values it refuses
CASES: dict[str, tuple[list[Any], list[Any]]] = {
    FLOOR: (
        [{}, {"floor": "1"}, {"floor": "500m", "ceiling": 1}, {"floor": "1Gi", "ceiling": "1Gi"}],
        [{"floor": 2, "ceiling": "1500m"}, {"floor": "1Gi", "ceiling": "1000Mi"}],
    ),
    CONTAINER_FLOOR: (
        [
            {"containers": {"app": {"floor": "9"}}},
            {"ceiling": "1", "containers": {"app": {"floor": "9", "ceiling": "10"}}},
            {"ceiling": "1", "containers": {"app": {"floor": "1"}, "side": {"ceiling": "2"}}},
        ],
        [{"ceiling": "1", "containers": {"app": {"floor": "100m"}, "side": {"floor": 2}}}],
    ),
    CONTAINER_CEILING: (
        [
            {"floor": "1", "containers": {"app": {"ceiling": "100m", "floor": "50m"}}},
            {"floor": "1", "containers": {"app": {"ceiling": "1"}}},
        ],
        [{"floor": "1", "containers": {"app": {"ceiling": "999m"}}}],
    ),
    "self.start != self.end": (
        [{"start": "02:00", "end": "04:00"}],
        [{"start": "02:00", "end": "02:00"}],
    ),
    "(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)": (
        [{"operator": "In", "values": ["a"]}, {"operator": "Exists"}],
        [{"operator": "NotIn", "values": []}, {"operator": "Exists", "values": ["a"]}],
    ),
    "!has(self.operation) || self.operation != 'Remove' || !has(self.value)": (
        [{"operation": "Remove"}, {"operation": "Set", "value": "x"}, {}],
        [{"operation": "Remove", "value": "x"}],
    ),
    "!has(self.metricsWindow) || duration(self.metricsWindow) >= duration('1m')": (
        [{}, {"metricsWindow": "1m"}, {"metricsWindow": "10m"}, {"metricsWindow": "1h"}],
        [{"metricsWindow": "59s"}, {"metricsWindow": "0s"}],
    ),
    "!has(self.minPodMetricsAge) || duration(self.minPodMetricsAge) == duration('0s') || "
    "duration(self.minPodMetricsAge) >= duration('1m')": (
        [{}, {"minPodMetricsAge": "0s"}, {"minPodMetricsAge": "1m"}, {"minPodMetricsAge": "15m"}],
        [{"minPodMetricsAge": "30s"}, {"minPodMetricsAge": "1ms"}],
    ),
    "!has(self.gpuReactiveCheckInterval) || "
    "duration(self.gpuReactiveCheckInterval) >= duration('1m')": (
        [{}, {"gpuReactiveCheckInterval": "1m"}, {"gpuReactiveCheckInterval": "5m"}],
        [{"gpuReactiveCheckInterval": "30s"}],
    ),
    "!has(self.learningPeriod) || duration(self.learningPeriod) > duration('0s')": (
        [{}, {"learningPeriod": "1h30m"}, {"learningPeriod": "0.5s"}],
        [{"learningPeriod": "0s"}, {"learningPeriod": "0"}],
    ),
    "!has(self.recommendationReloadInterval) || "
    "duration(self.recommendationReloadInterval) >= duration('1m')": (
        [{}, {"recommendationReloadInterval": "1m"}, {"recommendationReloadInterval": "1h"}],
        [{"recommendationReloadInterval": "30s"}, {"recommendationReloadInterval": "59.9s"}],
    ),
    "!has(self.proposalSyncInterval) || duration(self.proposalSyncInterval) >= duration('1m')": (
        [{}, {"proposalSyncInterval": "1m"}, {"proposalSyncInterval": "5m"}],
        [{"proposalSyncInterval": "30s"}],
    ),
    "!has(self.webhookOwnerResolutionRetryTimeout) || "
    "duration(self.webhookOwnerResolutionRetryTimeout) > duration('0s')": (
        [
            {},
            {"webhookOwnerResolutionRetryTimeout": "1s"},
            {"webhookOwnerResolutionRetryTimeout": "100ms"},
        ],
        [{"webhookOwnerResolutionRetryTimeout": "0s"}],
    ),
    "!has(self.requeueAfter) || duration(self.requeueAfter) >= duration('1s')": (
        [{}, {"requeueAfter": "1s"}, {"requeueAfter": "2m"}],
        [{"requeueAfter": "500ms"}, {"requeueAfter": "0s"}],
    ),
    "self.metadata.name == 'global-config'": (
        [{"metadata": {"name": "global-config"}}],
        [{"metadata": {"name": "other"}}],
    ),
    "self.metadata.name == 'policy-evaluation'": (
        [{"metadata": {"name": "policy-evaluation"}}],
        [{"metadata": {"name": "other"}}],
    ),
}


def _crds() -> list[dict[str, Any]]:
    docs = [yaml.safe_load(path.read_text()) for path in sorted(CRDS.glob("*.yaml"))]
    return [d for d in docs if d.get("kind") == "CustomResourceDefinition"]


def _schema(plural: str) -> dict[str, Any]:
    crd = next(c for c in _crds() if c["spec"]["names"]["plural"] == plural)
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _rules(node: dict[str, Any]) -> set[str]:
    found = {r["rule"] for r in node.get("x-kubernetes-validations") or ()}
    children = list((node.get("properties") or {}).values())
    children += [
        node[k] for k in ("additionalProperties", "items") if isinstance(node.get(k), dict)
    ]
    for child in children:
        found |= _rules(child)
    return found


def test_every_rule_in_kerfs_crds_compiles_and_has_cases_here() -> None:
    crds = _crds()
    assert crds
    for crd in crds:
        assert validate_crd(crd) == [], crd["metadata"]["name"]
    in_crds = set().union(
        *(_rules(c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]) for c in crds)
    )
    # A rule added to app/model/crd.py needs its cases in CASES (and kubesim support).
    assert in_crds == set(CASES)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_rule_accepts_and_refuses_what_it_should(rule: str) -> None:
    node = compile_expression(rule)
    accepted, refused = CASES[rule]
    assert [evaluate_rule(node, value) for value in accepted] == [True] * len(accepted)
    assert [evaluate_rule(node, value) for value in refused] == [False] * len(refused)


def _check(plural: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[Cause]:
    schema = _schema(plural)
    found = prepare(obj, schema)
    return found + rule_causes(obj, schema, compile_rules(schema), old, found)


def _strategy(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AutomationStrategy",
        "metadata": {"name": "s"},
        "spec": spec,
    }


def test_a_failed_rule_names_its_node_with_the_rule_message() -> None:
    spec = {
        "enablement": {
            "memory": {
                "limits": {
                    "floor": "2Gi",
                    "ceiling": "1Gi",
                    "containers": {"app": {"floor": "3Gi", "ceiling": "1Gi"}},
                }
            }
        },
        "scheduling": {
            "inclusionWindows": [
                {"name": "a", "start": "01:00", "end": "02:00"},
                {"name": "b", "start": "03:00", "end": "03:00"},
            ]
        },
    }
    assert _check("automationstrategies", _strategy(spec)) == [
        Cause(
            "FieldValueInvalid",
            "Invalid value: floor must not be above ceiling",
            "spec.enablement.memory.limits",
        ),
        Cause(
            "FieldValueInvalid",
            "Invalid value: floor must not be above ceiling",
            "spec.enablement.memory.limits.containers[app]",
        ),
        Cause(
            "FieldValueInvalid",
            "Invalid value: start and end must differ",
            "spec.scheduling.inclusionWindows[1]",
        ),
    ]


def test_rules_apply_only_where_their_node_is_present() -> None:
    assert _check("automationstrategies", _strategy({})) == []
    assert _check("automationstrategies", _strategy({"enablement": {"cpu": {}}})) == []


def test_a_root_rule_is_reported_on_no_field() -> None:
    obj = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GlobalConfiguration",
        "metadata": {"name": "other"},
        "spec": {},
    }
    [cause] = _check("globalconfigurations", obj)
    assert cause.field == "<nil>"
    assert (
        cause.message
        == "Invalid value: metadata.name must be 'global-config' (a cluster singleton)"
    )


def test_a_rule_that_fails_to_evaluate_refuses_the_object() -> None:
    causes = _check("automationstrategies", _strategy(_requests({"floor": "abc", "ceiling": "1"})))
    assert [c.field for c in causes] == [
        "spec.enablement.cpu.requests.floor",
        "spec.enablement.cpu.requests",
    ]
    assert causes[1].message == (
        'Invalid value: "object": quantities must match the regular expression '
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' evaluating rule: floor must not be above ceiling"
    )


def test_a_blocking_schema_error_skips_the_rules() -> None:
    causes = _check(
        "automationstrategies",
        _strategy(_requests({"floor": "2", "ceiling": "1", "upsize": "yes"})),
    )
    assert [c.reason for c in causes] == ["FieldValueTypeInvalid", "FieldValueInvalid"]
    assert causes[1].field == "<nil>"
    assert "some validation rules were not checked" in causes[1].message


def test_an_update_lets_an_unchanged_failing_value_through() -> None:
    old = _strategy({**_requests({"floor": "2", "ceiling": "1"}), "retainGuaranteedQoS": True})
    prepare(old, _schema("automationstrategies"))  # stored objects are defaulted
    new = _strategy({**_requests({"floor": "2", "ceiling": "1"}), "retainGuaranteedQoS": False})
    assert _check("automationstrategies", new, old) == []
    changed = _strategy(_requests({"floor": "3", "ceiling": "1"}))
    assert [c.field for c in _check("automationstrategies", changed, old)] == [
        "spec.enablement.cpu.requests"
    ]


def _requests(bounds: dict[str, Any]) -> dict[str, Any]:
    return {"enablement": {"cpu": {"requests": bounds}}}


@pytest.fixture
async def strategies(api: client.ApiClient) -> client.CustomObjectsApi:
    crd = next(c for c in _crds() if c["spec"]["names"]["plural"] == "automationstrategies")
    await client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    return client.CustomObjectsApi(api)


async def test_a_replace_breaking_a_rule_is_refused_and_nothing_changes(
    strategies: client.CustomObjectsApi,
) -> None:
    args = (GROUP, VERSION, "default", "automationstrategies")
    created = await strategies.create_namespaced_custom_object(
        *args, _strategy(_requests({"floor": "1"}))
    )
    created["spec"] = _requests({"floor": "1", "ceiling": "500m"})
    with pytest.raises(ApiException) as err:
        await strategies.replace_namespaced_custom_object(*args, "s", created)
    body = json.loads(err.value.body)
    assert (err.value.status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: floor must not be above ceiling",
            "field": "spec.enablement.cpu.requests",
        }
    ]
    stored = await strategies.get_namespaced_custom_object(*args, "s")
    assert "ceiling" not in stored["spec"]["enablement"]["cpu"]["requests"]
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_a_crd_with_a_rule_kubesim_cannot_compile_is_refused_naming_it(
    api: client.ApiClient,
) -> None:
    crd = next(c for c in _crds() if c["spec"]["names"]["plural"] == "globalconfigurations")
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] = [
        {"rule": "self.metadata.name.startsWith('g')"}
    ]
    with pytest.raises(ApiException) as err:
        await client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    body = json.loads(err.value.body)
    assert err.value.status == 422
    [cause] = body["details"]["causes"]
    assert cause["field"] == "spec.validation.openAPIV3Schema.x-kubernetes-validations[0].rule"
    assert cause["message"].startswith(
        "Invalid value: \"self.metadata.name.startsWith('g')\": compilation failed: "
        "method startsWith() is not supported by kubesim"
    )


def test_compile_errors_walk_every_node() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "additionalProperties": {
                    "type": "array",
                    "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self + 1"}]},
                },
            }
        },
    }
    [cause] = compile_errors(schema, "s")
    assert (
        cause.field
        == "s.properties[spec].additionalProperties.items.x-kubernetes-validations[0].rule"
    )


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        ({"rule": "self == oldSelf"}, "transition rules (oldSelf) are not supported"),
        ({"rule": "self.a", "messageExpression": "'x'"}, "messageExpression is not supported"),
        ({"rule": "self.a", "fieldPath": ".a"}, "fieldPath is not supported"),
    ],
)
def test_rule_features_kubesim_does_not_model_are_compile_errors(
    rule: dict[str, Any], why: str
) -> None:
    schema = {"type": "object", "x-kubernetes-validations": [rule]}
    [cause] = compile_errors(schema, "s")
    assert why in cause.message
