"""Container statuses as a kubelet writes them, shared by kubesim's kubelet
(kubesim/kubelet.py) and the real control plane's node agent (devcluster/podstatus.py), so
both backends report containers the same way: pure functions over plain dicts."""

from __future__ import annotations

import hashlib

from kubesim.pods import RESIZABLE
from kubesim.store import Obj, clone


def digest(*parts: str) -> str:
    """A stable hex digest of the parts: image and container IDs that look real."""
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def container_id(uid: str, name: str, restarts: int) -> str:
    """The ID of a pod's container after `restarts` restarts."""
    return f"containerd://{digest(uid, name, str(restarts))}"


#: Reported in a container's status resources as its spec asks, as a kubelet reports it (not
#: resizable: the API server refuses a resize of it)
AS_ASKED = ("ephemeral-storage",)


def applied_resources(container: Obj) -> Obj:
    """The cpu and memory requests and limits a container runs with once actuated, and its
    ephemeral storage as asked."""
    res = container.get("resources") or {}
    out = {}
    for section in ("requests", "limits"):
        values = {
            k: v for k, v in (res.get(section) or {}).items() if k in RESIZABLE or k in AS_ASKED
        }
        if values:
            out[section] = clone(values)
    return out


def new_entry(container: Obj, uid: str, stamp: str, runs: bool) -> Obj:
    """A container's first status: running since `stamp` (app containers and sidecars), or,
    for a plain init container, terminated Completed (it ran before the app started)."""
    image = str(container.get("image", ""))
    entry: Obj = {
        "name": container["name"],
        "image": image,
        "imageID": f"docker.io/library/{image}@sha256:{digest(image)}",
        "containerID": container_id(uid, container["name"], 0),
        "restartCount": 0,
        "started": runs,
        "ready": runs,
        "allocatedResources": clone((container.get("resources") or {}).get("requests") or {}),
        "resources": applied_resources(container),
    }
    if runs:
        entry["state"] = {"running": {"startedAt": stamp}}
    else:
        entry["state"] = {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": stamp,
                "finishedAt": stamp,
                "containerID": entry["containerID"],
            }
        }
    return entry


def restart(entry: Obj, uid: str, stamp: str, reason: str, exit_code: int) -> None:
    """The container ended at `stamp` (`reason`, `exit_code`) and a new one started at once."""
    started = (entry.get("state") or {}).get("running", {}).get("startedAt", stamp)
    entry["lastState"] = {
        "terminated": {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": started,
            "finishedAt": stamp,
            "containerID": entry.get("containerID", ""),
        }
    }
    entry["restartCount"] = int(entry.get("restartCount", 0)) + 1
    entry["containerID"] = container_id(uid, entry["name"], entry["restartCount"])
    entry["state"] = {"running": {"startedAt": stamp}}
    entry["started"] = True


def needs_restart(container: Obj, before: Obj, after: Obj) -> bool:
    """A resize from `before` to `after` changes a resource whose `resizePolicy` says
    RestartContainer."""
    policies = {
        p.get("resourceName"): p.get("restartPolicy") for p in container.get("resizePolicy") or []
    }
    for resource in RESIZABLE:
        changed = any(
            (before.get(s) or {}).get(resource) != (after.get(s) or {}).get(resource)
            for s in ("requests", "limits")
        )
        if changed and policies.get(resource) == "RestartContainer":
            return True
    return False
