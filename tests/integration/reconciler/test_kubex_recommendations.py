"""Kubex's recommendation file on a cluster (issue 34, part 3): the ConfigMap `recommendations`
in kerf's namespace, unlabelled, as Kubex's local-recommendations mode keeps it. A row is
applied in place; a container whose row says `KubexAutomation: "false"` is not acted on;
a change of the ConfigMap decides again."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
from kubernetes_asyncio import client

from tests.app.builders import ts
from tests.integration.reconciler.harness import (
    Kerf,
    create,
    deployment,
    requests_of,
    running_kerf,
    status_of,
    status_with_reason,
    wait_for,
)


def proactive_policy() -> dict[str, Any]:
    return {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "ProactivePolicy",
        "metadata": {"name": "proactive", "namespace": "shop"},
        "spec": {"automationStrategyRef": {"name": "default"}},
    }


def two_containers() -> dict[str, Any]:
    """Deployment web: containers `app` and `side`, 100m/128Mi each."""
    body = deployment("web", replicas=1)
    spec = body["spec"]["template"]["spec"]
    spec["containers"].append({**spec["containers"][0], "name": "side"})
    return body


def kubex_file(kerf: Kerf, **automation: str) -> dict[str, Any]:
    """Kubex's ConfigMap: per container of web 150m/192Mi and its KubexAutomation flag."""
    analyzed = ts(kerf.sim.clock.now() - timedelta(hours=1))
    rows = [
        {
            "Cluster": "sim",
            "Namespace": "shop",
            "PodOwnerKind": "Deployment",
            "PodOwnerName": "web",
            "Container": container,
            "EntityId": f"web-{container}",
            "ContainerId": f"web-{container}",
            "KubexAutomation": flag,
            "HpaMetricName": "",
            "AnalyzedOn": analyzed,
            "CurrentCpuRequestMCores": 100,
            "CurrentMemRequestBytes": 128 * 2**20,
            "RecommendedCpuRequestMCores": 150,
            "RecommendedMemRequestBytes": 192 * 2**20,
        }
        for container, flag in automation.items()
    ]
    return {
        "metadata": {"name": "recommendations", "namespace": "kerf-system"},
        "data": {"recommendations.json": orjson.dumps({"results": rows}).decode()},
    }


def by_container(pod: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {c["name"]: c["resources"]["requests"] for c in pod["spec"]["containers"]}


async def test_a_kubex_row_is_applied_and_a_held_container_is_not(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment("shop", two_containers())
        await kerf.settle()
        await kerf.core.create_namespaced_config_map(
            "kerf-system", kubex_file(kerf, app="false", side="false")
        )
        await create(kerf, "proactivepolicies", proactive_policy())
        await kerf.start_reconciler()

        status = await wait_for(
            kerf,
            lambda: status_with_reason(kerf, "KubexAutomationDisabled"),
            "web skipped KubexAutomationDisabled",
        )
        assert status["phase"] == "Skipped"
        (pod,) = await kerf.pods("web")
        assert requests_of(pod) == {"cpu": "100m", "memory": "128Mi"}

        # Kubex lets go of `app`: the change of its ConfigMap is decided at once.
        await kerf.core.replace_namespaced_config_map(
            "recommendations", "kerf-system", kubex_file(kerf, app="true", side="false")
        )

        async def resized() -> dict[str, Any] | None:
            pods = await kerf.pods("web")
            return pods[0] if pods and by_container(pods[0])["app"]["cpu"] == "150m" else None

        pod = await wait_for(kerf, resized, "app resized to Kubex's row")
        assert by_container(pod) == {
            "app": {"cpu": "150m", "memory": "192Mi"},
            "side": {"cpu": "100m", "memory": "128Mi"},
        }

        async def applied() -> dict[str, Any] | None:
            status = await status_of(kerf)
            return status if status.get("phase") == "Applied" else None

        status = await wait_for(kerf, applied, "web Applied")
        assert set(status["lastApplied"]["containers"]) == {"app"}

        # A new pod is admitted with the same values by the webhook, which reads the
        # ConfigMap too: `side` held there as well.
        await kerf.core.delete_namespaced_pod(pod["metadata"]["name"], "shop")

        async def replaced() -> dict[str, Any] | None:
            pods = await kerf.pods("web")
            new = [p for p in pods if p["metadata"]["name"] != pod["metadata"]["name"]]
            return new[0] if new else None

        fresh = await wait_for(kerf, replaced, "the replacement pod")
        assert by_container(fresh) == by_container(pod)


async def test_a_bad_kubex_row_is_named_on_its_configmap_and_in_the_status(
    tmp_path: Path,
) -> None:
    async with running_kerf(tmp_path, webhook=False) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment("shop", two_containers())
        await kerf.settle()
        body = kubex_file(kerf, app="true", side="maybe")
        await kerf.core.create_namespaced_config_map("kerf-system", body)
        await create(kerf, "proactivepolicies", proactive_policy())
        await kerf.start_reconciler()

        async def event() -> list[dict[str, Any]]:
            return [
                e
                for e in await kerf.events("kerf-system")
                if e["regarding"].get("name") == "recommendations"
            ]

        (found,) = await wait_for(kerf, event, "an Event on Kubex's ConfigMap")
        assert found["reason"] == "InvalidRecommendation"
        assert "results[1] (shop/Deployment/web/side) skipped" in found["note"]
        assert "KubexAutomation 'maybe' is not" in found["note"]

        async def resized() -> dict[str, Any] | None:
            pods = await kerf.pods("web")
            return pods[0] if pods and by_container(pods[0])["app"]["cpu"] == "150m" else None

        # The sound row applies; the bad one is never acted on.
        pod = await wait_for(kerf, resized, "app resized, side left alone")
        assert by_container(pod)["side"] == {"cpu": "100m", "memory": "128Mi"}
