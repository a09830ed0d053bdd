"""Running pods resized in place over kubesim, with the real webhook and reconciler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from app.model.annotations import fixed_key
from tests.integration.reconciler.harness import (
    create,
    deployment,
    requests_of,
    running_kerf,
    static_policy,
    wait_for,
)


def running_requests(pod: dict[str, Any]) -> dict[str, str]:
    statuses = pod["status"].get("containerStatuses") or [{}]
    return (statuses[0].get("resources") or {}).get("requests") or {}


async def test_running_pods_are_resized_in_place(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        apps = client.AppsV1Api(kerf.api)
        await apps.create_namespaced_deployment("shop", deployment("web", replicas=2))
        await kerf.settle()
        before = await kerf.pods("web")
        assert [requests_of(p) for p in before] == [{"cpu": "100m", "memory": "128Mi"}] * 2
        await kerf.start_reconciler()
        await create(
            kerf, "staticpolicies", static_policy("web", "web", {"cpu": "250m", "memory": "256Mi"})
        )

        async def resized() -> list[dict[str, Any]] | None:
            pods = await kerf.pods("web")
            done = all(running_requests(p) == {"cpu": "250m", "memory": "256Mi"} for p in pods)
            return pods if done and len(pods) == 2 else None

        pods = await wait_for(kerf, resized, "both pods resized in place")
        # In place: the same pods (no eviction), their spec and the kubelet agree.
        assert [p["metadata"]["uid"] for p in pods] == [p["metadata"]["uid"] for p in before]
        assert all(requests_of(p) == {"cpu": "250m", "memory": "256Mi"} for p in pods)

        async def applied() -> dict[str, Any] | None:
            record = await kerf.recommendation("deployment-web")
            status = (record or {}).get("status") or {}
            return record if status.get("phase") == "Applied" else None

        record = await wait_for(kerf, applied, "phase Applied")
        status = record["status"]
        assert status["workload"] == "Deployment/web"
        assert status["lastApplied"]["method"] == "inPlace"
        assert status["lastApplied"]["containers"]["app"]["requests"] == {
            "cpu": "250m",
            "memory": "256Mi",
        }
        assert status["selected"][0]["policyName"] == "web"
        owner = record["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("Deployment", "web")
        web = await apps.read_namespaced_deployment("web", "shop")
        assert fixed_key("StaticPolicy", "requests") in web.metadata.annotations

        # One event for the change, naming its values and both pods.
        async def resized_events() -> list[dict[str, Any]]:
            # Created after the status write the check above saw.
            return [e for e in await kerf.events() if e["reason"] == "Resized"]

        resized = await wait_for(kerf, resized_events, "the change's Resized event")
        assert len(resized) == 1
        assert resized[0]["note"] == (
            "resized in place: app requests cpu=250m,memory=256Mi (2 of 2 pods)"
        )
