"""Leases with optimistic concurrency, and CRDs with schema validation and defaults."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

GROUP, VERSION, PLURAL = "rightsizing.kubex.ai", "v1alpha1", "staticpolicies"

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {
            "plural": PLURAL,
            "singular": "staticpolicy",
            "kind": "StaticPolicy",
            "listKind": "StaticPolicyList",
        },
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"}
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["automationStrategyRef"],
                                "properties": {
                                    "automationStrategyRef": {
                                        "type": "object",
                                        "required": ["name"],
                                        "properties": {"name": {"type": "string", "minLength": 1}},
                                    },
                                    "mode": {
                                        "type": "string",
                                        "enum": ["auto", "audit"],
                                        "default": "auto",
                                    },
                                    "weight": {"type": "integer", "minimum": 0, "default": 0},
                                    "scope": {
                                        "type": "object",
                                        "default": {},
                                        "properties": {
                                            "containers": {
                                                "type": "array",
                                                "items": {"type": "string"},
                                            }
                                        },
                                    },
                                    "resources": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {"phase": {"type": "string"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


def policy(name: str, **spec) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "StaticPolicy",
        "metadata": {"name": name},
        "spec": {"automationStrategyRef": {"name": "s"}, **spec},
    }


async def test_lease_optimistic_concurrency(api: client.ApiClient) -> None:
    coord = client.CoordinationV1Api(api)
    lease = await coord.create_namespaced_lease(
        "default",
        {"metadata": {"name": "kerf"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}},
    )
    mine = await coord.read_namespaced_lease("kerf", "default")
    theirs = await coord.read_namespaced_lease("kerf", "default")
    mine.spec.holder_identity = "b"
    await coord.replace_namespaced_lease("kerf", "default", mine)
    theirs.spec.holder_identity = "c"
    with pytest.raises(ApiException) as err:
        await coord.replace_namespaced_lease("kerf", "default", theirs)
    assert err.value.status == 409
    final = await coord.read_namespaced_lease("kerf", "default")
    assert final.spec.holder_identity == "b"
    assert int(final.metadata.resource_version) > int(lease.metadata.resource_version)


@pytest.fixture
async def crd(api: client.ApiClient) -> client.CustomObjectsApi:
    ext = client.ApiextensionsV1Api(api)
    created = await ext.create_custom_resource_definition(CRD)
    assert {c.type for c in created.status.conditions} == {"Established", "NamesAccepted"}
    return client.CustomObjectsApi(api)


async def test_crd_serves_kind_with_defaults_and_pruning(
    crd: client.CustomObjectsApi, api: client.ApiClient
) -> None:
    body = policy("p1")
    body["spec"]["unknown"] = "dropped"
    body["spec"]["resources"] = {"containers": {"app": {"requests": {"cpu": "1"}}}}
    created = await crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)
    assert (
        created["spec"]["mode"] == "auto"
        and created["spec"]["weight"] == 0
        and created["spec"]["scope"] == {}
    )
    assert "unknown" not in created["spec"]
    assert created["spec"]["resources"] == {"containers": {"app": {"requests": {"cpu": "1"}}}}
    assert created["metadata"]["generation"] == 1
    listed = await crd.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["p1"]
    resources = await client.ApisApi(api).get_api_versions()
    assert GROUP in {g.name for g in resources.groups}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"mode": "bad"},
            'StaticPolicy.rightsizing.kubex.ai "p" is invalid: spec.mode: Unsupported value: "bad": supported values: "auto", "audit"',
        ),
        (
            {"weight": -1},
            'StaticPolicy.rightsizing.kubex.ai "p" is invalid: spec.weight: Invalid value: -1: spec.weight in body should be greater than or equal to 0',
        ),
        (
            {"weight": "x"},
            'StaticPolicy.rightsizing.kubex.ai "p" is invalid: spec.weight: Invalid value: "string": spec.weight in body must be of type integer: "x"',
        ),
        (
            {"automationStrategyRef": {}},
            'StaticPolicy.rightsizing.kubex.ai "p" is invalid: spec.automationStrategyRef.name: Required value',
        ),
    ],
)
async def test_crd_schema_validation(
    crd: client.CustomObjectsApi, spec: dict, expected: str
) -> None:
    with pytest.raises(ApiException) as err:
        await crd.create_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, policy("p", **spec)
        )
    assert err.value.status == 422
    body = json.loads(err.value.body)
    assert body["reason"] == "Invalid" and body["message"] == expected


async def test_crd_missing_required_spec_field(crd: client.CustomObjectsApi) -> None:
    body = policy("p")
    del body["spec"]["automationStrategyRef"]
    with pytest.raises(ApiException) as err:
        await crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)
    assert "spec.automationStrategyRef: Required value" in json.loads(err.value.body)["message"]


async def test_crd_status_subresource_and_generation(crd: client.CustomObjectsApi) -> None:
    # As the real server: with a status subresource, a create ignores the status (a new
    # object's status takes a second call, to the subresource).
    created = await crd.create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, {**policy("p"), "status": {"phase": "Applied"}}
    )
    assert "status" not in created
    obj = await crd.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "p",
        {"status": {"phase": "Applied"}},
        _content_type="application/merge-patch+json",
    )
    assert "status" not in obj
    obj = await crd.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "p",
        {"status": {"phase": "Applied"}},
        _content_type="application/merge-patch+json",
    )
    assert obj["status"] == {"phase": "Applied"} and obj["metadata"]["generation"] == 1
    obj = await crd.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "p",
        {"spec": {"weight": 3}},
        _content_type="application/merge-patch+json",
    )
    assert obj["metadata"]["generation"] == 2 and obj["status"] == {"phase": "Applied"}


async def test_crd_rejects_strategic_merge_patch(crd: client.CustomObjectsApi) -> None:
    await crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, policy("p"))
    with pytest.raises(ApiException) as err:
        await crd.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "default",
            PLURAL,
            "p",
            {"spec": {"weight": 3}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert err.value.status == 415


async def test_deleting_crd_removes_kind(
    crd: client.CustomObjectsApi, api: client.ApiClient
) -> None:
    await crd.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, policy("p"))
    await client.ApiextensionsV1Api(api).delete_custom_resource_definition(f"{PLURAL}.{GROUP}")
    with pytest.raises(ApiException) as err:
        await crd.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
    assert err.value.status == 404
