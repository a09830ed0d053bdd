"""The Kubex kinds kerf stores and does not act on (ClusterCompactionPolicy, ObjectPatch,
ClusterObjectPatch, GpuConsolidationPolicy) are told once: one Warning Event
`NotImplemented` on the object and the condition `Supported=False` in its status, not again
on later passes, nor by a replica that starts after the first is gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from app.model.crd import STORED_KINDS, ClusterCompactionPolicy, ObjectPatch, plural
from tests.cluster import GROUP, VERSION, custom
from tests.integration.reconciler.harness import create, resync, running_kerf, wait_for

PATCH: dict[str, Any] = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "ObjectPatch",
    "metadata": {"name": "deployment-patch", "namespace": "shop"},
    "spec": {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "patch": {"metadata": {"labels": {"managed-by": "kubex"}}},
    },
}
COMPACTION: dict[str, Any] = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "ClusterCompactionPolicy",
    "metadata": {"name": "pack-production"},
    "spec": {
        "scope": {"namespaceSelector": {"operator": "In", "values": ["production"]}},
        "descheduler": {"highNodeUtilization": {"thresholds": {"cpu": 40}}},
    },
}


async def test_a_stored_kind_is_told_once_in_its_status_and_an_event(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, webhook=False) as kerf:
        objects = custom(kerf.api)
        await create(kerf, "objectpatches", PATCH)
        await objects.create_cluster_custom_object(
            GROUP, VERSION, "clustercompactionpolicies", COMPACTION
        )
        replica = await kerf.start_reconciler()

        async def told() -> list[dict[str, Any]]:
            return [
                e
                for namespace in ("shop", "default")
                for e in await kerf.events(namespace)
                if e["regarding"].get("kind") in ("ObjectPatch", "ClusterCompactionPolicy")
            ]

        async def both_told() -> list[dict[str, Any]]:
            events = await told()
            return events if len(events) == 2 else []

        events = await wait_for(kerf, both_told, "an Event on each stored object")
        by_kind = {e["regarding"]["kind"]: e for e in events}
        patch_event = by_kind["ObjectPatch"]
        assert (patch_event["type"], patch_event["reason"]) == ("Warning", "NotImplemented")
        assert patch_event["regarding"]["name"] == "deployment-patch"
        assert patch_event["note"] == ObjectPatch.unsupported_message()
        assert patch_event["note"].startswith(
            "kerf stores ObjectPatch for Kubex compatibility and does not act on it: "
        )
        compaction_event = by_kind["ClusterCompactionPolicy"]
        assert compaction_event["metadata"]["namespace"] == "default"
        assert compaction_event["note"] == ClusterCompactionPolicy.unsupported_message()

        async def conditions() -> list[dict[str, Any]]:
            patch = await objects.get_namespaced_custom_object(
                GROUP, VERSION, "shop", "objectpatches", "deployment-patch"
            )
            compaction = await objects.get_cluster_custom_object(
                GROUP, VERSION, "clustercompactionpolicies", "pack-production"
            )
            found = [(o.get("status") or {}).get("conditions") for o in (patch, compaction)]
            return [c for cs in found if cs for c in cs]

        async def both_conditions() -> list[dict[str, Any]]:
            found = await conditions()
            return found if len(found) == 2 else []

        first = await wait_for(kerf, both_conditions, "the Supported condition on each")
        for condition in first:
            assert condition["type"] == "Supported"
            assert (condition["status"], condition["reason"]) == ("False", "NotImplemented")
            assert "does not act on it" in condition["message"]
            assert condition["lastTransitionTime"]

        # Nothing is read from them: the stored spec is Kubex's, defaults filled in.
        compaction = await objects.get_cluster_custom_object(
            GROUP, VERSION, "clustercompactionpolicies", "pack-production"
        )
        assert compaction["spec"]["descheduler"]["maxNoOfPodsToEvictPerNode"] == 1
        assert compaction["spec"]["descheduler"]["highNodeUtilization"]["thresholds"] == {
            "cpu": 40,
            "memory": 25,
            "pods": 100,
        }
        assert compaction["spec"]["scope"]["workloadTypes"][0] == "Deployment"

        # Later passes tell nothing more.
        for _ in range(2):
            await resync(kerf, replica)
            await replica.service.write_input_reports()
        assert await replica.service.stored_kinds.report(replica.service.view) == 0
        assert len(await told()) == 2
        assert await conditions() == first

        # Nor does a replica started afresh: the condition is what remembers.
        assert await replica.shutdown() == 0
        second = await kerf.start_reconciler(identity="kerf-reconciler-1")
        await wait_for(kerf, _leading(second), "the second replica to lead")
        await resync(kerf, second)
        await second.service.write_input_reports()
        assert len(await told()) == 2
        assert await conditions() == first


def _leading(replica: Any) -> Any:
    async def check() -> bool:
        return bool(replica.service.leading and replica.service.view.synced)

    return check


async def test_the_reconciler_syncs_where_the_stored_kinds_crds_are_not_applied(
    tmp_path: Path,
) -> None:
    # `helm upgrade` does not install new CRDs: a cluster may lack these four.
    async with running_kerf(tmp_path, webhook=False) as kerf:
        crds = client.ApiextensionsV1Api(kerf.api)
        for kind in STORED_KINDS:
            await crds.delete_custom_resource_definition(f"{plural(kind)}.{GROUP}")
        replica = await kerf.start_reconciler()
        await wait_for(kerf, _leading(replica), "the replica to sync and lead")
        assert await replica.service.stored_kinds.report(replica.service.view) == 0
