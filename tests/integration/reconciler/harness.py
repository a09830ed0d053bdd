"""kerf on kubesim for the reconciler's tests: the real webhook over TLS (registered with
the simulator's admission step), the real reconciler through kubernetes-asyncio, both
over real HTTP, both on the simulator's clock."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client

from app.kube.leadertimings import LeaderTimings
from app.store.view import ClusterView
from kubesim.sim import Simulator
from kubesim.testing import running_sim
from reconciler.execution import ExecutionConfig
from reconciler.main import Options, build_service
from reconciler.service import Reconciler, ServiceConfig, run_cluster
from tests.cluster import (
    GROUP,
    VERSION,
    custom,
    eventually,
    install_crds,
    strategy,
)
from webhook.local import LocalWebhook, running_local_webhook, webhook_configuration

MERGE_PATCH = "application/merge-patch+json"
LEASES = ("coordination.k8s.io", "leases")
#: Fast enough for tests: follow changes every 50 ms, retry refused evictions at once.
FAST = Options(
    execution=ExecutionConfig(
        eviction_rate=100.0,
        follow_s=0.05,
        refused_retry_s=0.1,
        refused_retry_max_s=1.0,
        lease_retry_s=0.1,
    ),
    service=ServiceConfig(workers=2, resync_s=3600.0),
    leader=LeaderTimings.scaled(2.0),
    # One leader, as these tests were written for; sharded runs say so (test_shards.py).
    shards=1,
)


@dataclass
class RunningReconciler:
    """One reconciler replica and how to stop it."""

    service: Reconciler
    stop: asyncio.Event
    task: asyncio.Task[int]

    async def shutdown(self) -> int:
        """Graceful stop (what SIGTERM does)."""
        self.stop.set()
        return await asyncio.wait_for(self.task, 10)

    async def kill(self) -> None:
        """Stop at once, no release: a crashed replica."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@dataclass
class Kerf:
    """The simulated cluster with kerf in it."""

    sim: Simulator
    api: client.ApiClient
    tmp: Path
    replicas: list[RunningReconciler] = field(default_factory=list)
    webhook: LocalWebhook | None = None

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    async def start_reconciler(
        self, options: Options = FAST, identity: str = "kerf-reconciler-0"
    ) -> RunningReconciler:
        """Start one replica (it leads once it holds the Lease)."""
        feed, service = build_service(
            self.api, options, namespace="kerf-system", identity=identity, clock=self.sim.clock.now
        )
        stop = asyncio.Event()
        task = asyncio.create_task(run_cluster(feed, service, stop=stop, once=options.once))
        replica = RunningReconciler(service, stop, task)
        self.replicas.append(replica)
        return replica

    async def pods(self, app: str, namespace: str = "shop") -> list[dict[str, Any]]:
        """Live pods labelled app=<app>, by name."""
        raw = await self.core.list_namespaced_pod(
            namespace, label_selector=f"app={app}", _preload_content=False
        )
        items = (await raw.json())["items"]
        live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return sorted(live, key=lambda p: p["metadata"]["name"])

    async def recommendation(self, name: str, namespace: str = "shop") -> dict[str, Any] | None:
        """The RightsizingRecommendation `name`, or None."""
        try:
            return await custom(self.api).get_namespaced_custom_object(
                GROUP, VERSION, namespace, "rightsizingrecommendations", name
            )
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def events(self, namespace: str = "shop") -> list[dict[str, Any]]:
        """events.k8s.io/v1 Events of a namespace."""
        raw = await client.EventsV1Api(self.api).list_namespaced_event(
            namespace, _preload_content=False
        )
        return list((await raw.json())["items"])

    async def settle(self) -> None:
        await self.sim.settle()


def deployment(
    name: str,
    replicas: int = 2,
    *,
    cpu: str = "100m",
    memory: str = "128Mi",
    limits: dict[str, str] | None = None,
    resize_policy: list[dict[str, str]] | None = None,
    namespace: str = "shop",
) -> dict[str, Any]:
    """A Deployment of one container `app`."""
    labels = {"app": name}
    container: dict[str, Any] = {
        "name": "app",
        "image": "shop/web:1.4",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }
    if limits:
        container["resources"]["limits"] = limits
    if resize_policy:
        container["resizePolicy"] = resize_policy
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def static_policy(
    name: str,
    app: str,
    requests: dict[str, str],
    *,
    limits: dict[str, str] | None = None,
    strategy_name: str = "default",
    mode: str = "auto",
    guardrails: dict[str, Any] | None = None,
    namespace: str = "shop",
) -> dict[str, Any]:
    """A StaticPolicy for Deployment `app`, container `app`."""
    values: dict[str, Any] = {"requests": requests}
    if limits:
        values["limits"] = limits
    spec: dict[str, Any] = {
        "automationStrategyRef": {"name": strategy_name},
        "scope": {"labelSelector": {"matchLabels": {"app": app}}, "workloadTypes": ["Deployment"]},
        "resources": {"containers": {"app": values}},
        "mode": mode,
    }
    if guardrails:
        spec["guardrails"] = guardrails
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "StaticPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


async def create(kerf: Kerf, plural: str, body: dict[str, Any], namespace: str = "shop") -> None:
    """Create a kerf custom object (and, with the webhook running, wait until its view has
    it, so pods created next are admitted with it)."""
    await custom(kerf.api).create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)
    if kerf.webhook is not None:
        view = kerf.webhook.view
        await eventually(
            lambda: view.kerf_object(body["kind"], namespace, body["metadata"]["name"]),
            f"the webhook to see {body['kind']} {body['metadata']['name']}",
        )


async def start_stepped_decrease(kerf: Kerf) -> RunningReconciler:
    """web with 2 pods at 400m / 512Mi, a reconciler, and a StaticPolicy taking it to a
    quarter of that: a decrease past `maxChangePercent`, made in steps a cooldown apart."""
    await client.AppsV1Api(kerf.api).create_namespaced_deployment(
        "shop", deployment("web", replicas=2, cpu="400m", memory="512Mi")
    )
    await kerf.settle()
    replica = await kerf.start_reconciler()
    target = {"cpu": "100m", "memory": "128Mi"}
    await create(kerf, "staticpolicies", static_policy("web", "web", target))
    return replica


@contextlib.asynccontextmanager
async def running_kerf(
    tmp_path: Path,
    *,
    webhook: bool = True,
    node_cpu: str = "4",
    node_memory: str = "8Gi",
    strategy_spec: dict[str, Any] | None = None,
    crds: Sequence[Path] = (),
) -> AsyncIterator[Kerf]:
    """kubesim with kerf's CRDs, namespaces `kerf-system` and `shop`, node `node-a`, the
    AutomationStrategy `default` and (unless `webhook=False`) the webhook registered. The
    reconciler is started by the test (`start_reconciler`), so workloads can run first.
    `crds`: further CRD manifests installed before the webhook starts (a third party's)."""
    async with running_sim(tmp_path) as sim, sim.api_client() as api:
        await install_crds(api)
        for crd in crds:
            await client.ApiextensionsV1Api(api).create_custom_resource_definition(
                yaml.safe_load(crd.read_text())
            )
        await sim.add_namespace("kerf-system")
        await sim.add_namespace("shop")
        await sim.add_node("node-a", cpu=node_cpu, memory=node_memory)
        body = strategy("default", "shop")
        if strategy_spec is not None:
            body["spec"] = strategy_spec
        await custom(api).create_namespaced_custom_object(
            GROUP, VERSION, "shop", "automationstrategies", body
        )
        kerf = Kerf(sim, api, tmp_path)
        async with contextlib.AsyncExitStack() as stack:
            if webhook:
                hook = await stack.enter_async_context(
                    running_local_webhook(api, tmp_path / "certs")
                )
                kerf.webhook = hook
                await client.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(
                    webhook_configuration(hook.url, hook.ca_bundle)
                )
                # The reconciler evicts only while this Lease is fresh, and keeps what it
                # read for a few wall-clock seconds: a reconciler started before the first
                # renewal would find the webhook unavailable for that long.
                await eventually(
                    lambda: sim.store.get(LEASES, "kerf-system", "kerf-webhook"),
                    "the webhook's first Lease renewal",
                )
            try:
                yield kerf
            finally:
                for replica in kerf.replicas:
                    if not replica.task.done():
                        await replica.kill()


async def wait_for(kerf: Kerf, check: Any, what: str, timeout_s: float = 60.0) -> Any:
    """Poll an async `check` until it returns something truthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = await check()
        if result:
            return result
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def _versions_in_sim(sim: Simulator) -> dict[tuple[str, str, str], str]:
    """(kind, namespace, name) -> resourceVersion of what a view must show to be current."""
    found: dict[tuple[str, str, str], str] = {}
    for kind, key in _VIEWED:
        for obj in sim.store.iter(key):
            meta = obj["metadata"]
            found[(kind, meta.get("namespace", ""), meta["name"])] = meta["resourceVersion"]
    return found


_VIEWED = (
    ("Pod", ("", "pods")),
    ("Deployment", ("apps", "deployments")),
    ("ReplicaSet", ("apps", "replicasets")),
    ("RightsizingRecommendation", (GROUP, "rightsizingrecommendations")),
)


def _view_version(view: ClusterView, kind: str, namespace: str, name: str) -> str | None:
    if kind == "Pod":
        obj = view.get("Pod", namespace, name)
    elif kind == "RightsizingRecommendation":
        record = view.kerf_object(kind, namespace, name)
        return record.metadata.resource_version if record is not None else None
    else:
        obj = view.get(kind, namespace, name)
    return None if obj is None else (obj.get("metadata") or {}).get("resourceVersion")


def view_is_current(view: ClusterView, sim: Simulator) -> bool:
    """The view shows every pod, Deployment, ReplicaSet and record as the simulator has
    them now, and none that it no longer has."""
    wanted = _versions_in_sim(sim)
    if any(_view_version(view, *key) != version for key, version in wanted.items()):
        return False
    pods = {("Pod", p["metadata"]["namespace"], p["metadata"]["name"]) for p in view.pods()}
    return pods <= wanted.keys()


async def quiet(kerf: Kerf, replica: RunningReconciler) -> None:
    """Wait for a fixed point on the simulated clock: the cluster settled, the webhook's
    and the reconciler's views current, and a pass over every workload that wrote nothing
    (Lease renewals aside). What happens then is what the clock's time decides, however
    slowly this machine runs."""
    views = [replica.service.view] + ([kerf.webhook.view] if kerf.webhook else [])
    for _ in range(200):
        await kerf.settle()
        before = kerf.sim.store.last_version(excluding=("leases",))
        for view in views:
            await eventually(lambda v=view: view_is_current(v, kerf.sim), "a current view", 60)
        replica.service.enqueue_all()
        await wait_for(kerf, idle(replica), "the reconciler's passes to finish")
        await kerf.settle()
        if kerf.sim.store.last_version(excluding=("leases",)) == before:
            return
    raise AssertionError("the cluster and kerf never stopped writing")


def requests_of(pod: dict[str, Any]) -> dict[str, str]:
    """The requests of a pod's first container."""
    return pod["spec"]["containers"][0]["resources"]["requests"]


async def status_of(kerf: Kerf, name: str = "deployment-web") -> dict[str, Any]:
    """The status of a RightsizingRecommendation ({} until it has one)."""
    record = await kerf.recommendation(name)
    return (record or {}).get("status") or {}


async def status_with_reason(
    kerf: Kerf, reason: str, name: str = "deployment-web"
) -> dict[str, Any] | None:
    """The record's status once its reason is `reason` (a check for `wait_for`)."""
    status = await status_of(kerf, name)
    return status if status.get("reason") == reason else None


async def resync(kerf: Kerf, replica: RunningReconciler) -> None:
    """Queue every workload and wait until each has had its pass and the queue is idle."""
    passes = replica.service.passes + len(list(replica.service.view.workloads()))
    replica.service.enqueue_all()

    async def done() -> bool:
        return replica.service.passes >= passes and replica.service.queue.idle

    await wait_for(kerf, done, "a pass over every workload")


def idle(replica: RunningReconciler) -> Any:
    """A check for `wait_for`: the replica's queue has nothing queued or in progress."""

    async def check() -> bool:
        return replica.service.queue.idle

    return check
