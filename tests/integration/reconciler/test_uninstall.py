"""While kerf's CRDs are being deleted (an uninstall), the reconciler makes no change and
tells nothing: the policies that outlive their AutomationStrategy for a moment do not
block a workload `StrategyNotFound` with a Warning Event on it (app/policy/uninstall.py)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from app.policy.uninstall import stand_down
from tests.cluster import GROUP, VERSION, custom, eventually
from tests.integration.reconciler.harness import (
    create,
    deployment,
    running_kerf,
    static_policy,
    status_with_reason,
    wait_for,
)

STRATEGIES_CRD = f"automationstrategies.{GROUP}"


async def strategy_not_found(kerf: Any, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in await kerf.events()
        if e["reason"] == "Blocked"
        and "StrategyNotFound" in e["note"]
        and e["regarding"]["name"] == name
    ]


async def test_no_strategy_not_found_while_the_crds_are_being_deleted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_kerf(tmp_path, webhook=False) as kerf:
        apps = client.AppsV1Api(kerf.api)
        for name in ("web", "lost"):
            await apps.create_namespaced_deployment("shop", deployment(name))
        await kerf.settle()
        await create(kerf, "staticpolicies", static_policy("web", "web", {"cpu": "200m"}))
        # The check below can see the Event: a policy whose strategy never existed gets it.
        lost = static_policy("lost", "lost", {"cpu": "200m"}, strategy_name="never")
        await create(kerf, "staticpolicies", lost)
        replica = await kerf.start_reconciler()
        await wait_for(kerf, lambda: strategy_not_found(kerf, "lost"), "the control's Event")
        await wait_for(
            kerf,
            lambda: status_of_not(kerf, "StrategyNotFound"),
            "a decision on web with its strategy there",
        )

        # `kubectl delete crd` on a real server: the CRD stays, with a deletionTimestamp,
        # until its finalizer has deleted every object of its kind.
        extensions = client.ApiextensionsV1Api(kerf.api)
        await extensions.patch_custom_resource_definition(
            STRATEGIES_CRD, {"metadata": {"finalizers": ["example.com/hold"]}}
        )
        await extensions.delete_custom_resource_definition(STRATEGIES_CRD)
        view = replica.service.view
        await eventually(lambda: stand_down(view), "the reconciler to see the CRD going")
        with caplog.at_level(logging.INFO, logger="kerf.reconciler"):
            await custom(kerf.api).delete_namespaced_custom_object(
                GROUP, VERSION, "shop", "automationstrategies", "default"
            )
            await eventually(
                lambda: view.kerf_object("AutomationStrategy", "shop", "default") is None,
                "the view to lose the strategy",
            )
            for _ in range(3):
                replica.service.enqueue_all()
                await wait_for(kerf, idle_queue(replica), "the queue to drain")
            await replica.service.write_input_reports()
        assert await strategy_not_found(kerf, "web") == []
        assert await status_with_reason(kerf, "StrategyNotFound", "deployment-web") is None
        standing = [r for r in caplog.records if "CRDs are being deleted" in r.getMessage()]
        assert len(standing) == 1, "said once"
        assert STRATEGIES_CRD in standing[0].getMessage()


async def status_of_not(kerf: Any, reason: str) -> bool:
    record = await kerf.recommendation("deployment-web")
    status = (record or {}).get("status") or {}
    return bool(status.get("reason")) and status["reason"] != reason


def idle_queue(replica: Any) -> Any:
    async def check() -> bool:
        return bool(replica.service.queue.idle)

    return check
