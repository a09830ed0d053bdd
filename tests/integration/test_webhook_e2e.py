"""End to end on the simulator: the real webhook over TLS, fed by watches, admits the pods
that Deployment controllers create (issue 4 part 6)."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import ssl
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from kubernetes_asyncio import client

from app.model.annotations import POD_INFO
from kubesim.faults import FaultRule
from kubesim.sim import Simulator
from kubesim.testing import running_sim
from tests.cluster import (
    GROUP,
    VERSION,
    custom,
    deployment,
    eventually,
    install_shop,
)
from webhook.certs import issue_certificates, write_certificates
from webhook.local import free_socket, webhook_configuration
from webhook.local import running_local_webhook as running_webhook

MERGE_PATCH = "application/merge-patch+json"
T = TypeVar("T")


async def prepare_cluster(sim: Simulator, api: client.ApiClient) -> None:
    await sim.add_namespace("kerf-system")
    await install_shop(sim, api)


async def web_pods(core: client.CoreV1Api) -> dict[str, dict[str, Any]]:
    """The live pods of Deployment `web` by name, as raw dicts."""
    raw = await core.list_namespaced_pod("shop", label_selector="app=web", _preload_content=False)
    items = (await raw.json())["items"]
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


def requests_of(pod: dict[str, Any]) -> dict[str, str]:
    return pod["spec"]["containers"][0]["resources"]["requests"]


@pytest.fixture
def unfreeze_afterwards() -> Iterator[None]:
    """A webhook that freezes the heap freezes this test process's: hand it back after."""
    yield
    gc.unfreeze()


async def test_pods_follow_the_policy_and_fail_open(
    tmp_path: Path, unfreeze_afterwards: None
) -> None:
    async with running_sim(tmp_path) as sim, sim.api_client() as api:
        await prepare_cluster(sim, api)
        core = client.CoreV1Api(api)
        # As `kerf webhook` runs it: the loaded view frozen out of garbage collection.
        async with running_webhook(api, tmp_path / "certs", freeze_heap=True) as webhook:
            await client.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(
                webhook_configuration(webhook.url, webhook.ca_bundle)
            )
            await client.AppsV1Api(api).create_namespaced_deployment(
                "shop", deployment("web", "shop", replicas=2)
            )
            await sim.settle()
            # Synced, the loaded view was frozen: collections no longer walk it.
            assert all(o is not webhook.view for o in gc.get_objects())
            pods = await web_pods(core)
            assert len(pods) == 2
            for pod in pods.values():
                assert requests_of(pod) == {"cpu": "250m", "memory": "256Mi"}
                assert POD_INFO in pod["metadata"]["annotations"]
            # Every replica renews the webhook Lease once it is ready.
            assert await poll(lease_holder(api), bool) == "kerf-webhook-local"

            await custom(api).patch_namespaced_custom_object(
                GROUP,
                VERSION,
                "shop",
                "staticpolicies",
                "web",
                {"spec": {"resources": {"containers": {"app": {"requests": {"cpu": "300m"}}}}}},
                _content_type=MERGE_PATCH,
            )

            def policy_cpu() -> str | None:
                policy = webhook.view.kerf_object("StaticPolicy", "shop", "web")
                return policy.spec.resources.containers["app"].requests["cpu"]  # type: ignore[union-attr]

            await eventually(lambda: policy_cpu() == "300m", "the view to see the policy change")
            replaced = next(iter(pods))
            await core.delete_namespaced_pod(replaced, "shop", grace_period_seconds=0)
            await sim.settle()
            after = await web_pods(core)
            (new,) = set(after) - set(pods)
            assert requests_of(after[new]) == {"cpu": "300m", "memory": "256Mi"}
            assert POD_INFO in after[new]["metadata"]["annotations"]

            await webhook.stop()
            calls_before = len(sim.admission.calls)
            await core.delete_namespaced_pod(new, "shop", grace_period_seconds=0)
            await sim.settle()
            unmutated = {n: p for n, p in (await web_pods(core)).items() if n not in after}
            (pod,) = unmutated.values()
            assert requests_of(pod) == {"cpu": "100m", "memory": "128Mi"}  # the template's
            assert POD_INFO not in (pod["metadata"].get("annotations") or {})
            failed = sim.admission.calls[calls_before:]
            assert failed and all(call.error for call in failed)


@pytest.fixture
def kerf_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, POD_NAME="kerf-webhook-7d4b9-cli", POD_NAMESPACE="kerf-system")
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return env


async def test_kerf_webhook_command_watches_the_cluster(
    tmp_path: Path, kerf_env: dict[str, str]
) -> None:
    """`kerf webhook` without --state-dir: not ready until every resource is listed, then
    ready, renewing its Lease; SIGTERM stops it cleanly."""
    issued = issue_certificates()
    write_certificates(issued, tmp_path / "certs")
    with free_socket() as sock:  # a free port for the child (closed before it binds)
        port = sock.getsockname()[1]
    async with running_sim(tmp_path) as sim, sim.api_client() as api:
        await prepare_cluster(sim, api)
        pods_fail = sim.faults.add(
            FaultRule(status=500, verbs=frozenset({"list"}), resource="pods")
        )
        argv = [
            *("webhook", "--kubeconfig", str(sim.kubeconfig_path)),
            *("--tls-cert", str(tmp_path / "certs/tls.crt")),
            *("--tls-key", str(tmp_path / "certs/tls.key")),
            *("--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"),
        ]
        kerf = Path(sys.executable).parent / "kerf"
        temp = tmp_path / "tmp"
        temp.mkdir()
        process = await asyncio.create_subprocess_exec(
            str(kerf), *argv, env={**kerf_env, "TMPDIR": str(temp)}, stderr=subprocess.PIPE
        )
        context = ssl.create_default_context(cadata=issued.ca_cert.decode())
        try:
            async with httpx.AsyncClient(verify=context, timeout=2) as http:

                async def readyz() -> int | None:
                    try:
                        return (await http.get(f"https://127.0.0.1:{port}/readyz")).status_code
                    except httpx.TransportError:
                        return None  # not listening yet

                assert await poll(readyz, lambda status: status is not None) == 503
                leases = client.CoordinationV1Api(api)
                assert not (await leases.list_namespaced_lease("kerf-system")).items
                sim.faults.remove(pods_fail)
                await poll(readyz, lambda status: status == 200)

                assert await poll(lease_holder(api), bool) == "kerf-webhook-7d4b9-cli"
            process.send_signal(signal.SIGTERM)
            # A graceful stop: drained, the API client closed (its CA file deleted), exit 0.
            assert await asyncio.wait_for(process.wait(), 10) == 0
            assert not list(temp.iterdir()), "left in $TMPDIR"
            assert process.stderr is not None
            logged = (await process.stderr.read()).decode()
            assert "Traceback" not in logged and '"level":"error"' not in logged, logged
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


def lease_holder(api: client.ApiClient) -> Callable[[], Awaitable[str | None]]:
    """A fetch of the webhook Lease's holder (None while there is no Lease)."""

    async def fetch() -> str | None:
        found = (await client.CoordinationV1Api(api).list_namespaced_lease("kerf-system")).items
        return found[0].spec.holder_identity if found else None

    return fetch


async def poll(
    fetch: Callable[[], Awaitable[T]], done: Callable[[T], object], timeout_s: float = 60.0
) -> T:
    """Await `fetch()` until `done(result)`; bounded."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not done(result := await fetch()):
        if loop.time() > deadline:
            raise AssertionError(f"timed out; last result {result!r}")
        await asyncio.sleep(0.05)
    return result
