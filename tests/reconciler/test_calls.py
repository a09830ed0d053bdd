"""The API calls a converging workload costs (issue 8 part 8): every call the reconciler
makes is counted by verb and resource, and the calls of one rollout are pinned down so a
redundant write is caught."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from kubernetes_asyncio import client

from app.model.annotations import POD_INFO
from app.model.owners import WorkloadRef
from app.store.view import ClusterView
from benchmarks.reconciler import from_templates
from benchmarks.startup import cluster_objects
from reconciler.memory import Unreported
from reconciler.metrics import reconciler_metrics
from reconciler.outcome import Outcome
from reconciler.reconcile import WorkloadReconciler
from reconciler.report import admitted_with as _admitted_with
from reconciler.service import Reconciler
from tests.integration.reconciler.harness import (
    Kerf,
    RunningReconciler,
    create,
    deployment,
    idle,
    requests_of,
    running_kerf,
    start_stepped_decrease,
    static_policy,
    status_of,
    wait_for,
)
from tests.reconciler.test_cli import run_kerf

TARGET = {"cpu": "250m", "memory": "256Mi"}
REF = WorkloadRef("Deployment", "shop", "web")


class NoWriter:
    """A writer these tests never call (they drive the reconciler's bookkeeping)."""


def test_a_record_created_then_written_waits_for_the_written_version() -> None:
    # The create answers version 7 (no status: the status subresource ignores it), the
    # status write 8. A view that has the record at 7 would decide without the status
    # just written and write it (and its events) again.
    reconciler = WorkloadReconciler(
        ClusterView(),
        NoWriter(),  # type: ignore[arg-type]
        reconciler_metrics(),
        webhook_lease=None,
    )
    memory, done = reconciler.memory.get(REF.key), Outcome()
    # Both writes over the record the pass read (none): the second's stale version is
    # the one the first answered with.
    reconciler.actuator._wrote(memory, "record", "", {"metadata": {"resourceVersion": "7"}}, done)
    reconciler.actuator._wrote(memory, "record", "", {"metadata": {"resourceVersion": "8"}}, done)
    assert memory.behind({"workload": "3", "record": ""})
    assert memory.behind({"workload": "3", "record": "7"})
    assert not memory.behind({"workload": "3", "record": "8"})
    assert not memory.behind({"workload": "3", "record": "7"})  # caught up: forgotten


def calls(replica: RunningReconciler) -> dict[str, int]:
    """The reconciler's API calls so far by "verb resource" (the leader election's Lease
    traffic left out: it is the same for a cluster with nothing to do)."""
    counted: dict[str, int] = {}
    for metric in replica.service.metrics.api_calls.collect():
        for sample in metric.samples:
            labels = sample.labels
            if sample.name.endswith("_total") and labels["resource"] != "leases":
                key = f"{labels['verb']} {labels['resource']}"
                counted[key] = counted.get(key, 0) + int(sample.value)
    return counted


async def converged(kerf: Kerf) -> Any:
    """Both pods run the target and the record says Applied."""
    pods = await kerf.pods("web")
    done = len(pods) == 2 and all(requests_of(p) == TARGET for p in pods)
    return done and (await status_of(kerf)).get("phase") == "Applied"


async def test_two_pods_resized_in_place_cost_one_write_of_each_kind(
    tmp_path: Path,
) -> None:
    async with running_kerf(tmp_path) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=2)
        )
        await kerf.settle()
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))
        await wait_for(kerf, lambda: converged(kerf), "both pods resized and Applied")
        await wait_for(kerf, idle(replica), "the reconciler to settle")
        # The policy values published once, a resize per pod, the record created, the
        # Resized event (naming both pods) told, and the status that records it written
        # once (Applied: the rollout took no time worth showing): 3 calls per resized pod.
        assert calls(replica) == {
            "patch deployments": 1,
            "patch pods/resize": 2,
            "create rightsizingrecommendations": 1,
            "patch rightsizingrecommendations/status": 1,
            "create events": 1,
        }
        events = [
            e for e in await kerf.events() if e["reportingController"].startswith("rightsizing")
        ]
        assert [e["reason"] for e in events] == ["Resized"]
        assert "2 of 2 pods" in events[0]["note"]
        assert "app requests cpu=250m,memory=256Mi" in events[0]["note"]


async def test_a_rollout_that_takes_time_shows_pending_once(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=2)
        )
        await kerf.settle()
        kerf.sim.kubelet.hold_resizes = True  # the first resize waits on the kubelet
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))

        async def first_resized() -> bool:
            return [requests_of(p) == TARGET for p in await kerf.pods("web")].count(True) == 1

        await wait_for(kerf, first_resized, "the first pod resized")
        passes = replica.service.passes
        await wait_for(kerf, _more_passes(replica, passes + 3), "the rollout followed")
        # Under way for less than `pending_after` (the clock has not moved): not reported.
        assert await kerf.recommendation("deployment-web") is None

        await kerf.sim.advance(11)

        async def pending() -> bool:
            return (await status_of(kerf)).get("phase") == "Pending"

        await wait_for(kerf, pending, "phase Pending once the rollout has taken 10 s")
        status = await status_of(kerf)
        assert status["lastApplied"]["method"] == "inPlace"

        async def resized_notes() -> list[str]:
            # The event is created after the status write the check above saw.
            return [e["note"] for e in await kerf.events() if e["reason"] == "Resized"]

        notes = await wait_for(kerf, resized_notes, "the change's Resized event")
        assert notes == [
            "resized in place: app requests cpu=250m,memory=256Mi (1 of 2 pods, the others follow)"
        ]
        passes = replica.service.passes
        await wait_for(kerf, _more_passes(replica, passes + 3), "the rollout followed")

        kerf.sim.kubelet.hold_resizes = False
        await kerf.settle()
        await wait_for(kerf, lambda: converged(kerf), "both pods resized and Applied")
        await wait_for(kerf, idle(replica), "the reconciler to settle")
        # Pending written once however many passes followed the rollout (its one event
        # told just before), then Applied.
        assert calls(replica)["patch rightsizingrecommendations/status"] == 2
        assert calls(replica)["create events"] == 1


def _more_passes(replica: RunningReconciler, count: int) -> Any:
    async def check() -> bool:
        return replica.service.passes >= count

    return check


def test_values_found_on_a_pod_are_admitted_only_when_the_webhook_set_them() -> None:
    admitted = {"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}}
    info = orjson.dumps({"fingerprint": "f", "keys": [], "containers": admitted}).decode()
    pod = {"metadata": {"annotations": {POD_INFO: info}}}
    assert _admitted_with(pod, {"app": {"requests": {"cpu": "0.25", "memory": "256Mi"}}})
    # Admitted with other values, then resized in place (the record of it lost).
    assert not _admitted_with(pod, {"app": {"requests": {"cpu": "300m", "memory": "256Mi"}}})
    assert not _admitted_with({"metadata": {}}, admitted)


def test_the_benchmark_pods_run_their_replica_sets_template() -> None:
    objects = list(
        from_templates(cluster_objects(workloads=3, pods=6, nodes=2, policies=2, namespaces=1))
    )
    templates = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]["containers"]
        for o in objects
        if o["kind"] == "ReplicaSet"
    }
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert len(pods) == 6
    for pod in pods:
        template = templates[pod["metadata"]["ownerReferences"][0]["name"]]
        wanted = [c["resources"] for c in template]
        assert [c["resources"] for c in pod["spec"]["containers"]] == wanted
        assert [c["resources"] for c in pod["status"]["containerStatuses"]] == wanted


async def test_a_stepped_decrease_rolls_out_then_waits_its_cooldown(tmp_path: Path) -> None:
    step = {"cpu": "200m", "memory": "256Mi"}  # half of the current values: one step
    async with running_kerf(tmp_path) as kerf:
        replica = await start_stepped_decrease(kerf)

        async def waiting() -> bool:
            pods = await kerf.pods("web")
            stepped = len(pods) == 2 and all(requests_of(p) == step for p in pods)
            return stepped and (await status_of(kerf)).get("reason") == "Cooldown"

        await wait_for(kerf, waiting, "both pods at the first step, the next one waiting")
        await wait_for(kerf, idle(replica), "the reconciler to settle")
        status = await status_of(kerf)
        assert status["phase"] == "Applied"  # the first step runs on every pod
        assert status["lastApplied"]["containers"]["app"]["requests"] == step
        # The first step rolled out to both pods before the status was written (a pod
        # already resized wants the next step: it is decided as the status will read),
        # then one status write records the step and the cooldown that holds the next,
        # its two events told just before.
        assert calls(replica) == {
            "patch deployments": 1,
            "patch pods/resize": 2,
            "create rightsizingrecommendations": 1,
            "patch rightsizingrecommendations/status": 1,
            "create events": 2,
        }
        events = [
            e for e in await kerf.events() if e["reportingController"].startswith("rightsizing")
        ]
        notes = {e["reason"]: e["note"] for e in events}
        assert len(events) == 2 and notes["Blocked"].startswith("Cooldown: ")
        assert notes["Resized"].startswith("resized in place: app requests cpu=200m,memory=256Mi")
        assert notes["Resized"].endswith("(2 of 2 pods)")


async def test_once_reports_the_pass_it_made(tmp_path: Path) -> None:
    # `--once` makes one pass per workload and exits: a rollout is not followed to its
    # end, so the pass reports the first pod's resize instead of waiting for the rest.
    async with running_kerf(tmp_path, webhook=False) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=2)
        )
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))
        await kerf.settle()
        code, out = await run_kerf(kerf.sim.kubeconfig_path, "--once")
        assert code == 0, out
        status = await status_of(kerf)
        assert status["phase"] == "Pending"
        assert status["lastApplied"]["method"] == "inPlace"
        notes = [e["note"] for e in await kerf.events() if e["reason"] == "Resized"]
        assert notes == [
            "resized in place: app requests cpu=250m,memory=256Mi (1 of 2 pods, the others follow)"
        ]


def test_a_change_of_leader_forgets_the_rollouts_not_reported() -> None:
    # Another leader may have finished and reported the rollout meanwhile: a replica that
    # leads again must not report its old memory of it over the record.
    metrics = reconciler_metrics()
    reconciler = WorkloadReconciler(
        ClusterView(),
        NoWriter(),  # type: ignore[arg-type]
        metrics,
        webhook_lease=None,
    )
    service = Reconciler(ClusterView(), reconciler, metrics)  # type: ignore[arg-type]
    memory = reconciler.memory.get(REF.key)
    memory.unreported = Unreported(
        datetime(2026, 11, 30, tzinfo=UTC), {"method": "inPlace", "containers": {}}
    )
    service.on_leadership(False)
    assert memory.unreported is None
