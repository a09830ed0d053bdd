"""Resources served at two versions over one storage: autoscaling/v1 HPAs."""

from __future__ import annotations

import aiohttp

HPA_V2 = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "shop"},
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"},
        "minReplicas": 1,
        "maxReplicas": 4,
        "metrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 60},
                },
            },
            {
                "type": "Resource",
                "resource": {
                    "name": "memory",
                    "target": {"type": "AverageValue", "averageValue": "1Gi"},
                },
            },
        ],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
    },
}
V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"


async def test_v1_read_modify_write_keeps_v2_fields(sim) -> None:
    async with aiohttp.ClientSession(base_url=sim.url) as http:
        async with http.post(V2, json=HPA_V2) as resp:
            assert resp.status == 201
        async with http.get(f"{V1}/shop") as resp:
            v1 = await resp.json()
        assert v1["apiVersion"] == "autoscaling/v1"
        assert v1["spec"]["targetCPUUtilizationPercentage"] == 60
        assert "metrics" not in v1["spec"] and "behavior" not in v1["spec"]
        v1["spec"]["targetCPUUtilizationPercentage"] = 75
        async with http.put(f"{V1}/shop", json=v1) as resp:
            assert resp.status == 200, await resp.text()
        async with http.get(f"{V2}/shop") as resp:
            v2 = await resp.json()
    assert v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 75
    assert v2["spec"]["metrics"][1] == HPA_V2["spec"]["metrics"][1]
    assert v2["spec"]["behavior"] == HPA_V2["spec"]["behavior"]
    assert "annotations" not in v2["metadata"]


async def test_v1_annotation_that_is_not_json_is_kept(sim) -> None:
    body = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": "odd",
            "annotations": {"autoscaling.alpha.kubernetes.io/metrics": "not json"},
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"},
            "maxReplicas": 3,
            "targetCPUUtilizationPercentage": 50,
        },
    }
    async with aiohttp.ClientSession(base_url=sim.url) as http:
        async with http.post(V1, json=body) as resp:
            assert resp.status == 201, await resp.text()
        async with http.get(f"{V1}/odd") as resp:
            assert resp.status == 200
            v1 = await resp.json()
    assert v1["metadata"]["annotations"] == body["metadata"]["annotations"]
    stored = sim.store.get(("autoscaling", "horizontalpodautoscalers"), "default", "odd")
    assert stored["metadata"]["annotations"] == body["metadata"]["annotations"]
    assert stored["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 50
