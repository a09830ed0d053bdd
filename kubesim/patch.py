"""The three patch formats the API accepts: JSON patch, JSON merge patch, strategic merge.

Strategic merge patch needs each list's merge key. The real server reads them from the
Go types; here a table covers the lists of the built-in kinds kerf and kubectl touch
(containers by name, env by name, conditions by type, ...). Lists not in the table are
replaced, which is also the real default for lists without a patch strategy.
"""

from __future__ import annotations

from typing import Any

import jsonpatch

from kubesim.errors import ApiError, bad_request

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "readinessGates": "conditionType",
    "resizePolicy": "resourceName",
    "taints": "key",
    "addresses": "type",
}
# Lists of scalars merged as sets (patchStrategy "merge" on a primitive list).
_SET_LISTS = {"finalizers"}
_CONTAINER_LISTS = {"containers", "initContainers", "ephemeralContainers"}


def _merge_key(path: tuple[str, ...]) -> str | None:
    field = path[-1]
    if field == "ports":
        return "containerPort" if len(path) > 1 and path[-2] in _CONTAINER_LISTS else "port"
    return _MERGE_KEYS.get(field)


def apply_json_patch(doc: dict[str, Any], ops: Any) -> dict[str, Any]:
    """Apply an RFC 6902 patch; failures are 422 like the real server's."""
    if not isinstance(ops, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    try:
        return jsonpatch.apply_patch(doc, ops)
    except (
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
        KeyError,
        IndexError,
        TypeError,
    ) as exc:
        raise ApiError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
        ) from exc


def apply_merge_patch(doc: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch (null deletes, objects merge, the rest replaces)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(doc) if isinstance(doc, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def apply_strategic_patch(doc: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Apply a strategic merge patch, honouring the `$patch`, `$retainKeys`,
    `$setElementOrder/` and `$deleteFromPrimitiveList/` directives kubectl sends."""
    if not isinstance(patch, dict):
        raise bad_request("strategic merge patch must be a JSON object")
    merged = _merge_map(doc, patch, ())
    return merged if merged is not None else {}


def _strip(value: Any) -> Any:
    """A patch value used as-is (no original to merge with): drop directives."""
    if isinstance(value, dict):
        if value.get("$patch") == "delete":
            return None
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$") and v is not None}
    if isinstance(value, list):
        return [s for s in (_strip(v) for v in value) if s is not None]
    return value


def _merge_map(
    original: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...]
) -> dict[str, Any] | None:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return _strip(patch)
    result = dict(original)
    orders: dict[str, list[Any]] = {}
    removals: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value
        elif key.startswith("$deleteFromPrimitiveList/"):
            removals[key.split("/", 1)[1]] = value
        elif key.startswith("$"):
            continue
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            merged = _merge_map(current if isinstance(current, dict) else {}, value, (*path, key))
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            current = result.get(key)
            result[key] = _merge_list(
                current if isinstance(current, list) else [], value, (*path, key)
            )
        else:
            result[key] = value
    for key, values in removals.items():
        if isinstance(result.get(key), list):
            result[key] = [v for v in result[key] if v not in values]
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            result[key] = _reorder(result[key], order, _merge_key((*path, key)))
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(original: list[Any], patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return _strip(
            [i for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
        )
    field = path[-1]
    if field in _SET_LISTS:
        return original + [v for v in patch if v not in original]
    key = _merge_key(path)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return _strip(patch)
    result = list(original)
    for item in patch:
        if key not in item:
            # The real server's words (an error with no reason: kubectl shows it plain).
            raise ApiError(
                500, "", f"map: {_go_map(item)} does not contain declared merge key: {key}"
            )
        idx = next(
            (
                n
                for n, cur in enumerate(result)
                if isinstance(cur, dict) and cur.get(key) == item.get(key)
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if idx is not None:
                result.pop(idx)
            continue
        if idx is None:
            result.append(_strip(item))
        else:
            merged = _merge_map(result[idx], item, path)
            if merged is None:
                result.pop(idx)
            else:
                result[idx] = merged
    return result


def _go_map(item: dict[str, Any]) -> str:
    """A map as Go's fmt prints it (`map[k:v ...]`, keys sorted)."""
    return "map[" + " ".join(f"{k}:{item[k]}" for k in sorted(item)) + "]"


def _reorder(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    def ident(item: Any) -> Any:
        return item.get(key) if key and isinstance(item, dict) else item

    wanted = [ident(o) for o in order]
    ranked = [
        (wanted.index(ident(i)) if ident(i) in wanted else len(wanted), n, i)
        for n, i in enumerate(items)
    ]
    return [i for _, _, i in sorted(ranked, key=lambda t: (t[0], t[1]))]
