"""Discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/G/V`) and `/version`."""

from __future__ import annotations

from typing import Any

from kubesim.resources import ALL_VERBS, Registry, ResourceType

KUBE_VERSION = {
    "major": "1",
    "minor": "35",
    "gitVersion": "v1.35.0-kubesim",
    "gitCommit": "kubesim",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "resize": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "eviction": ["create"],
    "binding": ["create"],
    "finalize": ["update"],
}

# Subresources whose body is another group's kind say so, as the real server does:
# kubectl drain evicts only when pods/eviction names policy's group and version.
_SUBRESOURCE_KINDS: dict[str, dict[str, str]] = {
    "eviction": {"group": "policy", "version": "v1", "kind": "Eviction"},
    "scale": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
    "binding": {"kind": "Binding"},
}


def api_versions(server_address: str) -> dict[str, Any]:
    """`GET /api`."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    """`GET /apis`."""
    groups = [_group(g, vs) for g, vs in registry.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, name: str) -> dict[str, Any] | None:
    """`GET /apis/G`, or None when the group is not served."""
    versions = registry.group_versions().get(name)
    if not versions or not name:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def _entry(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(ALL_VERBS),
        "storageVersionHash": "",
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    return entry


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    """`GET /api/v1` or `GET /apis/G/V`, or None when not served."""
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        resources.append(_entry(rt))
        for sub in rt.subresources:
            entry = {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": _SUBRESOURCE_VERBS[sub],
            }
            entry.update(_SUBRESOURCE_KINDS.get(sub, {}))
            resources.append(entry)
    gv = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }
