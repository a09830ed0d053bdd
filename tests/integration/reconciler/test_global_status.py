"""The reconciler writes GlobalConfiguration's status as Kubex documents it: the
`PodAdmissionWebhookHealthy` condition from the webhook's Lease, `webhookHealth` and the
recommendation reloads; a steady cluster costs no further write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cluster import GROUP, VERSION, custom
from tests.integration.reconciler.harness import running_kerf, wait_for


async def test_the_global_configuration_says_the_webhook_is_healthy(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "GlobalConfiguration",
            "metadata": {"name": "global-config"},
            "spec": {},
        }
        await custom(kerf.api).create_cluster_custom_object(
            GROUP, VERSION, "globalconfigurations", body
        )
        replica = await kerf.start_reconciler()

        async def status() -> dict[str, Any] | None:
            obj = await custom(kerf.api).get_cluster_custom_object(
                GROUP, VERSION, "globalconfigurations", "global-config"
            )
            return obj.get("status") or None

        written = await wait_for(kerf, status, "the GlobalConfiguration's status")
        (healthy,) = [c for c in written["conditions"] if c["type"] == "PodAdmissionWebhookHealthy"]
        assert (healthy["status"], healthy["reason"]) == ("True", "LeaseRenewed")
        assert written["webhookHealth"]["healthy"] is True
        assert written["recommendationReload"]["lastCount"] == 0
        version = (
            await custom(kerf.api).get_cluster_custom_object(
                GROUP, VERSION, "globalconfigurations", "global-config"
            )
        )["metadata"]["resourceVersion"]
        await replica.service.write_policy_status()
        await replica.service.write_input_reports()
        again = await custom(kerf.api).get_cluster_custom_object(
            GROUP, VERSION, "globalconfigurations", "global-config"
        )
        assert again["metadata"]["resourceVersion"] == version
