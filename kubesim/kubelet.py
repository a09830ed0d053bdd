"""The kubelet step: runs bound pods (app containers, and init containers: plain ones run
to completion, sidecars run beside the app), acts out in-place resizes of app containers
and sidecars, acts out the `sim.kerf.dev/*` fault annotations (kubesim/fault_annotations.py),
and gives tests hooks to OOM-kill a container, make it crash-loop, fail its readiness, or
end the pod."""

from __future__ import annotations

from datetime import datetime
from fractions import Fraction

import orjson

from kubesim import fault_annotations as fa
from kubesim import pods
from kubesim.apiserver import ApiServer
from kubesim.clock import parse_rfc3339
from kubesim.conditions import drop_condition, get_condition, set_condition
from kubesim.containerstatus import applied_resources, needs_restart, new_entry, restart
from kubesim.errors import not_found
from kubesim.nodes import allocatable, usage
from kubesim.recorder import NORMAL, WARNING, EventRecorder
from kubesim.store import Obj, clone
from kubesim.usage import act_out

_POD_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
#: (status list, spec list), init containers first as the kubelet runs them.
_LISTS = (("initContainerStatuses", "initContainers"), ("containerStatuses", "containers"))


def _amount(resource: str, value: Fraction) -> int:
    """Resize messages show cpu in millicores and memory in bytes, like the kubelet."""
    return int(value * 1000) if resource == "cpu" else int(value)


class Kubelet:
    """Every node's kubelet at once."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        rt = api.registry.get("", "v1", "pods")
        assert rt is not None
        self._rt = rt
        # When True, an accepted resize stays InProgress until `actuate_resizes()`.
        self.hold_resizes = False
        self._unready: set[tuple[str, str]] = set()
        self._crashing: set[tuple[str, str]] = set()
        self._ips: dict[str, str] = {}
        #: (namespace, pod) -> (Deferred|Infeasible, message): the node's verdict on that
        #: pod's resizes, forced (a node whose real usage the simulator does not model)
        self.resize_verdicts: dict[tuple[str, str], tuple[str, str]] = {}
        #: pod uid -> the `oom-kill` annotation value already acted on
        self._oom_handled: dict[str, str] = {}
        #: (pod uid, container) -> consecutive failures under the `crash-loop` annotation
        self._crash_failures: dict[tuple[str, str], int] = {}
        self.events = EventRecorder(api, "kubelet")

    # ----------------------------------------------------------------- step

    async def step(self) -> None:
        """Bring every bound pod's status up to date and advance pending resizes."""
        self._sync_all(actuate=not self.hold_resizes)

    def actuate_resizes(self) -> None:
        """Finish every accepted resize now (for tests that set `hold_resizes`)."""
        self._sync_all(actuate=True)

    def _sync_all(self, actuate: bool) -> None:
        # By uid, so an updated pod replaces its old self in O(1): rebuilding a list per
        # update made a step quadratic in the number of pods.
        by_uid = {p["metadata"]["uid"]: p for p in self.api.store.list(("", "pods"))}
        nodes = {n["metadata"]["name"]: n for n in self.api.store.list(("", "nodes"))}
        # What the annotations' faults remember is per pod uid: forget deleted pods.
        if self._oom_handled:
            self._oom_handled = {u: v for u, v in self._oom_handled.items() if u in by_uid}
        if self._crash_failures:
            self._crash_failures = {k: v for k, v in self._crash_failures.items() if k[0] in by_uid}
        for uid, pod in list(by_uid.items()):
            node = nodes.get(pod["spec"].get("nodeName", ""))
            if node is None or pods.is_terminal(pod):
                continue
            updated = self._sync(pod, node, by_uid, actuate)
            if updated is not None:
                by_uid[uid] = updated

    def _sync(self, pod: Obj, node: Obj, all_pods: dict[str, Obj], actuate: bool) -> Obj | None:
        status = pod.setdefault("status", {})
        now = self.api.clock.stamp()
        uid = pod["metadata"]["uid"]
        before = {s["name"]: _run_state(s) for key, _ in _LISTS for s in status.get(key) or []}
        if status.get("phase") == "Pending":
            status["phase"] = "Running"
            status["startTime"] = now
        status["hostIP"] = self._host_ip(node)
        status["hostIPs"] = [{"ip": status["hostIP"]}]
        status["podIP"] = self._pod_ip(uid)
        status["podIPs"] = [{"ip": status["podIP"]}]
        annotations = pod["metadata"].get("annotations") or {}
        looping = fa.names(annotations.get(fa.CRASH_LOOP))
        known = {s["name"]: s for key, _ in _LISTS for s in status.get(key) or []}
        started: list[str] = []
        #: (spec, status) of the containers that run: app containers and sidecars
        running: list[tuple[Obj, Obj]] = []
        for key, spec_key in _LISTS:
            out = []
            for container in pod["spec"].get(spec_key) or []:
                name = container["name"]
                runs = spec_key == "containers" or pods.is_sidecar(container)
                current = known.get(name)
                if current is None:
                    current = new_entry(container, uid, now, runs)
                    started.append(name)
                current["image"] = container.get("image", "")
                out.append(current)
                if not runs:
                    continue
                running.append((container, current))
                hooked = (uid, name)
                if hooked in self._crashing:
                    current["state"] = {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": f"back-off restarting failed container={name} pod={pod['metadata']['name']}_{pod['metadata']['namespace']}({uid})",
                        }
                    }
                    current["started"] = False
                elif "running" not in current.get("state", {}) and name not in looping:
                    current["state"] = {"running": {"startedAt": now}}
                    current["started"] = True
                current["ready"] = hooked not in self._unready and hooked not in self._crashing
            if out:
                status[key] = out
            else:
                status.pop(key, None)
        unready = self._act_out_faults(pod, dict((c["name"], e) for c, e in running))
        for _, entry in running:
            if entry["name"] in unready:
                entry["ready"] = False
        resize_before = clone(get_condition(status, "PodResizePending") or {})
        restarted = self._resize(pod, node, all_pods, actuate, now, running)
        crashing = {n for u, n in self._crashing if u == uid} | looping
        act_out(pod, self.api.clock.now(), skip=crashing)
        not_ready = [e["name"] for _, e in running if not e["ready"]]
        for ctype in _POD_CONDITIONS:
            value = (
                "True"
                if ctype in ("PodReadyToStartContainers", "Initialized") or not not_ready
                else "False"
            )
            reason = "" if value == "True" else "ContainersNotReady"
            message = (
                ""
                if value == "True"
                else f"containers with unready status: [{' '.join(not_ready)}]"
            )
            set_condition(status, ctype, value, now, reason, message, probe=True)
        set_condition(status, "PodScheduled", "True", now, probe=True)
        status["qosClass"] = status.get("qosClass") or pods.qos_class(pod)
        status["observedGeneration"] = pod["metadata"].get("generation", 1)
        written = self.api.write_status(self._rt, pod)
        host = node["metadata"]["name"]
        for name in started:
            self._container_event(written, host, name, "Created", f"Created container: {name}")
            self._container_event(written, host, name, "Started", f"Started container {name}")
        self._resize_events(written, host, resize_before, restarted)
        self._lifecycle_events(written, host, before, set(started) | set(restarted or ()))
        return written

    def _act_out_faults(self, pod: Obj, running: dict[str, Obj]) -> set[str]:
        """Apply the pod's `oom-kill` and `crash-loop` annotations to its running
        containers' statuses; the names the annotations make unready."""
        annotations = pod["metadata"].get("annotations") or {}
        uid = pod["metadata"]["uid"]
        now = self.api.clock.now()
        oom = annotations.get(fa.OOM_KILL)
        if not oom:
            self._oom_handled.pop(uid, None)
        elif oom != self._oom_handled.get(uid):
            entry = running.get(fa.oom_target(oom))
            if entry is not None and "running" in (entry.get("state") or {}):
                restart(entry, uid, self.api.clock.stamp(), "OOMKilled", 137)
            # Acted on, or naming nothing that runs: either way this value is spent.
            self._oom_handled[uid] = oom
        looping = fa.names(annotations.get(fa.CRASH_LOOP)) & set(running)
        for name, entry in running.items():
            if name in looping:
                self._crash_loop_step(pod, entry, now)
            elif self._crash_failures.pop((uid, name), None) is not None:
                # The annotation no longer names it: it starts again.
                entry["state"] = {"running": {"startedAt": self.api.clock.stamp()}}
                entry["started"] = True
        return looping | (fa.names(annotations.get(fa.UNREADY)) & set(running))

    def _crash_loop_step(self, pod: Obj, entry: Obj, now: datetime) -> None:
        """A container the `crash-loop` annotation names: it fails now if it runs, or
        again once the back-off since its last failure is over; else it keeps waiting."""
        meta = pod["metadata"]
        key = (meta["uid"], entry["name"])
        failures = self._crash_failures.get(key, 0)
        if failures and "waiting" in (entry.get("state") or {}):
            last = (entry.get("lastState") or {}).get("terminated") or {}
            finished = parse_rfc3339(last["finishedAt"]) if last.get("finishedAt") else now
            if now < finished + fa.crash_backoff(failures):
                entry["ready"] = False
                return
        restart(entry, meta["uid"], self.api.clock.stamp(), "Error", 1)
        failures += 1
        self._crash_failures[key] = failures
        entry["started"] = False
        entry["ready"] = False
        entry["state"] = {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {int(fa.crash_backoff(failures).total_seconds())}s "
                f"restarting failed container={entry['name']} "
                f"pod={meta['name']}_{meta['namespace']}({meta['uid']})",
            }
        }

    def _lifecycle_events(
        self, pod: Obj, host: str, before: dict[str, tuple[int, str]], reported: set[str]
    ) -> None:
        """OOMKilling, BackOff and Started for what this sync did to a container (the
        usage model's kills and back-off, the crash-loop hook), against its stored state."""
        for entry in _entries(pod["status"]):
            name = entry["name"]
            if name in reported or name not in before:
                continue
            restarts, state = _run_state(entry)
            old_restarts, old_state = before[name]
            last = (entry.get("lastState") or {}).get("terminated") or {}
            if restarts > old_restarts and last.get("reason") == "OOMKilled":
                self._container_event(
                    pod,
                    host,
                    name,
                    "OOMKilling",
                    f"Memory cgroup out of memory: killed container {name}",
                    warning=True,
                )
            if state == "waiting" and old_state != "waiting":
                waiting = entry["state"]["waiting"]
                self._container_event(
                    pod,
                    host,
                    name,
                    "BackOff",
                    waiting.get("message") or f"Back-off restarting failed container {name}",
                    warning=True,
                )
            elif state == "running" and (restarts > old_restarts or old_state != "running"):
                self._container_event(pod, host, name, "Started", f"Started container {name}")

    def _container_event(
        self, pod: Obj, host: str, container: str, reason: str, note: str, warning: bool = False
    ) -> None:
        self.events.record(
            pod,
            WARNING if warning else NORMAL,
            reason,
            note,
            reason,
            field_path=f"spec.{_spec_list(pod, container)}{{{container}}}",
            instance=host,
        )

    def _resize_events(self, pod: Obj, host: str, before: Obj, restarted: list[str] | None) -> None:
        """ResizeDeferred / ResizeInfeasible once per verdict, ResizeCompleted when actuated
        (with Killing and Started for containers the resize restarted)."""
        after = get_condition(pod["status"], "PodResizePending") or {}
        if after and (after.get("reason"), after.get("message")) != (
            before.get("reason"),
            before.get("message"),
        ):
            infeasible = after.get("reason") == "Infeasible"
            self.events.record(
                pod,
                WARNING if infeasible else NORMAL,
                f"Resize{after.get('reason', '')}",
                after.get("message", ""),
                "Resize",
                instance=host,
            )
        if restarted is None:
            return
        for name in restarted:
            self._container_event(
                pod, host, name, "Killing", f"Container {name} resize requires a restart"
            )
            self._container_event(pod, host, name, "Started", f"Started container {name}")
        # Init containers too when the pod has any, as the 1.35 kubelet's note does.
        summary = {
            spec_key: [
                {"name": c["name"], "resources": c.get("resources") or {}}
                for c in pod["spec"][spec_key]
            ]
            for _, spec_key in _LISTS
            if pod["spec"].get(spec_key)
        }
        note = orjson.dumps(summary, option=orjson.OPT_SORT_KEYS).decode()
        self.events.record(
            pod, NORMAL, "ResizeCompleted", f"Pod resize completed: {note}", "Resize", instance=host
        )

    # ----------------------------------------------------------------- resize

    def _resize(
        self,
        pod: Obj,
        node: Obj,
        all_pods: dict[str, Obj],
        actuate: bool,
        now: str,
        running: list[tuple[Obj, Obj]],
    ) -> list[str] | None:
        """Advance a pending resize of the running containers (app containers and
        sidecars, as (spec, status) pairs); the containers it restarted when it was
        actuated now, else None."""
        status = pod["status"]
        statuses = {c["name"]: e for c, e in running}
        pending = [
            c
            for c, entry in running
            if (c.get("resources") or {}).get("requests", {}) != entry.get("allocatedResources", {})
            or applied_resources(c) != entry.get("resources", {})
        ]
        if pending:
            verdict = self._fit(pod, node, all_pods)
            if verdict is not None:
                reason, message = verdict
                set_condition(
                    status,
                    "PodResizePending",
                    "True",
                    now,
                    reason,
                    message,
                    probe=True,
                    observedGeneration=pod["metadata"].get("generation", 1),
                )
                return None
            drop_condition(status, "PodResizePending")
            for container in pending:
                statuses[container["name"]]["allocatedResources"] = clone(
                    (container.get("resources") or {}).get("requests") or {}
                )
            refused = fa.forced_error(pod["metadata"].get("annotations"))
            set_condition(
                status,
                "PodResizeInProgress",
                "True",
                now,
                *(("Error", refused) if refused else ()),
                probe=True,
                observedGeneration=pod["metadata"].get("generation", 1),
            )
            if refused:
                return None
        else:
            drop_condition(status, "PodResizePending")
        in_progress = get_condition(status, "PodResizeInProgress") is not None
        if not (actuate and (in_progress or pending)):
            return None
        restarted: list[str] = []
        for container, entry in running:
            wanted = applied_resources(container)
            if entry.get("resources") == wanted:
                continue
            if needs_restart(container, entry.get("resources") or {}, wanted):
                restart(entry, pod["metadata"]["uid"], now, "Completed", 0)
                restarted.append(container["name"])
            entry["resources"] = wanted
        drop_condition(status, "PodResizeInProgress")
        return restarted

    def _fit(self, pod: Obj, node: Obj, all_pods: dict[str, Obj]) -> tuple[str, str] | None:
        """None if the desired requests fit the node now, else (Deferred|Infeasible, message)."""
        forced = self.resize_verdicts.get((pod["metadata"]["namespace"], pod["metadata"]["name"]))
        if forced is not None:
            return forced
        annotated = ((pod["metadata"].get("annotations") or {}).get(fa.RESIZE) or "").strip()
        if annotated in fa.FORCED_RESIZE:
            return annotated, fa.FORCED_RESIZE[annotated]
        capacity = allocatable(node)
        wanted = pods.pod_requests(pod, "spec")
        for resource in ("cpu", "memory"):
            need = wanted.get(resource, Fraction(0))
            have = capacity.get(resource)
            if have is not None and need > have:
                return (
                    "Infeasible",
                    f"Node didn't have enough capacity: {resource}, requested: {_amount(resource, need)}, capacity: {_amount(resource, have)}",
                )
        others = usage(
            list(all_pods.values()),
            node["metadata"]["name"],
            "allocated",
            exclude_uid=pod["metadata"]["uid"],
        )
        for resource in ("cpu", "memory"):
            need = wanted.get(resource, Fraction(0))
            have = capacity.get(resource)
            used = others.get(resource, Fraction(0))
            if have is not None and used + need > have:
                return (
                    "Deferred",
                    f"Node didn't have enough resource: {resource}, requested: {_amount(resource, need)}, used: {_amount(resource, used)}, capacity: {_amount(resource, have)}",
                )
        return None

    # ----------------------------------------------------------------- test hooks

    def _pod(self, namespace: str, name: str) -> Obj:
        pod = self.api.store.get(("", "pods"), namespace, name)
        if pod is None:
            raise not_found(self._rt, name)
        return pod

    def _restart(
        self, namespace: str, name: str, container: str, reason: str, exit_code: int
    ) -> Obj:
        pod = self._pod(namespace, name)
        now = self.api.clock.stamp()
        spec = pod["spec"]
        runs = {c["name"] for c in spec.get("containers") or []} | {
            c["name"] for c in spec.get("initContainers") or [] if pods.is_sidecar(c)
        }
        for entry in _entries(pod.get("status") or {}):
            if entry["name"] == container and container in runs:
                restart(entry, pod["metadata"]["uid"], now, reason, exit_code)
                written = self.api.write_status(self._rt, pod)
                host = pod["spec"].get("nodeName", "")
                if reason == "OOMKilled":
                    self._container_event(
                        written,
                        host,
                        container,
                        "OOMKilling",
                        f"Memory cgroup out of memory: killed container {container}",
                        warning=True,
                    )
                self._container_event(
                    written, host, container, "Started", f"Started container {container}"
                )
                return written
        raise ValueError(
            f"pod {namespace}/{name} has no running container {container!r} (has the kubelet run it yet?)"
        )

    def oom_kill(self, namespace: str, name: str, container: str) -> Obj:
        """The container was OOM-killed and restarted (lastState.terminated.reason OOMKilled, exit 137)."""
        return self._restart(namespace, name, container, "OOMKilled", 137)

    def crash(self, namespace: str, name: str, container: str, exit_code: int = 1) -> Obj:
        """The container exited with an error once and was restarted."""
        return self._restart(namespace, name, container, "Error", exit_code)

    def crash_loop(self, namespace: str, name: str, container: str, looping: bool = True) -> Obj:
        """Start (or stop) a crash loop: one more failed restart, then waiting in CrashLoopBackOff."""
        pod = self._pod(namespace, name)
        key = (pod["metadata"]["uid"], container)
        if looping:
            self._restart(namespace, name, container, "Error", 1)
            self._crashing.add(key)
        else:
            self._crashing.discard(key)
        return self._resync(namespace, name)

    def set_ready(self, namespace: str, name: str, container: str, ready: bool) -> Obj:
        """Make a container's readiness probe pass or fail."""
        pod = self._pod(namespace, name)
        key = (pod["metadata"]["uid"], container)
        if ready:
            self._unready.discard(key)
        else:
            self._unready.add(key)
        return self._resync(namespace, name)

    def finish(self, namespace: str, name: str, succeeded: bool = True) -> Obj:
        """End the pod: every container terminated, phase Succeeded or Failed."""
        pod = self._pod(namespace, name)
        now = self.api.clock.stamp()
        status = pod.setdefault("status", {})
        status["phase"] = "Succeeded" if succeeded else "Failed"
        for entry in _entries(status):
            if "terminated" in (entry.get("state") or {}):
                continue  # a plain init container ended long ago
            started = entry.get("state", {}).get("running", {}).get("startedAt", now)
            entry["state"] = {
                "terminated": {
                    "exitCode": 0 if succeeded else 1,
                    "reason": "Completed" if succeeded else "Error",
                    "startedAt": started,
                    "finishedAt": now,
                    "containerID": entry.get("containerID", ""),
                }
            }
            entry["ready"] = False
            entry["started"] = False
        for ctype in ("Ready", "ContainersReady"):
            set_condition(status, ctype, "False", now, "PodCompleted", probe=True)
        return self.api.write_status(self._rt, pod)

    def _resync(self, namespace: str, name: str) -> Obj:
        pod = self._pod(namespace, name)
        node = self.api.store.get(("", "nodes"), "", pod["spec"].get("nodeName", ""))
        if node is None:
            return pod
        return (
            self._sync(pod, node, self.api.store.list(("", "pods")), actuate=not self.hold_resizes)
            or pod
        )

    # ----------------------------------------------------------------- addresses

    def _host_ip(self, node: Obj) -> str:
        for address in (node.get("status") or {}).get("addresses") or []:
            if address.get("type") == "InternalIP":
                return str(address["address"])
        return "10.0.0.1"

    def _pod_ip(self, uid: str) -> str:
        if uid not in self._ips:
            n = len(self._ips) + 2
            self._ips[uid] = f"10.244.{n // 250}.{n % 250}"
        return self._ips[uid]


def _entries(status: Obj) -> list[Obj]:
    """Every container status of a pod: init containers', then app containers'."""
    return [e for key, _ in _LISTS for e in status.get(key) or []]


def _spec_list(pod: Obj, container: str) -> str:
    """`initContainers` or `containers`: where the pod's spec names `container`."""
    for c in pod["spec"].get("initContainers") or []:
        if c.get("name") == container:
            return "initContainers"
    return "containers"


def _run_state(entry: Obj) -> tuple[int, str]:
    """A container status's restart count and state (running, waiting, terminated)."""
    return int(entry.get("restartCount", 0)), next(iter(entry.get("state") or {}), "")
