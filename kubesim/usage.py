"""Simulated container usage: a bad downsize fails the way it fails in a cluster.

A pod may say what its containers use in the annotation `kubesim.kerf.dev/usage`
(copied from its template by the controllers, like every template annotation):

    kubesim.kerf.dev/usage: '{"app": {"cpu": "300m", "memory": "300Mi"}}'

The kubelet acts it out against the resources the container runs with (after an in-place
resize is actuated, the new ones), on the simulator's clock:

- memory usage above the memory limit: the container is OOM-killed `OOM_AFTER` after it
  starts (`lastState.terminated` reason `OOMKilled`, exit code 137, `restartCount` + 1);
  the first kill restarts it at once, later ones wait in `CrashLoopBackOff` (10 s, doubled
  per kill, at most 5 min) before the next start. A raised limit stops the kills.
- CPU usage above the CPU limit: the container is throttled; the throttled share,
  `(usage − limit) / usage`, is written to the pod annotation
  `rightsizing.kubex.ai/cpu-throttling` (`{"app": "0.33"}`), where kerf reads throttling.

Everything is derived from the pod's status and the clock, so a jump of the fake clock
plays out every kill and restart that fell into it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from fractions import Fraction

import orjson

from kubesim.clock import parse_rfc3339, rfc3339
from kubesim.containerstatus import container_id
from kubesim.quantity import QuantityError, parse
from kubesim.store import Obj

log = logging.getLogger(__name__)

USAGE = "kubesim.kerf.dev/usage"
#: Where kerf reads a container's CPU throttling ratio (app.policy.rollback_health.CPU_THROTTLING).
CPU_THROTTLING = "rightsizing.kubex.ai/cpu-throttling"
#: How long a container over its memory limit runs before the kernel kills it.
OOM_AFTER = timedelta(seconds=5)
BACKOFF_BASE = timedelta(seconds=10)
BACKOFF_CAP = timedelta(minutes=5)
#: At most this many kills per container and kubelet step (a huge clock jump stays cheap).
_MAX_EVENTS = 64


def restart_delay(restarts: int) -> timedelta:
    """The wait before the next start after kill number `restarts`: none after the first,
    then 10 s doubling per kill, at most 5 min (the kubelet's crash back-off)."""
    if restarts <= 1:
        return timedelta(0)
    return min(BACKOFF_BASE * 2 ** (restarts - 2), BACKOFF_CAP)


def read_usage(pod: Obj) -> dict[str, dict[str, Fraction]]:
    """{container: {resource: amount}} from the usage annotation; an unreadable annotation
    is logged with the pod's name and ignored (the pod then uses nothing)."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(USAGE)
    if not text:
        return {}
    meta = pod["metadata"]
    try:
        raw = orjson.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("it must be a JSON object of containers")
        return {
            str(name): {str(r): parse(q) for r, q in dict(values).items()}
            for name, values in raw.items()
        }
    except (orjson.JSONDecodeError, QuantityError, TypeError, ValueError) as exc:
        log.warning(
            "kubesim: pod %s/%s: ignoring %s: %s",
            meta.get("namespace"),
            meta.get("name"),
            USAGE,
            exc,
        )
        return {}


def _limit(entry: Obj, container: Obj, resource: str) -> Fraction | None:
    """The limit the container runs with: the kubelet's reported resources, else its spec."""
    resources = entry.get("resources") or container.get("resources") or {}
    value = (resources.get("limits") or {}).get(resource)
    return parse(value) if value is not None else None


def act_out(pod: Obj, now: datetime, skip: set[str] | frozenset[str] = frozenset()) -> None:
    """Apply the pod's usage to its app containers' and sidecars' statuses and to the
    throttling annotation, up to `now` (mutates `pod`; the kubelet writes it). Containers
    in `skip` (crash-looping by a hook or annotation, so not running) keep their state."""
    usage = read_usage(pod)
    if not usage:
        return
    status = pod.get("status") or {}
    statuses = {
        s["name"]: s
        for key in ("initContainerStatuses", "containerStatuses")
        for s in status.get(key) or []
    }
    spec = pod["spec"]
    running = [
        *(c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"),
        *(spec.get("containers") or []),
    ]
    throttled: dict[str, str] = {}
    for container in running:
        name = container["name"]
        entry = statuses.get(name)
        used = usage.get(name)
        if entry is None or used is None or name in skip:
            continue
        memory_limit = _limit(entry, container, "memory")
        over = memory_limit is not None and used.get("memory", Fraction(0)) > memory_limit
        _play_memory(pod, entry, over, now)
        cpu_limit = _limit(entry, container, "cpu")
        cpu = used.get("cpu", Fraction(0))
        if cpu_limit is not None and cpu > cpu_limit:
            throttled[name] = f"{float((cpu - cpu_limit) / cpu):.2f}"
    annotations = pod["metadata"].setdefault("annotations", {})
    if throttled:
        annotations[CPU_THROTTLING] = orjson.dumps(throttled, option=orjson.OPT_SORT_KEYS).decode()
    else:
        annotations.pop(CPU_THROTTLING, None)


def _play_memory(pod: Obj, entry: Obj, over: bool, now: datetime) -> None:
    """Kills, back-off and restarts of one container up to `now`, from its status alone."""
    for _ in range(_MAX_EVENTS):
        last = (entry.get("lastState") or {}).get("terminated") or {}
        restarts = int(entry.get("restartCount") or 0)
        if last.get("reason") == "OOMKilled" and last.get("finishedAt"):
            restart_at = parse_rfc3339(last["finishedAt"]) + restart_delay(restarts)
            if now < restart_at:
                entry["state"] = {
                    "waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": f"back-off {int(restart_delay(restarts).total_seconds())}s "
                        f"restarting failed container={entry['name']} "
                        f"pod={pod['metadata']['name']}_{pod['metadata'].get('namespace', '')}"
                        f"({pod['metadata'].get('uid', '')})",
                    }
                }
                entry["started"] = False
                entry["ready"] = False
                return
            started = restart_at
        else:
            running = (entry.get("state") or {}).get("running") or {}
            started = parse_rfc3339(running["startedAt"]) if running.get("startedAt") else now
        entry["state"] = {"running": {"startedAt": rfc3339(started)}}
        entry["started"] = True
        killed_at = started + OOM_AFTER
        if not over or killed_at > now:
            return
        entry["restartCount"] = restarts + 1
        entry["lastState"] = {
            "terminated": {
                "exitCode": 137,
                "reason": "OOMKilled",
                "startedAt": rfc3339(started),
                "finishedAt": rfc3339(killed_at),
                "containerID": entry.get("containerID", ""),
            }
        }
        entry["containerID"] = container_id(
            pod["metadata"].get("uid", ""), entry["name"], restarts + 1
        )
