"""VPACoupled over kubesim, with the webhook and the reconciler: a workload a
VerticalPodAutoscaler is resizing is left to it, its new pods keep their manifest's
requests at admission; once the VPA is switched Off, or deleted, the reconciler decides
again (the VPA is a declared input) and resizes the pods in place. The VPA CRD is the VPA's
published one (tests/fixtures/vpa-v1-crd.yaml); every other test runs without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from app.model.workloads import Workload
from tests.cluster import eventually
from tests.integration.reconciler.harness import (
    create,
    deployment,
    requests_of,
    running_kerf,
    static_policy,
    status_of,
    status_with_reason,
    wait_for,
)

CRD = Path(__file__).resolve().parents[2] / "fixtures" / "vpa-v1-crd.yaml"
GROUP, VERSION, PLURAL = "autoscaling.k8s.io", "v1", "verticalpodautoscalers"
TARGET = {"cpu": "250m", "memory": "256Mi"}


def vpa(workload: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": f"{workload}-vpa", "namespace": "shop"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": workload},
            "updatePolicy": {"updateMode": "InPlaceOrRecreate"},
        },
    }


RECOMMENDED = {
    "conditions": [{"type": "RecommendationProvided", "status": "True"}],
    "recommendation": {
        "containerRecommendations": [
            {"containerName": "app", "target": {"cpu": "120m", "memory": "150Mi"}}
        ]
    },
}


async def test_a_vpa_holds_the_workload_until_it_is_off_or_gone(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, crds=[CRD]) as kerf:
        assert kerf.webhook is not None
        hook = kerf.webhook.view
        objects = client.CustomObjectsApi(kerf.api)
        for name in ("web", "api"):
            await objects.create_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, vpa(name))
            body = await objects.get_namespaced_custom_object(
                GROUP, VERSION, "shop", PLURAL, f"{name}-vpa"
            )
            # What the VPA's recommender writes, through the status subresource.
            await objects.replace_namespaced_custom_object_status(
                GROUP, VERSION, "shop", PLURAL, f"{name}-vpa", body | {"status": RECOMMENDED}
            )
            await create(kerf, "staticpolicies", static_policy(name, name, TARGET))
            workload = Workload.from_object(deployment(name, replicas=2))
            await eventually(
                lambda w=workload: any(
                    v["status"]["conditions"] for v in hook.autoscalers("VerticalPodAutoscaler", w)
                ),
                f"the webhook to see {name}-vpa's recommendation",
            )
            await client.AppsV1Api(kerf.api).create_namespaced_deployment(
                "shop", deployment(name, replicas=2)
            )
        await kerf.settle()
        # Admission left the requests to the VPA too.
        for name in ("web", "api"):
            pods = await kerf.pods(name)
            assert len(pods) == 2
            assert all(requests_of(p) == {"cpu": "100m", "memory": "128Mi"} for p in pods)
        await kerf.start_reconciler()

        for name in ("web", "api"):
            status = await wait_for(
                kerf,
                lambda n=name: status_with_reason(kerf, "VPACoupled", f"deployment-{n}"),
                f"{name} blocked",
            )
            condition = next(c for c in status["conditions"] if c["type"] == "Blocked")
            assert f"VerticalPodAutoscaler {name}-vpa sets app cpu requests" in condition["message"]
            assert all(
                requests_of(p) == {"cpu": "100m", "memory": "128Mi"} for p in await kerf.pods(name)
            )

        async def resized(name: str) -> list[dict[str, Any]] | None:
            pods = await kerf.pods(name)
            done = len(pods) == 2 and all(requests_of(p) == TARGET for p in pods)
            return pods if done else None

        # web's VPA switched Off: it only recommends now, kerf resizes.
        web = await objects.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "web-vpa")
        web["spec"]["updatePolicy"]["updateMode"] = "Off"
        await objects.replace_namespaced_custom_object(
            GROUP, VERSION, "shop", PLURAL, "web-vpa", web
        )
        await wait_for(kerf, lambda: resized("web"), "web resized once its VPA is Off")
        assert (await status_of(kerf, "deployment-api")).get("reason") == "VPACoupled"
        # api's VPA deleted: kerf resizes it too.
        await objects.delete_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "api-vpa")
        await wait_for(kerf, lambda: resized("api"), "api resized once its VPA is gone")
