"""Controllers, scheduler, kubelet and the fake clock, driven by settle()."""

from __future__ import annotations

from kubernetes_asyncio import client

from kubesim.conditions import get_condition
from tests.kubesim.conftest import pod_body


def deployment(
    name: str = "web", replicas: int = 2, cpu: str = "500m", image: str = "nginx:1"
) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": image,
                            "resources": {
                                "requests": {"cpu": cpu, "memory": "128Mi"},
                                "limits": {"cpu": "2", "memory": "256Mi"},
                            },
                        }
                    ]
                },
            },
        },
    }


def pods_of(sim, owner_prefix: str = "") -> list[dict]:
    return [
        p
        for p in sim.store.list(("", "pods"), "default")
        if p["metadata"]["name"].startswith(owner_prefix)
    ]


async def test_deployment_replicaset_pods(
    sim, api: client.ApiClient, core: client.CoreV1Api
) -> None:
    await sim.add_node("n1")
    apps = client.AppsV1Api(api)
    await apps.create_namespaced_deployment("default", deployment())
    await sim.settle()
    rs = (await apps.list_namespaced_replica_set("default")).items
    assert len(rs) == 1
    template_hash = rs[0].metadata.labels["pod-template-hash"]
    assert rs[0].metadata.name == f"web-{template_hash}"
    assert rs[0].metadata.owner_references[0].kind == "Deployment"
    pods = (await core.list_namespaced_pod("default", label_selector="app=web")).items
    assert len(pods) == 2
    for pod in pods:
        assert pod.metadata.name.startswith(f"web-{template_hash}-")
        assert pod.metadata.owner_references[0].kind == "ReplicaSet"
        assert pod.spec.node_name == "n1"
        assert pod.status.phase == "Running"
        assert pod.status.container_statuses[0].ready
        assert pod.status.container_statuses[0].allocated_resources == {
            "cpu": "500m",
            "memory": "128Mi",
        }
    d = await apps.read_namespaced_deployment("web", "default")
    assert (d.status.ready_replicas, d.status.available_replicas, d.status.observed_generation) == (
        2,
        2,
        1,
    )
    # A deleted pod is replaced by a new one.
    await core.delete_namespaced_pod(pods[0].metadata.name, "default")
    await sim.settle()
    names = {p.metadata.name for p in (await core.list_namespaced_pod("default")).items}
    assert len(names) == 2 and pods[0].metadata.name not in names


async def test_rollout_replaces_replicaset(sim, api: client.ApiClient) -> None:
    await sim.add_node("n1")
    apps = client.AppsV1Api(api)
    await apps.create_namespaced_deployment("default", deployment())
    await sim.settle()
    await apps.patch_namespaced_deployment(
        "web",
        "default",
        {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}},
    )
    await sim.settle()
    sets = {
        r.metadata.annotations["deployment.kubernetes.io/revision"]: r.spec.replicas
        for r in (await apps.list_namespaced_replica_set("default")).items
    }
    assert sets == {"1": 0, "2": 2}
    assert {p["spec"]["containers"][0]["image"] for p in pods_of(sim)} == {"nginx:2"}


async def test_deleting_deployment_collects_garbage(sim, api: client.ApiClient) -> None:
    await sim.add_node("n1")
    apps = client.AppsV1Api(api)
    await apps.create_namespaced_deployment("default", deployment())
    await sim.settle()
    await apps.delete_namespaced_deployment("web", "default")
    await sim.settle()
    assert sim.store.list(("apps", "replicasets")) == [] and pods_of(sim) == []


async def test_statefulset_daemonset_job(sim, api: client.ApiClient) -> None:
    await sim.add_node("n1")
    await sim.add_node("n2")
    apps, batch = client.AppsV1Api(api), client.BatchV1Api(api)
    sts = deployment("db", replicas=2, cpu="100m")
    sts["spec"]["serviceName"] = "db"
    await apps.create_namespaced_stateful_set("default", sts)
    daemon = deployment("agent", cpu="10m")
    del daemon["spec"]["replicas"]
    await apps.create_namespaced_daemon_set("default", daemon)
    job = deployment("once", cpu="10m")
    job["spec"] = {"template": job["spec"]["template"]}
    job["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    await batch.create_namespaced_job("default", job)
    await sim.settle()
    assert sorted(p["metadata"]["name"] for p in pods_of(sim, "db-")) == ["db-0", "db-1"]
    agents = pods_of(sim, "agent-")
    assert sorted(p["spec"]["nodeName"] for p in agents) == ["n1", "n2"]
    (job_pod,) = pods_of(sim, "once-")
    assert job_pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "once"
    sim.kubelet.finish("default", job_pod["metadata"]["name"])
    await sim.settle()
    done = await batch.read_namespaced_job("once", "default")
    assert done.status.succeeded == 1
    assert any(c.type == "Complete" and c.status == "True" for c in done.status.conditions)
    assert len(pods_of(sim, "once-")) == 1


async def test_cronjob_runs_on_fake_clock(sim, api: client.ApiClient) -> None:
    batch = client.BatchV1Api(api)
    template = deployment("tick", cpu="10m")["spec"]["template"]
    template["spec"]["restartPolicy"] = "OnFailure"
    await batch.create_namespaced_cron_job(
        "default",
        {
            "metadata": {"name": "tick"},
            "spec": {"schedule": "*/10 * * * *", "jobTemplate": {"spec": {"template": template}}},
        },
    )
    await sim.settle()
    assert sim.store.list(("batch", "jobs")) == []
    await sim.advance(600)
    (job,) = sim.store.list(("batch", "jobs"))
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert job["metadata"]["name"].startswith("tick-")


async def test_unschedulable_pod(sim, core: client.CoreV1Api) -> None:
    await sim.add_node("small", cpu="1")
    await sim.add_node(
        "tainted", cpu="8", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]
    )
    await core.create_namespaced_pod("default", pod_body("big", cpu="2"))
    await sim.settle()
    pod = await core.read_namespaced_pod("big", "default")
    assert pod.spec.node_name is None
    cond = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert cond.message.startswith(
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {gpu: yes}."
    )
    # Room appears: the pod is scheduled on the next settle.
    await sim.add_node("large", cpu="4")
    pod = await core.read_namespaced_pod("big", "default")
    assert pod.spec.node_name == "large"


async def test_scheduler_counts_existing_requests(sim, core: client.CoreV1Api) -> None:
    await sim.add_node("n1", cpu="1")
    for name in ("a", "b", "c"):
        await core.create_namespaced_pod("default", pod_body(name, cpu="400m"))
    await sim.settle()
    placed = {
        p.metadata.name: p.spec.node_name for p in (await core.list_namespaced_pod("default")).items
    }
    assert placed == {"a": "n1", "b": "n1", "c": None}


async def test_resize_acted_out(sim, core: client.CoreV1Api) -> None:
    await sim.add_node("n1", cpu="2")
    await core.create_namespaced_pod(
        "default", pod_body("p", cpu="500m", limits={"cpu": "1", "memory": "1Gi"})
    )
    await sim.settle()
    sim.kubelet.hold_resizes = True
    await core.patch_namespaced_pod_resize(
        "p",
        "default",
        {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "700m"}}}]}},
    )
    await sim.settle()
    pod = sim.store.get(("", "pods"), "default", "p")
    assert get_condition(pod["status"], "PodResizeInProgress")["status"] == "True"
    assert pod["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] == "700m"
    assert pod["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "500m"
    sim.kubelet.hold_resizes = False
    await sim.settle()
    pod = await core.read_namespaced_pod("p", "default")
    status = pod.status.container_statuses[0]
    assert status.resources.requests["cpu"] == "700m" and status.restart_count == 0
    assert not [c for c in pod.status.conditions if c.type.startswith("PodResize")]
    assert pod.status.observed_generation == pod.metadata.generation == 2


async def test_resize_deferred_then_retried_and_infeasible(sim, core: client.CoreV1Api) -> None:
    await sim.add_node("n1", cpu="2")
    await core.create_namespaced_pod(
        "default", pod_body("p", cpu="1", limits={"cpu": "2", "memory": "1Gi"})
    )
    await core.create_namespaced_pod("default", pod_body("q", cpu="800m"))
    await sim.settle()
    await core.patch_namespaced_pod_resize(
        "p",
        "default",
        {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1500m"}}}]}},
    )
    await sim.settle()
    pending = get_condition(
        sim.store.get(("", "pods"), "default", "p")["status"], "PodResizePending"
    )
    assert (pending["reason"], pending["message"]) == (
        "Deferred",
        "Node didn't have enough resource: cpu, requested: 1500, used: 800, capacity: 2000",
    )
    await core.delete_namespaced_pod("q", "default")
    await sim.settle()
    pod = sim.store.get(("", "pods"), "default", "p")
    assert get_condition(pod["status"], "PodResizePending") is None
    assert pod["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "1500m"
    await core.patch_namespaced_pod_resize(
        "p",
        "default",
        {
            "spec": {
                "containers": [
                    {"name": "app", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "3"}}}
                ]
            }
        },
    )
    await core.patch_namespaced_pod_resize(
        "p",
        "default",
        {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "3"}}}]}},
    )
    await sim.settle()
    pending = get_condition(
        sim.store.get(("", "pods"), "default", "p")["status"], "PodResizePending"
    )
    assert (pending["reason"], pending["message"]) == (
        "Infeasible",
        "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000",
    )


async def test_resize_with_restart_policy_restarts_container(sim, core: client.CoreV1Api) -> None:
    await sim.add_node("n1")
    body = pod_body("p", limits={"cpu": "1", "memory": "1Gi"})
    body["spec"]["containers"][0]["resizePolicy"] = [
        {"resourceName": "memory", "restartPolicy": "RestartContainer"}
    ]
    await core.create_namespaced_pod("default", body)
    await sim.settle()
    await core.patch_namespaced_pod_resize(
        "p",
        "default",
        {"spec": {"containers": [{"name": "app", "resources": {"limits": {"memory": "512Mi"}}}]}},
    )
    await sim.settle()
    assert (await core.read_namespaced_pod("p", "default")).status.container_statuses[
        0
    ].restart_count == 1


async def test_kubelet_hooks(sim, core: client.CoreV1Api) -> None:
    await sim.add_node("n1")
    await core.create_namespaced_pod("default", pod_body("p"))
    await sim.settle()
    sim.kubelet.oom_kill("default", "p", "app")
    status = (await core.read_namespaced_pod("p", "default")).status.container_statuses[0]
    assert (
        status.restart_count == 1
        and status.last_state.terminated.reason == "OOMKilled"
        and status.last_state.terminated.exit_code == 137
    )
    sim.kubelet.set_ready("default", "p", "app", False)
    pod = await core.read_namespaced_pod("p", "default")
    assert next(c for c in pod.status.conditions if c.type == "Ready").status == "False"
    sim.kubelet.set_ready("default", "p", "app", True)
    sim.kubelet.crash_loop("default", "p", "app")
    await sim.settle()
    status = (await core.read_namespaced_pod("p", "default")).status.container_statuses[0]
    assert (
        status.state.waiting.reason == "CrashLoopBackOff"
        and status.restart_count == 2
        and not status.ready
    )
    sim.kubelet.crash_loop("default", "p", "app", looping=False)
    await sim.settle()
    assert (await core.read_namespaced_pod("p", "default")).status.container_statuses[0].ready
