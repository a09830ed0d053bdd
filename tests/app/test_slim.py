"""What the view keeps of each object (`app/store/slim.py`): every decision, pod state and
rollback health read from the projections equals the one read from the full objects."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

import app.store.view
from app.decide import decide_pod
from app.model.crd import API_VERSION, AutomationStrategy, KerfResource, parse_object
from app.model.workloads import Workload
from app.policy.podstate import is_ready, is_running, resize_progress
from app.policy.rollback_health import HealthThresholds, pod_health, running_resources
from app.policy.rollback_monitor import monitor_inputs
from app.store import slim
from app.store.statedir import load_objects
from app.store.view import ClusterView
from benchmarks.startup import STAMP, cluster_objects
from tests.app import builders as b

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STATE_DIRS = sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and any(p.glob("*.y*ml")))
THRESHOLDS = HealthThresholds(oom_kills=1, restarts=1, throttling_ratio=0.5)


def _views(
    objects: Iterable[Any], monkeypatch: pytest.MonkeyPatch
) -> tuple[ClusterView, ClusterView]:
    """The same objects in a view that keeps them whole and in one that projects them."""
    objects = list(objects)
    full = ClusterView()
    with monkeypatch.context() as patch:
        patch.setattr(app.store.view, "project", lambda obj: obj)
        for obj in objects:
            full.apply(obj if isinstance(obj, KerfResource) else copy.deepcopy(obj))
    slimmed = ClusterView()
    for obj in objects:
        slimmed.apply(obj)
    full.synced = slimmed.synced = True
    return full, slimmed


def _kerf_annotations(workload: Workload) -> Workload:
    """The workload as the view keeps it: only the annotations kerf reads."""
    kept = {k: v for k, v in workload.annotations.items() if slim.kept_annotation(k)}
    return dataclasses.replace(workload, annotations=kept)


def _pod_reads(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        is_running(pod),
        is_ready(pod),
        resize_progress(pod),
        pod_health(pod, THRESHOLDS, None),
        pod_health(pod, THRESHOLDS, b.NOW),
        running_resources(pod),
    )


def _assert_same_reads(full: ClusterView, slimmed: ClusterView) -> int:
    compared = 0
    for pod in full.pods():
        meta = pod["metadata"]
        kept = slimmed.get("Pod", meta.get("namespace") or "default", meta["name"])
        assert kept is not None
        assert _pod_reads(kept) == _pod_reads(pod)
        for path in ("running", "admission"):
            assert decide_pod(slimmed, kept, now=b.NOW, path=path) == decide_pod(
                full, pod, now=b.NOW, path=path
            ), f"{meta['name']} ({path})"
        compared += 1
    for workload in full.workloads():
        assert slimmed.workload(workload.ref) == _kerf_annotations(workload)
        assert monitor_inputs(slimmed, workload).pods == [
            slim.project(p) for p in monitor_inputs(full, workload).pods
        ]
    return compared


@pytest.mark.parametrize("directory", STATE_DIRS, ids=lambda p: p.name)
def test_the_bundled_examples_decide_the_same_over_the_projections(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full, slimmed = _views(load_objects([directory]), monkeypatch)
    _assert_same_reads(full, slimmed)


def _eventful(pod: dict[str, Any], index: int) -> dict[str, Any]:
    """A pod of the bench cluster with what its status can say: restarts, OOM kills,
    crash loops, a pending resize, a JVM heap, a sidecar, annotations kerf does not read."""
    pod = copy.deepcopy(pod)
    container = pod["spec"]["containers"][0]
    status = pod["status"]["containerStatuses"][0]
    pod["metadata"].setdefault("annotations", {})["prometheus.io/scrape"] = "true"
    if index % 2:
        container["env"] = [
            {"name": "JAVA_TOOL_OPTIONS", "value": "-Xmx8g"},
            {"name": "OTHER", "value": "x"},
        ]
    match index % 5:
        case 0:
            pod["metadata"]["ownerReferences"].insert(0, {"kind": "ConfigMap", "name": "seed"})
            status["restartCount"] = 3
            status["lastState"] = {
                "terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": STAMP}
            }
        case 1:
            status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}
        case 2:
            pod["status"]["conditions"].append(
                {
                    "type": "PodResizePending",
                    "status": "True",
                    "reason": "Deferred",
                    "message": "node is full",
                    "lastTransitionTime": STAMP,
                }
            )
            container["resizePolicy"] = [
                {"resourceName": "memory", "restartPolicy": "RestartContainer"}
            ]
        case 3:
            pod["spec"]["initContainers"] = [
                {
                    "name": "proxy",
                    "image": "proxy:1",
                    "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                }
            ]
            pod["metadata"]["annotations"]["rightsizing.kubex.ai/skip-containers"] = "proxy"
            # a RuntimeClass's overhead, which the node counts
            pod["spec"]["overhead"] = {"cpu": "10m", "memory": "8Mi"}
        case 4:
            pod["status"]["phase"] = "Pending"
            pod["spec"].pop("nodeName")
            pod["status"]["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available",
                    "lastTransitionTime": STAMP,
                }
            ]
    return pod


def test_the_bench_cluster_decides_the_same_over_the_projections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objects = []
    for index, obj in enumerate(
        cluster_objects(workloads=60, pods=90, nodes=5, policies=10, namespaces=3)
    ):
        obj = orjson.loads(orjson.dumps(obj))  # as the informer parses it
        if obj["apiVersion"] == API_VERSION:
            objects.append(parse_object(obj, "bench"))
        else:
            objects.append(_eventful(obj, index) if obj["kind"] == "Pod" else obj)
    full, slimmed = _views(objects, monkeypatch)

    def shared() -> list[Any]:
        """The view's pods and the maps its workloads keep (a Workload's reference is a
        compiled dataclass in the compiled build, which deepcopy cannot rebuild)."""
        maps = [(w.labels, w.annotations, w.containers) for w in slimmed.workloads()]
        return [list(slimmed.pods()), maps]

    kept = copy.deepcopy(shared())
    assert _assert_same_reads(full, slimmed) == 90
    # The view's pods and workloads share parts (app/store/slim.py): deciding changed none.
    assert shared() == kept
    pods = list(slimmed.pods())
    assert len({id(p["metadata"]["labels"]) for p in pods}) == 60  # one per ReplicaSet
    assert len({id(p["status"].get("conditions")) for p in pods}) < len(pods) / 3


def test_a_workload_is_built_the_same_from_its_projection() -> None:
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": "nightly",
            "namespace": b.NS,
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
                "rightsizing.kubex.ai/pause-until": "infinite",
            },
        },
        "spec": {
            "schedule": "0 1 * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "job",
                                    "image": "job:1",
                                    "resources": {"requests": {"cpu": "1"}},
                                }
                            ]
                        }
                    }
                }
            },
        },
    }
    for obj in (cron, b.deployment(replicas=4)):
        assert Workload.from_object(slim.project(obj)) == _kerf_annotations(
            Workload.from_object(obj)
        )
    assert Workload.from_object(slim.project(cron)).annotations == {
        "rightsizing.kubex.ai/pause-until": "infinite"
    }


def test_the_pod_projection_keeps_only_what_kerf_reads() -> None:
    pod = next(
        o
        for o in cluster_objects(workloads=1, pods=1, nodes=1, policies=1, namespaces=1)
        if o["kind"] == "Pod"
    )
    pod["metadata"].update(resourceVersion="42", managedFields=[{"manager": "kubectl"}])
    kept = slim.project(pod)
    assert set(kept["spec"]) == {"nodeName", "containers"}
    assert set(kept["spec"]["containers"][0]) == {"name", "resources"}
    assert "managedFields" not in kept["metadata"]
    assert [c["type"] for c in kept["status"]["conditions"]] == ["Ready", "PodScheduled"]
    assert kept["metadata"]["resourceVersion"] == "42"
    assert len(orjson.dumps(kept)) < len(orjson.dumps(pod)) / 2


def test_a_kerf_object_keeps_its_spec_and_status_and_loses_unread_metadata() -> None:
    record = {
        "apiVersion": API_VERSION,
        "kind": "RightsizingRecommendation",
        "metadata": {
            "name": "deployment-web",
            "namespace": b.NS,
            "resourceVersion": "7",
            "generation": 2,
            "annotations": {
                "rightsizing.kubex.ai/approve": "p-1",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
            },
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "managedFields": [{"manager": "kerf"}],
        },
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        "status": {
            "phase": "Applied",
            "current": {"app": {"requests": {"cpu": "250m"}}},
            "lastApplied": {"at": STAMP, "method": "inPlace", "containers": {}},
        },
    }
    full = parse_object(copy.deepcopy(record), "test")
    kept = parse_object(slim.kerf_object(record), "test")
    assert kept.spec == full.spec and kept.status == full.status
    assert kept.metadata.resource_version == "7" and kept.metadata.generation == 2
    assert kept.metadata.annotations == {"rightsizing.kubex.ai/approve": "p-1"}
    assert kept.metadata.owner_references == []
    assert "managedFields" not in (kept.metadata.model_extra or {})


def test_kerf_models_in_the_view_share_their_field_sets() -> None:
    def strategy(name: str) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": "AutomationStrategy",
            "metadata": {"name": name, "namespace": b.NS},
            "spec": {"inPlaceResize": {"enabled": True}, "podEviction": {"enabled": False}},
        }

    view = ClusterView()
    view.apply(parse_object(strategy("a"), "test"))
    view.apply(parse_object(strategy("b"), "test"))
    a, c = (view.kerf_object("AutomationStrategy", b.NS, n) for n in ("a", "b"))
    assert isinstance(a, AutomationStrategy) and isinstance(c, AutomationStrategy)
    assert (
        a.spec.pod_eviction.__pydantic_fields_set__ is c.spec.pod_eviction.__pydantic_fields_set__
    )
    assert a.metadata.__pydantic_fields_set__ is c.metadata.__pydantic_fields_set__
    assert a.model_dump() == parse_object(strategy("a"), "test").model_dump()
    with pytest.raises(ValidationError):  # view models are read, never changed
        a.spec.pod_eviction = a.spec.pod_eviction


def test_a_workload_built_from_a_projection_it_owns_keeps_its_maps() -> None:
    """The view gives its fresh projection up to the Workload (no second copy of the
    labels, annotations and resource maps); any other caller's object is copied, and a
    quantity that is not a string is still turned into one."""
    deployment = b.deployment(annotations={"rightsizing.kubex.ai/pause-until": "infinite"})
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"cpu": 2}
    projection = slim.project(deployment)
    owned = Workload.from_object(projection, owned=True)
    copied = Workload.from_object(projection)
    assert owned == copied
    meta = projection["metadata"]
    resources = projection["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert owned.labels is meta["labels"] and owned.annotations is meta["annotations"]
    assert owned.containers["app"]["requests"] is resources["requests"]
    assert owned.containers["app"]["limits"] == {"cpu": "2"}
    assert copied.labels is not meta["labels"]
    assert copied.containers["app"]["requests"] is not resources["requests"]


def _running(pod: dict[str, Any], since: str) -> dict[str, Any]:
    """`pod` as the kubelet reports it: running its spec's resources, ready and scheduled
    since `since`."""
    pod["status"]["containerStatuses"] = [
        {"name": c["name"], "restartCount": 0, "resources": copy.deepcopy(c["resources"])}
        for c in pod["spec"]["containers"]
    ]
    pod["status"]["conditions"] = [
        {"type": kind, "status": "True", "lastTransitionTime": since}
        for kind in ("Initialized", "Ready", "PodScheduled")
    ]
    return pod


def test_sibling_pods_share_what_they_have_alike() -> None:
    """The pods of one ReplicaSet keep one copy of their labels, owner, containers and
    statuses while those are equal; a resized sibling shares what it still has alike."""
    v = ClusterView()
    resized = {"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": b.APP_RES["limits"]}
    for name, node, containers in (
        ("web-7d4b9-a", "node-a", None),
        ("web-7d4b9-b", "node-b", None),
        ("web-7d4b9-c", "node-a", {"app": resized}),
    ):
        v.apply(_running(b.pod(name, node=node, containers=containers), "2026-01-0%sT00:00:00Z"))
    first, second, third = (v.get("Pod", b.NS, f"web-7d4b9-{n}") for n in "abc")
    assert first is not None and second is not None and third is not None
    for section, part in (
        ("metadata", "labels"),
        ("metadata", "ownerReferences"),
        ("spec", "containers"),
        ("status", "containerStatuses"),
        ("status", "conditions"),
    ):
        assert second[section][part] is first[section][part], part  # type: ignore[literal-required]
    assert second["spec"]["nodeName"] == "node-b"
    assert second["metadata"]["name"] == "web-7d4b9-b"
    resources = third["spec"]["containers"][0]["resources"]
    assert resources["requests"]["cpu"] == "200m"
    assert resources["limits"] is first["spec"]["containers"][0]["resources"]["limits"]
    assert third["status"]["containerStatuses"][0]["resources"] is resources
    assert third["metadata"]["labels"] is first["metadata"]["labels"]


def test_running_pods_share_their_conditions_without_times() -> None:
    """Readiness and scheduling are kept without their times (kerf reads those of the
    resize conditions only), so most running pods have one list of conditions; one with
    a message or a time keeps its own."""
    ready = slim.project(_running(b.pod("web-7d4b9-a"), "2026-01-01T00:00:00Z"))
    other = _running(b.pod("api-5c6d7-a", workload="api"), "2026-02-02T00:00:00Z")
    assert slim.project(other)["status"]["conditions"] is ready["status"]["conditions"]
    assert ready["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]
    other["status"]["conditions"].append(
        {
            "type": "PodResizeInProgress",
            "status": "True",
            "message": "resizing",
            "lastTransitionTime": "2026-02-02T00:00:01Z",
        }
    )
    resizing = slim.project(other)["status"]["conditions"]
    assert resizing is not ready["status"]["conditions"]
    assert resizing[-1]["lastTransitionTime"] == "2026-02-02T00:00:01Z"


@pytest.mark.parametrize("pod_first", [True, False], ids=["pod-first", "workload-first"])
def test_a_workload_and_its_pod_share_their_resources(pod_first: bool) -> None:
    """A workload's template and its pods ask alike until a resize: one copy of the
    resources for the Workload, the pod's spec and its status (whichever the informers
    list first)."""
    pod = _running(b.pod(node="node-a"), "2026-01-01T00:00:00Z")
    objects = [pod, b.deployment()] if pod_first else [b.deployment(), pod]
    v = ClusterView()
    for obj in objects:
        v.apply(obj)
    workload = next(iter(v.workloads()))
    kept = v.get("Pod", b.NS, pod["metadata"]["name"])
    assert kept is not None
    resources = kept["spec"]["containers"][0]["resources"]
    assert workload.containers["app"] is resources
    assert kept["status"]["containerStatuses"][0]["resources"] is resources
    assert workload.containers["app"] == b.APP_RES


def test_a_replica_set_keeps_its_name_version_and_owner() -> None:
    """A ReplicaSet is read for its owner (a pod's is resolved through it) and its
    version; its name is the interned string its pods' owner references hold."""
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "".join(["web-", "7d4b9"]),  # not the literal's interned string
            "namespace": b.NS,
            "uid": "u-1",
            "resourceVersion": "7",
            "creationTimestamp": STAMP,
            "labels": {"app": "web"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "web",
                    "uid": "u-0",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"replicas": 2},
    }
    kept = slim.project(rs)
    assert kept == {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "web-7d4b9",
            "namespace": b.NS,
            "resourceVersion": "7",
            "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}],
        },
    }
    pod = slim.project(b.pod())
    assert kept["metadata"]["name"] is pod["metadata"]["ownerReferences"][0]["name"]


def test_pods_share_their_generate_name_and_creation_time() -> None:
    """A ReplicaSet's pods have one generateName, and pods created in the same second one
    creation time: one string each, not one per pod (as they come from JSON)."""
    kept = []
    for name in ("web-7d4b9-a", "web-7d4b9-b"):
        pod = b.pod(name)
        pod["metadata"]["generateName"] = "".join(["web-7d4b9", "-"])
        pod["metadata"]["creationTimestamp"] = "".join(["2026-01-01T00:00:00", "Z"])
        kept.append(slim.project(pod)["metadata"])
    assert kept[0]["generateName"] is kept[1]["generateName"]
    assert kept[0]["creationTimestamp"] is kept[1]["creationTimestamp"]
