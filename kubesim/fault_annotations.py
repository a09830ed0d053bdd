"""Pod annotations that inject node-side faults through the API alone (SPEC §10).

kubesim's kubelet acts them out on every step; devcluster's node agent (the same keys,
`devcluster/podstatus.py`) does on the real control plane, so a test written against one
runs against the other. `<container>` names an app container or a sidecar.

- `sim.kerf.dev/oom-kill=<container>`: that container is OOM-killed once per new value
  (`<container>/2`, `<container>/3`, … kill it again): `restartCount` + 1,
  `lastState.terminated` reason `OOMKilled`, exit code 137, `finishedAt` now; it restarts
  at once. The kubelet remembers, per pod uid, the value it acted on; removing the
  annotation forgets it.
- `sim.kerf.dev/crash-loop=<container>[,<container>…]`: the container fails
  (`lastState.terminated` reason `Error`, exit code 1) and waits in `CrashLoopBackOff`,
  not ready, failing again after each back-off (10 s doubling, at most 5 min, on the
  simulator's clock), until the annotation no longer names it; then it runs again.
- `sim.kerf.dev/unready=<container>[,<container>…]`: its readiness fails (`ready: false`,
  pod `Ready` and `ContainersReady` False, reason `ContainersNotReady`) until removed.
- `sim.kerf.dev/resize=Deferred|Infeasible`: while present, the node answers the pod's
  pending resizes so (`PodResizePending` with that reason and a message naming the
  annotation), as `Kubelet.resize_verdicts` does for tests.
- `sim.kerf.dev/resize=Error`: while present, the node refuses to actuate the pod's pending
  resizes as a kubelet refuses a memory limit below the container's current usage
  (`PodResizeInProgress` reason `Error`, the kubelet's message, the old resources kept,
  retried on every step). kubesim's usage annotation stands for a container's peak, so its
  kubelet does not refuse a limit below it by itself (docs/devcluster.md).
"""

from __future__ import annotations

from datetime import timedelta

OOM_KILL = "sim.kerf.dev/oom-kill"
CRASH_LOOP = "sim.kerf.dev/crash-loop"
UNREADY = "sim.kerf.dev/unready"
RESIZE = "sim.kerf.dev/resize"

#: The node's message for a verdict the `resize` annotation forces (devcluster's wording).
FORCED_RESIZE = {
    "Deferred": f"Node didn't have enough resource: the resize waits (annotation {RESIZE}=Deferred)",
    "Infeasible": f"Node didn't have enough capacity: the resize can never fit (annotation {RESIZE}=Infeasible)",
}

#: The kubelet's refusal that `resize=Error` forces, in its words (kubelet 1.35).
RESIZE_ERROR = (
    "cannot decrease memory limits: attempting to set pod memory limit below current usage "
    f"(annotation {RESIZE}=Error)"
)


def forced_error(annotations: dict[str, str] | None) -> str | None:
    """The kubelet's refusal message while `resize=Error` is set, else None."""
    return RESIZE_ERROR if ((annotations or {}).get(RESIZE) or "").strip() == "Error" else None


CRASH_BACKOFF_BASE = timedelta(seconds=10)
CRASH_BACKOFF_CAP = timedelta(minutes=5)


def names(value: str | None) -> set[str]:
    """The container names a `crash-loop` or `unready` value lists (comma-separated)."""
    return {n.strip() for n in (value or "").split(",") if n.strip()}


def oom_target(value: str) -> str:
    """The container an `oom-kill` value names (`app/2` is `app`)."""
    return value.split("/", 1)[0].strip()


def crash_backoff(failures: int) -> timedelta:
    """The kubelet's wait after `failures` consecutive crash-loop failures."""
    return min(CRASH_BACKOFF_BASE * 2 ** max(failures - 1, 0), CRASH_BACKOFF_CAP)
