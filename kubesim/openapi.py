"""Minimal OpenAPI documents, enough for kubectl's validation and apply paths.

kubectl 1.35 downloads `/openapi/v2` (protobuf) before validating and asks `/openapi/v3`
whether each kind's PATCH accepts `fieldValidation`. Serving an empty v2 document and v3
documents that list every kind's PATCH with that parameter makes kubectl leave validation
to the server and build strategic merge patches from its compiled-in types, as it does for
kinds without a published schema. No object schemas are published.
"""

from __future__ import annotations

from typing import Any

from kubesim.discovery import KUBE_VERSION
from kubesim.resources import Registry, ResourceType

# The media type the real server answers with. Clients still ask for the older
# `...spec.v2@v1.0+protobuf`, but `@` is not valid in a media subtype, so answering with
# it makes Go's mime parser (and so kubectl) fail.
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def v2_json() -> dict[str, Any]:
    """The v2 document for JSON clients: no paths, no definitions."""
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION["gitVersion"]},
        "paths": {},
        "definitions": {},
    }


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def v3_root(registry: Registry) -> dict[str, Any]:
    """`GET /openapi/v3`: one entry per served group/version."""
    paths = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            path = _gv_path(group, version)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}"}
    return {"paths": paths}


def _item_path(rt: ResourceType) -> str:
    prefix = "/" + _gv_path(rt.group, rt.version)
    scope = "/namespaces/{namespace}" if rt.namespaced else ""
    return f"{prefix}{scope}/{rt.plural}/{{name}}"


def v3_group_version(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    """`GET /openapi/v3/api/v1` or `/openapi/v3/apis/G/V`, or None when not served."""
    types = registry.in_group_version(group, version)
    if not types:
        return None
    paths = {}
    for rt in types:
        paths[_item_path(rt)] = {
            "patch": {
                "operationId": f"patch{rt.kind}",
                "x-kubernetes-group-version-kind": {
                    "group": rt.group,
                    "version": rt.version,
                    "kind": rt.kind,
                },
                "parameters": [
                    {
                        "name": "fieldValidation",
                        "in": "query",
                        "schema": {"type": "string", "uniqueItems": True},
                    },
                    {
                        "name": "dryRun",
                        "in": "query",
                        "schema": {"type": "string", "uniqueItems": True},
                    },
                ],
                "responses": {"200": {"description": "OK"}},
            }
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }
