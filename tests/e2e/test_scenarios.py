"""kerf's main jobs end to end, on the selected backend (kubesim in `make test`, the real
control plane with a real kubelet in `make e2e`): pods sized at admission by the real API
server calling the webhook, running pods resized in place, fallbacks to eviction, blocked
changes, a steady cluster that writes nothing.

What kubesim and the node agent play from a fault annotation happens for real on a real
kubelet: OOM kills (kerf-load told to use more than its limit), a memory limit below what
the container uses, a resize the node defers for want of room or can never hold."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.services import Kerf
from harness.wait import wait_until
from tests.e2e.scenario import (
    FAULT,
    Namespace,
    container,
    delete_namespace,
    deployment,
    free_millicores,
    hold_memory,
    make_namespace,
    oom_kill,
    refused_then_blocked,
    requests,
    rollback_policy,
    running_requests,
    static_policy,
    uids,
)

#: the longest files start first (tests/conftest.py)
pytestmark = pytest.mark.early
TARGET = {"cpu": "250m", "memory": "256Mi"}
SIZED = {"requests": TARGET}


def published(ns: Namespace, name: str = "web") -> bool:
    """The reconciler has published a policy's values on the Deployment (so the webhook,
    which watches the same policies, has them too)."""
    annotations = ns.get("deployment", name)["metadata"].get("annotations") or {}
    return any(k.endswith("rightsizing.kubex.ai/desired-resource-requests") for k in annotations)


def test_admission_sizes_a_deployments_pods(ns: Namespace) -> None:
    ns.apply(deployment(replicas=0))
    ns.apply(static_policy({"app": SIZED}))
    wait_until(lambda: published(ns), "the policy's values published on the Deployment")
    ns.kerf.kubectl("-n", ns.name, "scale", "deployment/web", "--replicas=2")

    def sized() -> list[dict] | None:
        pods = ns.pods("web")
        return pods if len(pods) == 2 and all(requests(p) == TARGET for p in pods) else None

    pods = wait_until(sized, "both pods created with the policy's requests")
    info = pods[0]["metadata"]["annotations"]["automation-webhook.kubex.ai/pod-rightsizing-info"]
    assert json.loads(info)["containers"]["app"]["requests"] == TARGET


def _resized_in_place(ns: Namespace, names: list[str], app: str = "web") -> None:
    before = uids(ns.running(app, 2))

    def done() -> bool:
        pods = ns.pods(app)
        return (
            uids(pods) == before
            and all(requests(p, n) == TARGET for p in pods for n in names)
            and all(running_requests(p, n) == TARGET for p in pods for n in names)
        )

    wait_until(done, f"{', '.join(names)} resized in place on both pods")
    wait_until(lambda: ns.status().get("phase") == "Applied", "the record to say Applied")
    assert ns.status()["lastApplied"]["method"] == "inPlace"


def test_an_in_place_resize_of_a_single_container(ns: Namespace) -> None:
    ns.apply(deployment())
    ns.running("web", 2)
    ns.apply(static_policy({"app": SIZED}))
    _resized_in_place(ns, ["app"])
    wait_until(lambda: len(ns.events("Resized")) == 1, "one Resized event")


def test_an_in_place_resize_of_two_containers(ns: Namespace) -> None:
    ns.apply(deployment(containers=[container("app"), container("worker")]))
    ns.running("web", 2)
    ns.apply(static_policy({"app": SIZED, "worker": SIZED}))
    _resized_in_place(ns, ["app", "worker"])


def test_an_in_place_resize_of_a_sidecar(ns: Namespace) -> None:
    sidecar = container("proxy", restartPolicy="Always")
    ns.apply(deployment(init_containers=[sidecar]))
    ns.running("web", 2)
    ns.apply(static_policy({"app": SIZED, "proxy": SIZED}))
    _resized_in_place(ns, ["app", "proxy"])


def _evicted_and_replaced(ns: Namespace, before: set[str], target: dict[str, str]) -> None:
    def replaced() -> bool:
        pods = ns.pods("web")
        return len(pods) == 1 and not uids(pods) & before and requests(pods[0]) == target

    wait_until(replaced, "the pod evicted and its replacement sized at admission")


#: A strategy under which kerf sends a resize whatever room its view of the node has left:
#: its own node-capacity check off (Kubex's `safetyChecks.requireNodeAllocatable: false`;
#: on, it filters an increase the node has no room for, InsufficientNodeCapacity), so the
#: node's kubelet is the one to judge it.
NODE_JUDGES = {
    "inPlaceResize": {"enabled": True},
    "podEviction": {"enabled": True},
    "safetyChecks": {"requireNodeAllocatable": False},
}


def _take_the_room(ns: Namespace, node: str, leave_m: int) -> dict[str, Any]:
    """A pod bound to `node` that takes all its CPU but `leave_m` millicores (as the
    kubelet counts them: what the pods there were granted); Running when this returns."""
    room = free_millicores(ns.kerf, node) - leave_m
    assert room > 0, f"{node} has only {room + leave_m}m left"
    filler = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "filler", "labels": {"app": "filler"}},
        "spec": {"nodeName": node, "containers": [container("app", f"{room}m", "64Mi")]},
    }
    ns.apply(filler)
    (running,) = ns.running("filler", 1)
    return running


def _pending(ns: Namespace, pod: str, reason: str) -> dict[str, Any] | None:
    """The pod's PodResizePending condition when its reason is `reason`."""
    conditions = (ns.get("pod", pod).get("status") or {}).get("conditions") or []
    found = next((c for c in conditions if c["type"] == "PodResizePending"), None)
    return found if found and found.get("reason") == reason else None


def test_a_deferred_resize_falls_back_to_eviction_after_fallback_after(kerf: Kerf) -> None:
    """The node defers the resize for want of room; after fallbackAfter kerf evicts the pod
    and its replacement is sized at admission. On a real kubelet the room is really gone:
    another pod bound to the node takes all of its CPU but 100m, and kerf's own node check
    is off (NODE_JUDGES), so the +150m resize is sent and the kubelet defers it; the
    replacement waits Pending for room until that pod goes. kubesim and the agent play the
    deferral with `sim.kerf.dev/resize=Deferred`."""
    real = kerf.backend.real_kubelet
    ns = make_namespace(kerf, "e2e-deferred", NODE_JUDGES if real else None)
    ns.apply(deployment(replicas=1))
    (pod,) = ns.running("web", 1)
    name = pod["metadata"]["name"]
    if real:
        _take_the_room(ns, pod["spec"]["nodeName"], leave_m=100)
    else:
        ns.annotate_pod(name, f"{FAULT}/resize", "Deferred")
    guardrails = {"allowSingleReplicaDisruption": True, "apply": {"fallbackAfter": "5s"}}
    ns.apply(static_policy({"app": SIZED}, guardrails=guardrails))

    pending = wait_until(lambda: _pending(ns, name, "Deferred"), "the node to defer the resize")
    if real:
        print(f"\nkubelet: {pending['message']}")
        assert "enough resource: cpu" in pending["message"], pending
    _evicted_and_replaced(ns, uids([pod]), TARGET)
    wait_until(lambda: ns.events("ResizeFallback"), "a ResizeFallback event")
    if real:
        ns.kerf.kubectl("-n", ns.name, "delete", "pod", "filler", "--wait=false")
        (replacement,) = ns.running("web", 1)
        assert running_requests(replacement) == TARGET


def test_a_deferred_resize_is_applied_once_another_pod_goes(kerf: Kerf) -> None:
    """A resize the node has no room for waits Deferred, kerf does not send it again, and
    once another pod on the node goes the node applies it: the same pod, resized in place.
    kerf's own node check is off (NODE_JUDGES) so that the node judges the resize; kerf
    would fall back only after fallbackAfter (10m by default), long after the room is
    back. On a real kubelet the verdict and the resize are the kubelet's (the room taken
    by a pod bound to the node, Running before the policy exists: nothing races); kubesim
    and the agent judge the room as it does."""
    ns = make_namespace(kerf, "e2e-deferred-applied", NODE_JUDGES)
    ns.apply(deployment(replicas=1))
    (pod,) = ns.running("web", 1)
    name = pod["metadata"]["name"]
    _take_the_room(ns, pod["spec"]["nodeName"], leave_m=100)
    ns.apply(static_policy({"app": SIZED}))

    pending = wait_until(lambda: _pending(ns, name, "Deferred"), "the node to defer the resize")
    assert "enough resource: cpu" in pending["message"], pending
    generation = ns.get("pod", name)["metadata"]["generation"]
    _later_passes(kerf)
    live = ns.get("pod", name)
    assert live["metadata"]["generation"] == generation, "kerf sent the resize again"
    assert running_requests(live) == {"cpu": "100m", "memory": "128Mi"}
    ns.kerf.kubectl("-n", ns.name, "delete", "pod", "filler", "--wait=false")
    wait_until(
        lambda: running_requests(ns.get("pod", name)) == TARGET,
        "the node to apply the resize once the other pod is gone",
    )
    assert uids(ns.pods("web")) == uids([pod])


def test_an_infeasible_resize_falls_back_to_eviction(kerf: Kerf) -> None:
    """The node can never hold the resize; kerf evicts the pod at once and its replacement
    is sized at admission. On a real kubelet the resize asks 3 CPUs of a node that has
    1800m. kerf blocks a value more than every node of the cluster has (Infeasible), so
    the cluster has a larger one: a Node of 8 CPUs registered without a kubelet, as a
    larger node that is down looks (NotReady, cordoned). kerf's node check is off
    (NODE_JUDGES), so the resize is sent; the kubelet answers Infeasible against its own
    allocatable, and the replacement waits Pending, unbound, for a node that can hold it. kubesim and the agent play the verdict with `sim.kerf.dev/resize=Infeasible`."""
    real = kerf.backend.real_kubelet
    target = {"cpu": "3", "memory": "256Mi"} if real else TARGET
    ns = make_namespace(kerf, "e2e-infeasible", NODE_JUDGES if real else None)
    ns.apply(deployment(replicas=1))
    (pod,) = ns.running("web", 1)
    name = pod["metadata"]["name"]
    if real:
        kerf.kubectl.apply(LARGER_NODE)
    try:
        if not real:
            ns.annotate_pod(name, f"{FAULT}/resize", "Infeasible")
        guardrails = {"allowSingleReplicaDisruption": True}
        ns.apply(static_policy({"app": {"requests": target}}, guardrails=guardrails))
        if real:
            pending = wait_until(
                lambda: _pending(ns, name, "Infeasible"), "the kubelet to find it infeasible"
            )
            print(f"\nkubelet: {pending['message']}")
            assert "enough capacity: cpu" in pending["message"], pending
        _evicted_and_replaced(ns, uids([pod]), target)
        if real:
            (replacement,) = ns.pods("web")
            assert not replacement["spec"].get("nodeName"), replacement["spec"]["nodeName"]
    finally:
        if real:
            # The namespace first: without the larger node the policy's 3 CPUs are
            # Infeasible, which kerf would tell in an Event there while it terminates.
            delete_namespace(kerf, ns.name)
            kerf.kubectl("delete", "node", LARGER_NODE["metadata"]["name"], "--ignore-not-found")


#: A Node larger than the real one, registered without a kubelet: it never turns Ready,
#: and it is cordoned, as a node taken down is (the node controller taints a node without
#: a Ready condition only after its grace period: meanwhile the scheduler would give it
#: the replacement, which nothing would run, and which only the kubelet could delete).
LARGER_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "e2e-larger-node-down"},
    "spec": {"unschedulable": True},
    "status": {
        "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"},
        "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
    },
}


def _later_passes(kerf: Kerf) -> None:
    """Wait for two more passes of the reconciler (over any workload: on a real kubelet the
    test's own are the only ones)."""
    name = "kerf_reconciler_pass_seconds_count"
    passes = _metric(kerf.metrics(kerf.reconcilers[0]), name)
    wait_until(
        lambda: _metric(kerf.metrics(kerf.reconcilers[0]), name) >= passes + 2,
        "two more passes of the reconciler",
    )


def test_a_blocked_change_shows_its_reason_and_one_event(kerf: Kerf) -> None:
    evict_only = {"inPlaceResize": {"enabled": False}, "podEviction": {"enabled": True}}
    ns = make_namespace(kerf, "e2e-blocked", evict_only)
    ns.apply(deployment(replicas=1))
    (pod,) = ns.running("web", 1)
    ns.apply(static_policy({"app": SIZED}))
    wait_until(lambda: ns.status().get("reason") == "SingleReplicaUnsafe", "SingleReplicaUnsafe")
    status = ns.status()
    assert status["phase"] == "Blocked"
    blocked = {c["type"]: c for c in status["conditions"]}["Blocked"]
    assert blocked["status"] == "True" and blocked["reason"] == "SingleReplicaUnsafe"
    # Later passes (the harness resyncs every 10 s) decide the same: still exactly one event.
    passes = _unchanged_passes(kerf)
    wait_until(lambda: _unchanged_passes(kerf) > passes, "a later pass over the workload")
    events = ns.events("Blocked")
    assert len(events) == 1 and "SingleReplicaUnsafe" in events[0]["note"]
    assert uids(ns.pods("web")) == uids([pod])


def test_kubectl_sorts_kerf_s_events_by_last_timestamp_with_the_rest(kerf: Kerf) -> None:
    """`kubectl get events --sort-by=.lastTimestamp`, the sort users type: an Event without
    that field (an events.k8s.io Event with only eventTime) sorts before every other."""
    evict_only = {"inPlaceResize": {"enabled": False}, "podEviction": {"enabled": True}}
    ns = make_namespace(kerf, "e2e-sorted", evict_only)
    ns.apply(deployment(replicas=1))
    ns.running("web", 1)
    ns.apply(static_policy({"app": SIZED}))
    wait_until(lambda: ns.events("Blocked"), "a Blocked event")
    (blocked,) = ns.events("Blocked")
    assert blocked["deprecatedCount"] == 1
    assert blocked["deprecatedLastTimestamp"] == blocked["eventTime"][:19] + "Z"
    columns = "LAST:.lastTimestamp,REASON:.reason,FROM:.reportingComponent"
    table = kerf.kubectl(
        "get",
        "events",
        "--sort-by=.lastTimestamp",
        "-n",
        ns.name,
        "-o",
        f"custom-columns={columns}",
    )
    rows = [row.split() for row in table.splitlines()[1:]]
    # A real server prints a null field `<nil>`, kubesim a missing one `<none>`.
    untimed = [row for row in rows if row[0] in ("<nil>", "<none>")]
    assert rows[: len(untimed)] == untimed, "kubectl puts the untimed first"
    timed = rows[len(untimed) :]
    assert [row[0] for row in timed] == sorted(row[0] for row in timed)
    assert ["Blocked", "rightsizing.kubex.ai/kerf-reconciler"] in [row[1:] for row in timed], rows


def test_a_resize_the_kubelet_refuses_with_error_waits_and_is_not_sent_again(
    kerf: Kerf,
) -> None:
    """The kubelet refuses a memory limit below what the container uses (PodResizeInProgress
    Error) and retries by itself: kerf shows its message, sends the resize once, and falls
    back after fallbackAfter (blocked: eviction is off). On a real kubelet the container
    really holds 320Mi when kerf asks for a 256Mi limit; kubesim and the agent play the
    refusal with `resize=Error`."""
    in_place_only = {"inPlaceResize": {"enabled": True}, "podEviction": {"enabled": False}}
    ns = make_namespace(kerf, "e2e-resize-error", in_place_only)
    big = {"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}}
    ns.apply(deployment(replicas=1, containers=[container("app", resources=big)]))
    (pod,) = ns.running("web", 1)
    name = pod["metadata"]["name"]
    if kerf.backend.real_kubelet:
        hold_memory(ns, name, "320Mi")
    else:
        ns.annotate_pod(name, f"{FAULT}/resize", "Error")
    small = {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"memory": "256Mi"}}
    ns.apply(static_policy({"app": small}, guardrails={"apply": {"fallbackAfter": "15s"}}))
    live = refused_then_blocked(ns, name)
    assert running_requests(live)["memory"] == "512Mi"


def _metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _unchanged_passes(kerf: Kerf) -> float:
    return _metric(kerf.metrics(kerf.reconcilers[0]), "kerf_reconciler_unchanged_passes_total")


def _writes(kerf: Kerf) -> float:
    """The reconciler's writes but its leader Lease renewals."""
    text = kerf.metrics(kerf.reconcilers[0])
    name = "kerf_reconciler_api_requests_total"
    verbs = ("create", "patch", "update", "delete")
    every = sum(_metric(text, name, verb=verb) for verb in verbs)
    return every - sum(_metric(text, name, verb=verb, resource="leases") for verb in verbs)


def test_a_steady_cluster_makes_no_writes(ns: Namespace) -> None:
    ns.apply(deployment())
    ns.running("web", 2)
    ns.apply(static_policy({"app": SIZED}))
    _resized_in_place(ns, ["app"])
    kerf = ns.kerf
    # Converged: the next resync passes over every workload write nothing.
    passes = _unchanged_passes(kerf)
    wait_until(lambda: _unchanged_passes(kerf) > passes, "a resync pass")
    writes = _writes(kerf)
    passes = _unchanged_passes(kerf)
    wait_until(lambda: _unchanged_passes(kerf) > passes, "another resync pass")
    assert _writes(kerf) == writes


def test_server_side_dry_run_admission_sizes_the_pod_and_creates_nothing(ns: Namespace) -> None:
    ns.apply(deployment(replicas=1))
    ns.running("web", 1)
    ns.apply(static_policy({"app": SIZED}))
    wait_until(lambda: published(ns), "the policy's values published on the Deployment")
    (replicaset,) = ns.get("replicasets", "-l", "app=web")["items"]
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": replicaset["metadata"]["name"],
        "uid": replicaset["metadata"]["uid"],
        "controller": True,
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "dry-run",
            "namespace": ns.name,
            "labels": {"app": "web"},
            "ownerReferences": [owner],
        },
        "spec": {"containers": [container("app")]},
    }
    answer = ns.kerf.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(pod)
    )
    assert requests(json.loads(answer)) == TARGET
    names = [p["metadata"]["name"] for p in ns.get("pods")["items"]]
    assert "dry-run" not in names


def test_approve_once_applies_the_audited_proposal_once(ns: Namespace) -> None:
    ns.apply(deployment())
    before = uids(ns.running("web", 2))
    ns.apply(static_policy({"app": SIZED}, mode="audit"))
    proposed = wait_until(
        lambda: ns.status() if ns.status().get("phase") == "Proposed" else None, "a proposal"
    )
    assert all(requests(p) == {"cpu": "100m", "memory": "128Mi"} for p in ns.pods("web"))
    proposal = proposed["proposal"]["id"]
    ns.kerf.kubectl(
        "-n",
        ns.name,
        "annotate",
        "rightsizingrecommendation",
        "deployment-web",
        f"rightsizing.kubex.ai/approve={proposal}",
    )

    def applied() -> bool:
        pods = ns.pods("web")
        return uids(pods) == before and all(requests(p) == TARGET for p in pods)

    wait_until(applied, "the approved proposal applied in place")
    wait_until(
        lambda: ns.status().get("approvedProposal") == proposal, "the approval recorded as used"
    )


def test_a_pdb_refusal_is_retried_then_the_eviction_goes_through(kerf: Kerf) -> None:
    evict_only = {"inPlaceResize": {"enabled": False}, "podEviction": {"enabled": True}}
    ns = make_namespace(kerf, "e2e-pdb", evict_only)
    ns.apply(deployment())
    before = uids(ns.running("web", 2))
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
    }
    ns.apply(budget)
    refused = _metric(
        kerf.metrics(kerf.reconcilers[0]), "kerf_reconciler_evictions_total", result="refused"
    )
    ns.apply(static_policy({"app": SIZED}))

    def refused_again() -> bool:
        text = kerf.metrics(kerf.reconcilers[0])
        return _metric(text, "kerf_reconciler_evictions_total", result="refused") > refused

    wait_until(refused_again, "the API server to refuse an eviction (429, the PDB)")
    assert uids(ns.pods("web")) == before
    budget["spec"] = {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    ns.kerf.kubectl("-n", ns.name, "delete", "pdb", "web")
    ns.apply(budget)

    def replaced() -> bool:
        pods = ns.pods("web")
        return (
            len(pods) == 2 and not uids(pods) & before and all(requests(p) == TARGET for p in pods)
        )

    wait_until(replaced, "both pods evicted one at a time and replaced sized")


def _rollback_state(ns: Namespace) -> dict:
    annotations = ns.get("deployment", "web")["metadata"].get("annotations") or {}
    text = annotations.get("rightsizing.kubex.ai/rollback-state")
    return json.loads(text) if text else {}


def test_oom_kills_after_a_downsize_roll_it_back_then_fail_permanently(ns: Namespace) -> None:
    """The downsize lowers the memory limit; each pod is then OOM-killed once (for real on a
    real kubelet: kerf-load uses more than the new limit)."""
    manifest = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "128Mi"}}
    ns.apply(deployment(containers=[container("app", resources=manifest)]))
    before = uids(ns.running("web", 2))
    ns.apply(rollback_policy("20s"))
    small = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "64Mi"}}
    ns.apply(static_policy({"app": small}, guardrails={"cooldown": "1s"}))

    def downsized() -> list[dict] | None:
        pods = ns.pods("web")
        ok = uids(pods) == before and all(running_requests(p)["memory"] == "64Mi" for p in pods)
        return pods if ok else None

    pods = wait_until(downsized, "the downsize applied in place")
    wait_until(lambda: _rollback_state(ns).get("mode") == "monitoring", "monitoring")
    for pod in pods:
        oom_kill(ns, pod["metadata"]["name"])

    def restored() -> bool:
        return all(running_requests(p)["memory"] == "128Mi" for p in ns.pods("web"))

    wait_until(restored, "the manifest's values restored")
    state = wait_until(
        lambda: (
            _rollback_state(ns) if _rollback_state(ns).get("mode") == "failedPermanent" else None
        ),
        "failedPermanent after the one attempt",
    )
    assert state["failureReason"] == "oomKilled"
    reasons = {e["reason"] for e in ns.events()}
    assert {"RollbackMonitoringStarted", "RollbackRollingBackStarted"} <= reasons


def test_a_follower_takes_over_when_the_leader_is_killed(kerf: Kerf) -> None:
    from harness.services import start_reconciler

    follower = start_reconciler(kerf, "reconciler-1")
    leader = kerf.reconcilers[0]
    leader.process.kill()
    leader.process.wait()
    try:
        wait_until(
            lambda: _metric(kerf.metrics(follower), "kerf_reconciler_leader") == 1,
            "the follower to take the Lease",
        )
        ns = make_namespace(kerf, "e2e-failover")
        ns.apply(deployment())
        ns.running("web", 2)
        ns.apply(static_policy({"app": SIZED}))
        wait_until(
            lambda: all(running_requests(p) == TARGET for p in ns.pods("web")),
            "the new leader to resize the pods",
        )
    finally:
        # The session's later tests read the first replica's metrics: the follower is it now.
        kerf.reconcilers.remove(leader)


def test_no_call_kerf_made_was_forbidden(kerf: Kerf) -> None:
    """Runs last: every call of the scenarios above passed the real server's RBAC with
    kerf's own ServiceAccounts (a 403 is a bug in manifests/)."""
    for replica in kerf.reconcilers:
        text = kerf.metrics(replica)
        assert _metric(text, "kerf_reconciler_api_requests_total", code="403") == 0
        assert "is forbidden: User" not in replica.text()
    assert "is forbidden: User" not in kerf.webhook.text()
