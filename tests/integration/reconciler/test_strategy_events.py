"""A strategy that sets a Kubex safety check kerf accepts but does not carry out is told
so once, in a Warning Event `UnsupportedField` on the strategy, and again only when the
strategy changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cluster import GROUP, VERSION, custom
from tests.integration.reconciler.harness import create, resync, running_kerf, wait_for


def strategy(name: str, **checks: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AutomationStrategy",
        "metadata": {"name": name},
        "spec": {"safetyChecks": checks},
    }


async def test_an_unsupported_safety_check_is_told_once_on_the_strategy(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, webhook=False) as kerf:
        replica = await kerf.start_reconciler()
        await create(kerf, "automationstrategies", strategy("strict", requireOwnerPodsReady=True))
        await create(kerf, "automationstrategies", strategy("plain", minCpuChangePercent=10))

        async def told() -> list[dict[str, Any]]:
            return [
                e for e in await kerf.events() if e["regarding"].get("kind") == "AutomationStrategy"
            ]

        (event,) = await wait_for(kerf, told, "an Event on AutomationStrategy strict")
        assert (event["type"], event["reason"]) == ("Warning", "UnsupportedField")
        assert event["regarding"]["name"] == "strict"
        assert "safetyChecks.requireOwnerPodsReady: true" in event["note"]
        for _ in range(2):
            await resync(kerf, replica)
            await replica.service.write_input_reports()
        assert len(await told()) == 1
        body = await custom(kerf.api).get_namespaced_custom_object(
            GROUP, VERSION, "shop", "automationstrategies", "strict"
        )
        # Read back with Kubex's defaults filled in.
        assert body["spec"]["safetyChecks"]["enableLimitRangeFilter"] is True
        assert body["spec"]["safetyChecks"]["nodeCpuHeadroom"] == "10%"
