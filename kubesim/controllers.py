"""Workload controllers: Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob,
and the garbage collector. Each step reads the store and writes through the ApiServer,
so the pods they create pass admission like any other pod."""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Any

import orjson

from kubesim import pods, quota
from kubesim.apiserver import ApiServer
from kubesim.clock import parse_rfc3339, rfc3339
from kubesim.conditions import get_condition, set_condition
from kubesim.cron import next_run
from kubesim.errors import ApiError
from kubesim.recorder import NORMAL, WARNING, EventRecorder
from kubesim.resources import ResourceType
from kubesim.selectors import from_label_selector
from kubesim.store import Obj, clone

log = logging.getLogger(__name__)

_SAFE = "bcdfghjklmnpqrstvwxz2456789"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
HASH_LABEL = "pod-template-hash"
# The object an API error names first: `pods "web-x7k2p" is forbidden: ...`.
_NAMED = re.compile(r'^\S+ "[^"]*"')
# The reporting controller of each kind's Events, as named by kube-controller-manager.
_CONTROLLERS = {
    "Deployment": "deployment-controller",
    "ReplicaSet": "replicaset-controller",
    "StatefulSet": "statefulset-controller",
    "DaemonSet": "daemonset-controller",
    "Job": "job-controller",
    "CronJob": "cronjob-controller",
}


def template_hash(template: Obj, collision_count: int = 0) -> str:
    """A stable short hash of a pod template, in the alphabet the real controllers use."""
    value = 0x811C9DC5
    for byte in orjson.dumps(template, option=orjson.OPT_SORT_KEYS) + str(collision_count).encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in str(value))


def owner_ref(owner: Obj) -> Obj:
    """A controller ownerReference to `owner`."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controlled_by(obj: Obj, owner: Obj) -> bool:
    """Whether `owner` is the controller of `obj`."""
    uid = owner["metadata"]["uid"]
    return any(
        r.get("uid") == uid and r.get("controller")
        for r in obj["metadata"].get("ownerReferences") or []
    )


def _active(pod: Obj) -> bool:
    return not pods.is_terminal(pod) and not pod["metadata"].get("deletionTimestamp")


class Controllers:
    """One reconcile pass over every workload kind (`step`)."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self._rt = {
            plural: self._type(group, version, plural)
            for group, version, plural in (
                ("", "v1", "pods"),
                ("apps", "v1", "deployments"),
                ("apps", "v1", "replicasets"),
                ("apps", "v1", "statefulsets"),
                ("apps", "v1", "daemonsets"),
                ("batch", "v1", "jobs"),
                ("batch", "v1", "cronjobs"),
                ("", "v1", "nodes"),
                ("", "v1", "resourcequotas"),
            )
        }
        self._recorders = {kind: EventRecorder(api, name) for kind, name in _CONTROLLERS.items()}

    def _type(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.api.registry.get(group, version, plural)
        assert rt is not None
        return rt

    async def step(self) -> None:
        """Run every controller once."""
        self.collect_garbage()
        for deployment in self._all("deployments"):
            await self._deployment(deployment)
        for rs in self._all("replicasets"):
            await self._replicaset(rs)
        for sts in self._all("statefulsets"):
            await self._statefulset(sts)
        for ds in self._all("daemonsets"):
            await self._daemonset(ds)
        for cj in self._all("cronjobs"):
            await self._cronjob(cj)
        for job in self._all("jobs"):
            await self._job(job)
        for resource_quota in self._all("resourcequotas"):
            self._resource_quota(resource_quota)

    def _event(
        self, owner: Obj, reason: str, note: str, action: str, warning: bool = False
    ) -> None:
        self._recorders[owner["kind"]].record(
            owner, WARNING if warning else NORMAL, reason, note, action
        )

    def _all(self, plural: str) -> list[Obj]:
        return self.api.store.list(self._rt[plural].key)

    def _owned(self, plural: str, owner: Obj) -> list[Obj]:
        ns = owner["metadata"]["namespace"]
        return [o for o in self.api.store.list(self._rt[plural].key, ns) if controlled_by(o, owner)]

    # ----------------------------------------------------------------- resource quotas

    def _resource_quota(self, resource_quota: Obj) -> None:
        """The quota controller: `status.hard` from the spec and `status.used` recounted
        from the pods, so a deleted or finished pod gives its share back."""
        updated = quota.sync(self.api.store, resource_quota, self.api.clock.now())
        if updated is not None:
            self.api.write_status(self._rt["resourcequotas"], updated)

    # ----------------------------------------------------------------- garbage collection

    def collect_garbage(self) -> None:
        """Delete objects whose every owner is gone (background propagation)."""
        uids: set[str] = set()
        types = self.api.registry.all()
        for rt in types:
            uids.update(o["metadata"]["uid"] for o in self.api.store.iter(rt.key))
        for rt in types:
            for obj in list(self.api.store.iter(rt.key)):
                refs = obj["metadata"].get("ownerReferences") or []
                if refs and not any(r.get("uid") in uids for r in refs):
                    self.api.remove_now(
                        rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
                    )

    # ----------------------------------------------------------------- pod creation

    async def _create_pod(
        self,
        owner: Obj,
        template: Obj,
        *,
        name: str = "",
        generate_name: str = "",
        extra_labels: dict[str, str] | None = None,
        spec_patch: dict[str, Any] | None = None,
    ) -> bool:
        meta = clone(template.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), **(extra_labels or {})}
        meta["ownerReferences"] = [owner_ref(owner)]
        if name:
            meta["name"] = name
        else:
            meta["generateName"] = generate_name
        spec = clone(template.get("spec") or {})
        spec.update(spec_patch or {})
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        try:
            created = await self.api.create(self._rt["pods"], owner["metadata"]["namespace"], pod)
        except ApiError as exc:
            # The real controllers record FailedCreate and retry on the next sync.
            log.warning(
                "%s %s/%s: pod creation failed: %s",
                owner["kind"],
                owner["metadata"]["namespace"],
                owner["metadata"]["name"],
                exc,
            )
            self._failed_create(owner, str(exc.message), generated=not name)
            return False
        created_name = created["metadata"]["name"]
        self._event(
            owner,
            "SuccessfulCreate",
            f"create Pod {created_name} in StatefulSet {owner['metadata']['name']} successful"
            if owner["kind"] == "StatefulSet"
            else f"Created pod: {created_name}",
            "Create",
        )
        return True

    def _failed_create(self, owner: Obj, message: str, generated: bool) -> None:
        rt = self._rt[owner["kind"].lower() + "s"]
        current = self.api.store.get(
            rt.key, owner["metadata"]["namespace"], owner["metadata"]["name"]
        )
        if current is None:
            return
        status = current.setdefault("status", {})
        before = (get_condition(status, "ReplicaFailure") or {}).get("message")
        if generated and before and _NAMED.sub("", before) == _NAMED.sub("", message):
            # The same refusal of a pod whose generated name differs on every try (an
            # admission plugin names it): the real controllers back off between tries,
            # kubesim keeps the first record so the cluster settles.
            return
        set_condition(
            status, "ReplicaFailure", "True", self.api.clock.stamp(), "FailedCreate", message
        )
        written = self.api.write_status(rt, current)
        # Once per new failure: the next settle round retries the same creation.
        if before != message:
            self._event(written, "FailedCreate", f"Error creating: {message}", "Create", True)

    async def _delete_pod(self, owner: Obj, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        try:
            await self.api.delete(self._rt["pods"], pod["metadata"]["namespace"], name)
        except ApiError as exc:
            log.debug("pod deletion skipped: %s", exc)
            return
        self._event(
            owner,
            "SuccessfulDelete",
            f"delete Pod {name} in StatefulSet {owner['metadata']['name']} successful"
            if owner["kind"] == "StatefulSet"
            else f"Deleted pod: {name}",
            "Delete",
        )

    # ----------------------------------------------------------------- deployments

    async def _deployment(self, d: Obj) -> None:
        spec = d["spec"]
        template = spec["template"]
        owned = self._owned("replicasets", d)
        wanted = _semantic(template)
        current = next(
            (rs for rs in owned if _semantic(_strip_hash(rs["spec"]["template"])) == wanted), None
        )
        revisions = [int(rs["metadata"].get("annotations", {}).get(REVISION, "0")) for rs in owned]
        desired = int(spec.get("replicas", 1))
        if current is not None and _revision(current) < max(revisions, default=0):
            # A rollback (or a template returning to an old one) reuses that revision's
            # ReplicaSet and makes it the newest revision, as the real controller does.
            current = await self._promote(current, max(revisions))
        if current is None:
            collision = int((d.get("status") or {}).get("collisionCount", 0))
            h = template_hash(template, collision)
            selector = clone(spec["selector"])
            selector.setdefault("matchLabels", {})[HASH_LABEL] = h
            rs_template = clone(template)
            rs_template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = h
            rs = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{d['metadata']['name']}-{h}",
                    "labels": {**(template.get("metadata", {}).get("labels") or {}), HASH_LABEL: h},
                    "annotations": {
                        REVISION: str(max(revisions, default=0) + 1),
                        "deployment.kubernetes.io/desired-replicas": str(desired),
                        "deployment.kubernetes.io/max-replicas": str(desired + 1),
                    },
                    "ownerReferences": [owner_ref(d)],
                },
                "spec": {
                    "replicas": desired,
                    "minReadySeconds": spec.get("minReadySeconds", 0),
                    "selector": selector,
                    "template": rs_template,
                },
            }
            try:
                current = await self.api.create(
                    self._rt["replicasets"], d["metadata"]["namespace"], rs
                )
            except ApiError as exc:
                log.warning(
                    "deployment %s: replicaset creation failed: %s", d["metadata"]["name"], exc
                )
                return
            owned.append(current)
            self._scaled(d, current, 0, desired)
        elif current["spec"].get("replicas") != desired:
            before = int(current["spec"].get("replicas", 0))
            current["spec"]["replicas"] = desired
            current = await self.api.update(
                self._rt["replicasets"],
                current["metadata"]["namespace"],
                current["metadata"]["name"],
                current,
            )
            self._scaled(d, current, before, desired)
        # Old ReplicaSets scale down once the new one is fully available: a rolling update
        # collapsed into one surge, which keeps capacity and converges in one settle.
        new_available = int((current.get("status") or {}).get("availableReplicas", 0))
        for rs in owned:
            if (
                rs["metadata"]["uid"] != current["metadata"]["uid"]
                and rs["spec"].get("replicas", 0) != 0
                and (new_available >= desired or spec.get("strategy", {}).get("type") == "Recreate")
            ):
                before = int(rs["spec"]["replicas"])
                rs["spec"]["replicas"] = 0
                await self.api.update(
                    self._rt["replicasets"], rs["metadata"]["namespace"], rs["metadata"]["name"], rs
                )
                self._scaled(d, rs, before, 0)
        self._deployment_status(d, current)

    def _scaled(self, d: Obj, rs: Obj, before: int, after: int) -> None:
        direction = "up" if after > before else "down"
        self._event(
            d,
            "ScalingReplicaSet",
            f"Scaled {direction} replica set {rs['metadata']['name']} from {before} to {after}",
            "Scaling",
        )

    async def _promote(self, rs: Obj, newest: int) -> Obj:
        annotations = rs["metadata"].setdefault("annotations", {})
        old = annotations.get(REVISION, "")
        history = [r for r in annotations.get(REVISION_HISTORY, "").split(",") if r]
        annotations[REVISION_HISTORY] = ",".join([*history, old])
        annotations[REVISION] = str(newest + 1)
        return await self.api.update(
            self._rt["replicasets"], rs["metadata"]["namespace"], rs["metadata"]["name"], rs
        )

    def _deployment_status(self, d: Obj, current: Obj) -> None:
        fresh = self.api.store.get(
            self._rt["deployments"].key, d["metadata"]["namespace"], d["metadata"]["name"]
        )
        if fresh is None:
            return
        owned = self._owned("replicasets", fresh)
        statuses = [rs.get("status") or {} for rs in owned]
        cur = next(
            (
                rs.get("status") or {}
                for rs in owned
                if rs["metadata"]["uid"] == current["metadata"]["uid"]
            ),
            {},
        )
        desired = int(fresh["spec"].get("replicas", 1))
        replicas = sum(int(s.get("replicas", 0)) for s in statuses)
        ready = sum(int(s.get("readyReplicas", 0)) for s in statuses)
        available = sum(int(s.get("availableReplicas", 0)) for s in statuses)
        status = fresh.setdefault("status", {})
        status.update(
            {
                "observedGeneration": fresh["metadata"]["generation"],
                "replicas": replicas,
                "updatedReplicas": int(cur.get("replicas", 0)),
                "readyReplicas": ready,
                "availableReplicas": available,
            }
        )
        unavailable = max(0, desired - available)
        if unavailable:
            status["unavailableReplicas"] = unavailable
        else:
            status.pop("unavailableReplicas", None)
        now = self.api.clock.stamp()

        def condition(ctype: str, value: str, reason: str, message: str) -> None:
            old = next((c for c in status.get("conditions") or [] if c.get("type") == ctype), {})
            same = all(
                old.get(k) == v
                for k, v in (("status", value), ("reason", reason), ("message", message))
            )
            set_condition(
                status,
                ctype,
                value,
                now,
                reason,
                message,
                lastUpdateTime=old.get("lastUpdateTime", now) if same else now,
            )

        ok = available >= desired
        condition(
            "Available",
            "True" if ok else "False",
            "MinimumReplicasAvailable" if ok else "MinimumReplicasUnavailable",
            "Deployment has minimum availability."
            if ok
            else "Deployment does not have minimum availability.",
        )
        done = ok and int(cur.get("availableReplicas", 0)) >= desired
        condition(
            "Progressing",
            "True",
            "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
            f'ReplicaSet "{current["metadata"]["name"]}" '
            + ("has successfully progressed." if done else "is progressing."),
        )
        annotations = fresh["metadata"].setdefault("annotations", {})
        annotations[REVISION] = current["metadata"].get("annotations", {}).get(REVISION, "1")
        self.api.write_status(self._rt["deployments"], fresh)

    # ----------------------------------------------------------------- replicasets

    async def _replicaset(self, rs: Obj) -> None:
        selector = from_label_selector(rs["spec"].get("selector"))
        owned = [p for p in self._owned("pods", rs) if _active(p)]
        desired = int(rs["spec"].get("replicas", 1))
        if len(owned) < desired:
            for _ in range(desired - len(owned)):
                if not await self._create_pod(
                    rs, rs["spec"]["template"], generate_name=f"{rs['metadata']['name']}-"
                ):
                    break
        elif len(owned) > desired:
            # Like the real controller: unscheduled, then not ready, then newest first.
            owned.sort(
                key=lambda p: (
                    bool(p["spec"].get("nodeName")),
                    pods.is_ready(p),
                    -parse_rfc3339(p["metadata"]["creationTimestamp"]).timestamp(),
                )
            )
            for pod in owned[: len(owned) - desired]:
                await self._delete_pod(rs, pod)
        fresh = self.api.store.get(
            self._rt["replicasets"].key, rs["metadata"]["namespace"], rs["metadata"]["name"]
        )
        if fresh is None:
            return
        active = [p for p in self._owned("pods", fresh) if _active(p)]
        ready = [p for p in active if pods.is_ready(p)]
        status = fresh.setdefault("status", {})
        status.update(
            {
                "replicas": len(active),
                "fullyLabeledReplicas": sum(
                    1 for p in active if selector.matches(p["metadata"].get("labels"))
                ),
                "readyReplicas": len(ready),
                "availableReplicas": len(ready),
                "observedGeneration": fresh["metadata"]["generation"],
            }
        )
        if len(active) >= desired:
            status.pop("conditions", None)
        self.api.write_status(self._rt["replicasets"], fresh)

    # ----------------------------------------------------------------- statefulsets

    async def _statefulset(self, sts: Obj) -> None:
        name = sts["metadata"]["name"]
        desired = int(sts["spec"].get("replicas", 1))
        revision = f"{name}-{template_hash(sts['spec']['template'])}"
        owned = {p["metadata"]["name"]: p for p in self._owned("pods", sts)}
        for i in range(desired):
            pod_name = f"{name}-{i}"
            if pod_name not in owned:
                labels = {
                    "controller-revision-hash": revision,
                    "statefulset.kubernetes.io/pod-name": pod_name,
                    "apps.kubernetes.io/pod-index": str(i),
                }
                spec_patch = {"hostname": pod_name}
                if sts["spec"].get("serviceName"):
                    spec_patch["subdomain"] = sts["spec"]["serviceName"]
                await self._create_pod(
                    sts,
                    sts["spec"]["template"],
                    name=pod_name,
                    extra_labels=labels,
                    spec_patch=spec_patch,
                )
        for pod_name, pod in owned.items():
            index = pod_name.rsplit("-", 1)[-1]
            if not index.isdigit() or int(index) >= desired:
                await self._delete_pod(sts, pod)
        fresh = self.api.store.get(self._rt["statefulsets"].key, sts["metadata"]["namespace"], name)
        if fresh is None:
            return
        active = [p for p in self._owned("pods", fresh) if _active(p)]
        ready = sum(1 for p in active if pods.is_ready(p))
        current = sum(
            1
            for p in active
            if p["metadata"].get("labels", {}).get("controller-revision-hash") == revision
        )
        fresh.setdefault("status", {}).update(
            {
                "observedGeneration": fresh["metadata"]["generation"],
                "replicas": len(active),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "currentReplicas": current,
                "updatedReplicas": current,
                "currentRevision": revision,
                "updateRevision": revision,
                "collisionCount": 0,
            }
        )
        self.api.write_status(self._rt["statefulsets"], fresh)

    # ----------------------------------------------------------------- daemonsets

    async def _daemonset(self, ds: Obj) -> None:
        template = ds["spec"]["template"]
        selector = template.get("spec", {}).get("nodeSelector") or {}
        nodes = [
            n
            for n in self.api.store.list(self._rt["nodes"].key)
            if all(n["metadata"].get("labels", {}).get(k) == v for k, v in selector.items())
        ]
        owned = [p for p in self._owned("pods", ds) if _active(p)]
        by_node = {_daemon_node(p): p for p in owned}
        for node in nodes:
            node_name = node["metadata"]["name"]
            if node_name in by_node:
                continue
            spec_patch = {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": [node_name],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                }
            }
            tolerations = list(template.get("spec", {}).get("tolerations") or [])
            for key in (
                "node.kubernetes.io/unschedulable",
                "node.kubernetes.io/disk-pressure",
                "node.kubernetes.io/memory-pressure",
                "node.kubernetes.io/pid-pressure",
            ):
                tolerations.append({"key": key, "operator": "Exists", "effect": "NoSchedule"})
            spec_patch["tolerations"] = tolerations
            labels = {
                "controller-revision-hash": template_hash(template),
                "pod-template-generation": str(ds["metadata"]["generation"]),
            }
            await self._create_pod(
                ds,
                template,
                generate_name=f"{ds['metadata']['name']}-",
                extra_labels=labels,
                spec_patch=spec_patch,
            )
        node_names = {n["metadata"]["name"] for n in nodes}
        for node_name, pod in by_node.items():
            if node_name not in node_names:
                await self._delete_pod(ds, pod)
        fresh = self.api.store.get(
            self._rt["daemonsets"].key, ds["metadata"]["namespace"], ds["metadata"]["name"]
        )
        if fresh is None:
            return
        active = [p for p in self._owned("pods", fresh) if _active(p)]
        ready = sum(1 for p in active if pods.is_ready(p))
        fresh.setdefault("status", {}).update(
            {
                "observedGeneration": fresh["metadata"]["generation"],
                "desiredNumberScheduled": len(nodes),
                "currentNumberScheduled": sum(1 for p in active if p["spec"].get("nodeName")),
                "updatedNumberScheduled": len(active),
                "numberReady": ready,
                "numberAvailable": ready,
                "numberMisscheduled": 0,
            }
        )
        self.api.write_status(self._rt["daemonsets"], fresh)

    # ----------------------------------------------------------------- jobs

    async def _job(self, job: Obj) -> None:
        spec = job["spec"]
        owned = self._owned("pods", job)
        status = clone(job.get("status") or {})
        succeeded = sum(1 for p in owned if p.get("status", {}).get("phase") == "Succeeded")
        failed = sum(1 for p in owned if p.get("status", {}).get("phase") == "Failed")
        active = [p for p in owned if _active(p)]
        completions = int(spec.get("completions") or 1)
        finished = any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        now = self.api.clock.stamp()
        if not finished and not spec.get("suspend"):
            if succeeded >= completions:
                set_condition(
                    status,
                    "SuccessCriteriaMet",
                    "True",
                    now,
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                    probe=True,
                )
                set_condition(
                    status,
                    "Complete",
                    "True",
                    now,
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                    probe=True,
                )
                status["completionTime"] = now
                self._event(job, "Completed", "Job completed", "Complete")
            elif failed > int(spec.get("backoffLimit", 6)):
                set_condition(
                    status,
                    "FailureTarget",
                    "True",
                    now,
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                    probe=True,
                )
                set_condition(
                    status,
                    "Failed",
                    "True",
                    now,
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                    probe=True,
                )
                self._event(
                    job,
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                    "Fail",
                    warning=True,
                )
            else:
                want = min(int(spec.get("parallelism", 1)), completions - succeeded) - len(active)
                for _ in range(max(0, want)):
                    if not await self._create_pod(
                        job, spec["template"], generate_name=f"{job['metadata']['name']}-"
                    ):
                        break
                status.setdefault("startTime", now)
        fresh = self.api.store.get(
            self._rt["jobs"].key, job["metadata"]["namespace"], job["metadata"]["name"]
        )
        if fresh is None:
            return
        active = [p for p in self._owned("pods", fresh) if _active(p)]
        status.update(
            {
                "active": len(active),
                "succeeded": succeeded,
                "failed": failed,
                "ready": sum(1 for p in active if pods.is_ready(p)),
            }
        )
        for key in ("active", "succeeded", "failed"):
            if not status[key]:
                del status[key]
        fresh["status"] = status
        self.api.write_status(self._rt["jobs"], fresh)

    # ----------------------------------------------------------------- cronjobs

    async def _cronjob(self, cj: Obj) -> None:
        spec = cj["spec"]
        status = clone(cj.get("status") or {})
        if spec.get("suspend"):
            return
        last = status.get("lastScheduleTime") or cj["metadata"]["creationTimestamp"]
        now = self.api.clock.now()
        due: datetime | None = None
        candidate = next_run(spec["schedule"], parse_rfc3339(last), spec.get("timeZone"))
        # Only the most recent missed run is started, as the real controller does.
        while candidate is not None and candidate <= now:
            due = candidate
            candidate = next_run(spec["schedule"], candidate, spec.get("timeZone"))
        if due is None:
            return
        job_template = spec.get("jobTemplate") or {}
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"{cj['metadata']['name']}-{int(due.timestamp() // 60)}",
                "labels": clone((job_template.get("metadata") or {}).get("labels") or {}),
                "annotations": {
                    **((job_template.get("metadata") or {}).get("annotations") or {}),
                    "batch.kubernetes.io/cronjob-scheduled-timestamp": rfc3339(due),
                },
                "ownerReferences": [owner_ref(cj)],
            },
            "spec": clone(job_template.get("spec") or {}),
        }
        try:
            created = await self.api.create(self._rt["jobs"], cj["metadata"]["namespace"], job)
        except ApiError as exc:
            log.warning("cronjob %s: job creation failed: %s", cj["metadata"]["name"], exc)
            return
        fresh = self.api.store.get(
            self._rt["cronjobs"].key, cj["metadata"]["namespace"], cj["metadata"]["name"]
        )
        if fresh is None:
            return
        self._event(cj, "SuccessfulCreate", f"Created job {created['metadata']['name']}", "Create")
        fresh_status = fresh.setdefault("status", {})
        fresh_status["lastScheduleTime"] = rfc3339(due)
        fresh_status["active"] = [
            *(fresh_status.get("active") or []),
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": created["metadata"]["name"],
                "namespace": created["metadata"]["namespace"],
                "uid": created["metadata"]["uid"],
            },
        ]
        self.api.write_status(self._rt["cronjobs"], fresh)


def _revision(rs: Obj) -> int:
    return int((rs["metadata"].get("annotations") or {}).get(REVISION, "0"))


def _semantic(template: Obj) -> Obj:
    """A pod template as the real controller compares it: typed, so a
    `creationTimestamp: null` (what Go clients send) is the same as none."""
    meta = template.get("metadata")
    if not isinstance(meta, dict) or "creationTimestamp" not in meta:
        return template
    if meta["creationTimestamp"] is not None:
        return template
    out = dict(template)
    out["metadata"] = {k: v for k, v in meta.items() if k != "creationTimestamp"}
    return out


def _strip_hash(template: Obj) -> Obj:
    out = clone(template)
    labels = out.get("metadata", {}).get("labels")
    if labels:
        labels.pop(HASH_LABEL, None)
    return out


def _daemon_node(pod: Obj) -> str:
    terms = (
        ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    for term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return str(pod["spec"].get("nodeName", ""))
