"""kerf on a real node (`devcluster --kubelet real`): what only a kubelet and real
containers can show. Each scenario asserts the real outcome: the container's cgroup read
inside the pod, the kubelet's own answers and Events, real memory use.

The pods run kerf-load (docs/devcluster.md), told by its arguments how much CPU and memory
to use."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.model.recommendations import DATA_KEY
from app.model.workloads import oom_looping
from app.recommend.rows import CONFIGMAP_NAME
from devcluster.images import LOAD_IMAGE
from harness.backend import real_node_missing, running_backend
from harness.services import Kerf, running_kerf
from harness.wait import wait_until
from tests.e2e.backends import e2e_kubelet
from tests.e2e.recommending import query, recommend_once, tls_files
from tests.e2e.scenario import (
    GROUP_VERSION,
    Namespace,
    cgroup,
    container_status,
    delete_namespace,
    make_namespace,
    refused_then_blocked,
    rollback_policy,
    running_requests,
    static_policy,
    uids,
)
from tests.recommender.prometheus import needs_prometheus, running_prometheus

pytestmark = pytest.mark.e2e
#: The node's allocatable when this file starts a real node of its own (the shared one is
#: tests/e2e/backends.py's): what the scenarios' pods ask for, with room to spare.
NODE_CPU = "1500m"
NODE_MEMORY = "3Gi"


@pytest.fixture(scope="module")
def kerf(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Kerf]:
    """kerf installed and running on a devcluster with a real kubelet: the package's
    shared one when `make e2e` runs the scenarios on a real kubelet (one real node runs on
    a machine at a time), else one of its own."""
    if e2e_kubelet() == "real":
        yield request.getfixturevalue("shared_kerf")
        return
    why = real_node_missing()
    if why:
        pytest.skip(f"no real node here: {why}")
    workdir = tmp_path_factory.mktemp("real-node")
    with (
        running_backend(
            "real", workdir, nodes=1, cpu=NODE_CPU, memory=NODE_MEMORY, kubelet="real"
        ) as cluster,
        running_kerf(cluster, workdir) as running,
    ):
        yield running


@pytest.fixture
def fresh(kerf: Kerf, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace name for the test; the namespace and its pods are gone after it (the
    node's allocatable is the machine's: pods left behind would crowd the next test)."""
    name = "real-" + request.node.name.removeprefix("test_")[:40].replace("_", "-").rstrip("-")
    yield name
    delete_namespace(kerf, name)


def load(
    name: str = "app",
    *,
    uses: tuple[str, str] = ("20m", "32Mi"),
    requests: tuple[str, str] = ("100m", "128Mi"),
    limits: tuple[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A kerf-load container using `uses` (cpu, memory), with its requests and limits."""
    resources: dict[str, Any] = {"requests": {"cpu": requests[0], "memory": requests[1]}}
    if limits:
        resources["limits"] = {"cpu": limits[0], "memory": limits[1]}
    return {
        "name": name,
        "image": LOAD_IMAGE,
        "imagePullPolicy": "Never",
        "args": ["run", "--cpu", uses[0], "--memory", uses[1]],
        "resources": resources,
        **extra,
    }


def deployment(
    containers: list[dict[str, Any]],
    replicas: int = 1,
    init_containers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    labels = {"app": "web"}
    spec: dict[str, Any] = {"containers": containers, "terminationGracePeriodSeconds": 1}
    if init_containers:
        spec["initContainers"] = init_containers
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def kubelet_events(ns: Namespace, pod: str, reason: str) -> list[dict[str, Any]]:
    """The kubelet's core/v1 Events of `reason` about `pod`."""
    items = ns.get("events", "--field-selector", f"involvedObject.name={pod}")["items"]
    return [
        e
        for e in items
        if e.get("reason") == reason and (e.get("source") or {}).get("component") == "kubelet"
    ]


def test_a_resize_in_place_changes_the_containers_cgroup_and_keeps_it_running(
    kerf: Kerf, fresh: str
) -> None:
    ns = make_namespace(kerf, fresh)
    ns.apply(deployment([load(limits=("200m", "256Mi"), requests=("200m", "256Mi"))]))
    (pod,) = ns.running("web", 1)
    name = pod["metadata"]["name"]
    before = cgroup(ns, name)
    assert before["cpu.cfs_quota_us"] == 20000
    assert before["memory.limit_in_bytes"] == 256 * 2**20
    target = {
        "requests": {"cpu": "300m", "memory": "192Mi"},
        "limits": {"cpu": "300m", "memory": "192Mi"},
    }
    ns.apply(static_policy({"app": target}))

    def resized() -> dict[str, Any] | None:
        pods = ns.pods("web")
        done = pods and running_requests(pods[0]) == target["requests"]
        return pods[0] if done else None

    after_pod = wait_until(resized, "the kubelet to run the new values")
    assert uids([after_pod]) == uids([pod])
    assert container_status(after_pod)["restartCount"] == 0
    after = cgroup(ns, name)
    assert after["cpu.cfs_quota_us"] == 30000
    assert after["memory.limit_in_bytes"] == 192 * 2**20
    completed = wait_until(
        lambda: kubelet_events(ns, name, "ResizeCompleted"), "the kubelet's ResizeCompleted"
    )
    sent = _resized_at(kerf, name)
    done = max(datetime.fromisoformat(e["lastTimestamp"]) for e in completed)
    print(
        f"\nreal resize of {name}: cpu.cfs_quota_us {before['cpu.cfs_quota_us']} ->"
        f" {after['cpu.cfs_quota_us']}, memory.limit_in_bytes"
        f" {before['memory.limit_in_bytes']} -> {after['memory.limit_in_bytes']};"
        f" kerf's pods/resize at {sent.isoformat()}, the kubelet's ResizeCompleted at"
        f" {done.isoformat()} (to the second)"
    )


def _resized_at(kerf: Kerf, pod: str) -> datetime:
    """When the reconciler sent its last resize of `pod` (its `resized in place` log line,
    in any replica's log: on the shared cluster a follower took over in test_scenarios.py)."""
    lines = "\n".join(replica.text() for replica in kerf.reconcilers).splitlines()
    stamps = [
        datetime.fromisoformat(entry["ts"])
        for entry in (json.loads(line) for line in lines if line.startswith("{"))
        if entry.get("msg") == "resized in place" and entry.get("pod") == pod
    ]
    return max(stamps)


def test_a_memory_limit_below_real_usage_waits_for_the_kubelet_and_is_not_sent_again(
    kerf: Kerf, fresh: str
) -> None:
    ns = make_namespace(
        kerf,
        fresh,
        {"inPlaceResize": {"enabled": True}, "podEviction": {"enabled": False}},
    )
    ns.apply(
        deployment(
            [load(uses=("20m", "320Mi"), limits=("200m", "512Mi"), requests=("200m", "512Mi"))]
        )
    )
    (pod,) = ns.running("web", 1)
    name = pod["metadata"]["name"]
    wait_until(
        lambda: cgroup(ns, name).get("memory.usage_in_bytes", 0) > 300 * 2**20,
        "kerf-load to hold its memory",
    )
    small = {
        "requests": {"cpu": "200m", "memory": "256Mi"},
        "limits": {"cpu": "200m", "memory": "256Mi"},
    }
    ns.apply(static_policy({"app": small}, guardrails={"apply": {"fallbackAfter": "20s"}}))

    live = refused_then_blocked(ns, name)
    assert container_status(live)["restartCount"] == 0
    assert cgroup(ns, name)["memory.limit_in_bytes"] == 512 * 2**20


def test_a_sidecar_is_resized_in_place_on_the_real_node(kerf: Kerf, fresh: str) -> None:
    ns = make_namespace(kerf, fresh)
    sidecar = load(
        "proxy", requests=("100m", "64Mi"), limits=("100m", "64Mi"), restartPolicy="Always"
    )
    ns.apply(
        deployment(
            [load(limits=("100m", "128Mi"), requests=("100m", "128Mi"))], init_containers=[sidecar]
        )
    )
    (pod,) = ns.running("web", 1)
    name = pod["metadata"]["name"]
    target = {
        "requests": {"cpu": "150m", "memory": "96Mi"},
        "limits": {"cpu": "150m", "memory": "96Mi"},
    }
    ns.apply(static_policy({"proxy": target}))

    def resized() -> dict[str, Any] | None:
        pods = ns.pods("web")
        return (
            pods[0] if pods and running_requests(pods[0], "proxy") == target["requests"] else None
        )

    after = wait_until(resized, "the sidecar resized")
    assert uids([after]) == uids([pod])
    assert container_status(after, "proxy")["restartCount"] == 0
    limits = cgroup(ns, name, "proxy")
    assert limits["cpu.cfs_quota_us"] == 15000
    assert limits["memory.limit_in_bytes"] == 96 * 2**20


def _rollback_state(ns: Namespace) -> dict[str, Any]:
    annotations = ns.get("deployment", "web")["metadata"].get("annotations") or {}
    text = annotations.get("rightsizing.kubex.ai/rollback-state")
    return dict(json.loads(text)) if text else {}


def test_a_downsize_too_deep_is_oom_killed_for_real_and_rolled_back_to_health(
    kerf: Kerf, fresh: str
) -> None:
    ns = make_namespace(kerf, fresh)
    ns.apply(
        deployment(
            [load(uses=("20m", "64Mi"), requests=("100m", "256Mi"), limits=("200m", "256Mi"))]
        )
    )
    (pod,) = ns.running("web", 1)
    name = pod["metadata"]["name"]
    ns.apply(rollback_policy("40s"))
    small = {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "200m", "memory": "128Mi"},
    }
    ns.apply(static_policy({"app": small}, guardrails={"cooldown": "1s"}))

    def downsized() -> bool:
        pods = ns.pods("web")
        return uids(pods) == uids([pod]) and running_requests(pods[0])["memory"] == "128Mi"

    wait_until(downsized, "the downsize applied in place")
    assert cgroup(ns, name)["memory.limit_in_bytes"] == 128 * 2**20
    wait_until(lambda: _rollback_state(ns).get("mode") == "monitoring", "monitoring")
    # The workload needs more than the downsize left it: the kernel kills it.
    kerf.kubectl("-n", ns.name, "exec", name, "--", "kerf-load", "set", "memory=200Mi")

    def oom_killed() -> bool:
        entry = container_status(ns.get("pod", name))
        last = (entry.get("lastState") or {}).get("terminated") or {}
        return last.get("reason") == "OOMKilled" and last.get("exitCode") == 137

    wait_until(oom_killed, "a real OOM kill")

    def restored() -> dict[str, Any] | None:
        pods = ns.pods("web")
        if len(pods) != 1:
            return None
        entry = container_status(pods[0])
        ok = running_requests(pods[0])["memory"] == "256Mi" and entry.get("ready")
        return pods[0] if ok else None

    healthy = wait_until(restored, "the manifest's values restored and the pod ready")
    restarts = container_status(healthy)["restartCount"]
    assert cgroup(ns, healthy["metadata"]["name"])["memory.limit_in_bytes"] == 256 * 2**20
    state = wait_until(
        lambda: (
            _rollback_state(ns) if _rollback_state(ns).get("mode") == "failedPermanent" else None
        ),
        "the rollback to end (one attempt)",
    )
    assert state["failureReason"] == "oomKilled"
    # No OOM kill after the restore: the container has not restarted since.
    assert container_status(ns.get("pod", healthy["metadata"]["name"]))["restartCount"] == restarts


#: The kubelet's cAdvisor refreshes a container's figures every 2 s on devcluster
#: (housekeeping; 10 s by default), and its series carry that time: a second's scrape
#: stores a new point only that often. The analysis spans a minute of them.
HISTORY = ("--window", "60s", "--step", "5s", "--rate-window", "30s", "--max-gap", "25s")
HISTORY += ("--learning-period", "60s")


def _history(url: str, metric: str, namespace: str) -> bool:
    """The container has a minute of distinct points of `metric`."""
    found = query(url, f'count_over_time({metric}{{namespace="{namespace}",container="app"}}[70s])')
    return len(found) == 1 and float(found[0]["value"][1]) >= 20


def _recommended(kerf: Kerf, namespace: str, tmp_path: Path, metric: str) -> dict[str, Any]:
    """`kerf recommend`'s row for the namespace's `app` container, from a Prometheus that
    scraped the kubelet's cAdvisor (`metric` for a minute) through the API server."""
    tls = tls_files(kerf.backend.kubeconfig, tmp_path)
    with running_prometheus(tmp_path / "tsdb", scrape=[kerf.backend.cadvisor], tls=tls) as url:
        wait_until(lambda: _history(url, metric, namespace), f"a minute of {metric}")
        now = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
        run = recommend_once(kerf.backend.kubeconfig, url, now, *HISTORY)
    assert run.returncode == 0, run.stderr
    [row] = [r for r in json.loads(run.stdout)["recommendations"] if r["namespace"] == namespace]
    return dict(row)


#: The rows of the namespace, applied at once (a minute of history is all there is).
PROACTIVE = {
    "apiVersion": GROUP_VERSION,
    "kind": "ProactivePolicy",
    "metadata": {"name": "web"},
    "spec": {
        "automationStrategyRef": {"name": "default"},
        "scope": {"labelSelector": {"matchLabels": {"app": "web"}}},
        "guardrails": {"learningPeriod": "1s", "minConfidence": "0"},
    },
}


@needs_prometheus
def test_recommendations_from_the_real_cadvisor_follow_the_real_usage_and_apply(
    kerf: Kerf, fresh: str, tmp_path: Path
) -> None:
    """Prometheus scrapes the kubelet's cAdvisor (through the API server's node proxy),
    `kerf recommend` turns kerf-load's real use into a row, and the reconciler applies it
    in place without an OOM kill."""
    ns = make_namespace(kerf, fresh)
    # Its request covers its use: on a busy machine it still gets the CPU it burns.
    ns.apply(
        deployment(
            [load(uses=("300m", "200Mi"), requests=("300m", "128Mi"), limits=("1", "512Mi"))]
        )
    )
    (pod,) = ns.running("web", 1)
    row = _recommended(kerf, fresh, tmp_path, "container_memory_working_set_bytes")
    cpu_m = int(row["requests"]["cpu"].removesuffix("m"))
    memory_mi = int(row["requests"]["memory"].removesuffix("Mi"))
    print(f"\nreal recommendation for kerf-load at cpu=300m memory=200Mi: {row['requests']}")
    assert 255 <= cpu_m <= 345, row
    # The working set (200Mi and the program's own few MiB) + kerf's 15 % headroom.
    assert 0.85 * 230 <= memory_mi <= 1.15 * 230, row
    ns.apply(PROACTIVE)

    def applied() -> dict[str, Any] | None:
        pods = ns.pods("web")
        ok = pods and running_requests(pods[0])["memory"] == row["requests"]["memory"]
        return pods[0] if ok else None

    # The memory grows to the row's; the CPU row is within kerf's tolerance of 300m.
    after = wait_until(applied, "the row applied in place")
    assert uids([after]) == uids([pod])
    entry = container_status(ns.get("pod", after["metadata"]["name"]))
    assert entry["restartCount"] == 0 and not entry.get("lastState")


@needs_prometheus
def test_a_really_throttled_container_is_never_given_a_lower_cpu_request(
    kerf: Kerf, fresh: str, tmp_path: Path
) -> None:
    """kerf-load wants 400m under a 200m CPU limit: the kernel throttles it (real
    `cfs_throttled_periods`), the recommender measures the ratio, and a row asking for less
    CPU is not applied (Throttled), while its memory is."""
    ns = make_namespace(kerf, fresh)
    ns.apply(
        deployment(
            [load(uses=("400m", "64Mi"), requests=("200m", "256Mi"), limits=("200m", "512Mi"))]
        )
    )
    (pod,) = ns.running("web", 1)
    name = pod["metadata"]["name"]
    wait_until(lambda: cgroup(ns, name)["cpu.nr_throttled"] > 10, "the kernel to throttle it")
    row = _recommended(kerf, fresh, tmp_path, "container_cpu_cfs_throttled_periods_total")
    print(f"\nreal throttling of kerf-load at 400m under a 200m limit: {row['cpuThrottlingRatio']}")
    assert row["cpuThrottlingRatio"] >= 0.25, row
    # A row that asks for less CPU than the container has, with the measured throttling.
    lower = {**row, "requests": {**row["requests"], "cpu": "100m"}}
    stored = ns.get("configmap", CONFIGMAP_NAME)
    stored["data"][DATA_KEY] = json.dumps({"recommendations": [lower]})
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
        stored["metadata"].pop(key, None)
    ns.apply(stored)
    ns.apply(PROACTIVE)

    def memory_applied() -> dict[str, Any] | None:
        pods = ns.pods("web")
        # lowered towards the row's (a step at most maxChangePercent)
        ok = pods and running_requests(pods[0])["memory"] != "256Mi"
        return pods[0] if ok else None

    after = wait_until(memory_applied, "the row's memory applied in place")
    assert running_requests(after)["cpu"] == "200m"
    assert cgroup(ns, name)["cpu.cfs_quota_us"] == 20000


def test_an_oom_looping_pod_is_restored_by_eviction_and_ends_healthy(
    kerf: Kerf, fresh: str
) -> None:
    """The downsized pods' use grows for good (a downward-API spec that survives restarts):
    they OOM-loop. An in-place increase would leave the pod cgroup at the old limit
    (kubernetes/kubernetes#138760), so the restore evicts them, and their replacements run
    healthy with the manifest's values."""
    ns = make_namespace(kerf, fresh)
    app = load(uses=("20m", "64Mi"), requests=("50m", "256Mi"), limits=("100m", "256Mi"))
    app["volumeMounts"] = [{"name": "spec", "mountPath": "/etc/kerf-load"}]
    web = deployment([app], replicas=2)
    web["spec"]["template"]["spec"]["volumes"] = [
        {
            "name": "spec",
            "downwardAPI": {
                "items": [
                    {
                        "path": "spec",
                        "fieldRef": {"fieldPath": "metadata.annotations['kerf.dev/load']"},
                    }
                ]
            },
        }
    ]
    ns.apply(web)
    before = uids(ns.running("web", 2))
    ns.apply(rollback_policy("40s"))
    small = {
        "requests": {"cpu": "50m", "memory": "128Mi"},
        "limits": {"cpu": "100m", "memory": "128Mi"},
    }
    ns.apply(static_policy({"app": small}, guardrails={"cooldown": "1s"}))

    def downsized() -> bool:
        pods = ns.pods("web")
        return uids(pods) == before and all(running_requests(p)["memory"] == "128Mi" for p in pods)

    wait_until(downsized, "the downsize applied in place")
    wait_until(lambda: _rollback_state(ns).get("mode") == "monitoring", "monitoring")
    for pod in ns.pods("web"):
        ns.annotate_pod(pod["metadata"]["name"], "kerf.dev/load", "memory=200Mi")

    def looping() -> bool:
        return any(oom_looping(p) for p in ns.pods("web"))

    wait_until(looping, "a pod in a real OOM loop")

    def replaced() -> list[dict[str, Any]] | None:
        pods = ns.pods("web")
        ok = (
            len(pods) == 2
            and not uids(pods) & before
            and all(running_requests(p).get("memory") == "256Mi" for p in pods)
            and all(container_status(p).get("ready") for p in pods)
        )
        return pods if ok else None

    pods = wait_until(replaced, "both pods replaced with the manifest's values and ready")
    for pod in pods:
        assert cgroup(ns, pod["metadata"]["name"])["memory.limit_in_bytes"] == 256 * 2**20
        assert container_status(pod)["restartCount"] == 0
    assert {"Evicted"} <= {e["reason"] for e in ns.events()}
