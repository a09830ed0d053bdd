"""Recommendation ConfigMaps on a cluster: a bad one is named in the log, as one Event on
it per version, and in the status of the workloads it would have fed; valid rows in
another ConfigMap keep working (SPEC §4)."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from kubernetes_asyncio import client

from tests.app.builders import row, ts
from tests.integration.reconciler.harness import (
    Kerf,
    create,
    deployment,
    resync,
    running_kerf,
    status_of,
    status_with_reason,
    wait_for,
)

LABEL = {"rightsizing.kubex.ai/recommendations": "true"}


def proactive_policy() -> dict[str, Any]:
    return {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "ProactivePolicy",
        "metadata": {"name": "proactive", "namespace": "shop"},
        "spec": {"automationStrategyRef": {"name": "default"}},
    }


def configmap(name: str, text: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "shop", "labels": LABEL},
        "data": {"recommendations.json": text},
    }


async def events_about(kerf: Kerf, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in await kerf.events()
        if e["regarding"].get("kind") == "ConfigMap" and e["regarding"]["name"] == name
    ]


async def test_a_bad_configmap_is_named_once_per_version_and_blocks_only_what_it_feeds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kerf")
    async with running_kerf(tmp_path) as kerf:
        apps = client.AppsV1Api(kerf.api)
        for name in ("web", "api"):
            await apps.create_namespaced_deployment("shop", deployment(name, replicas=1))
        await kerf.settle()
        analyzed = ts(kerf.sim.clock.now() - timedelta(hours=1))
        good = {"recommendations": [{**row(requests={"cpu": "300m"}), "analyzedAt": analyzed}]}
        await kerf.core.create_namespaced_config_map(
            "shop", configmap("recs", orjson.dumps(good).decode())
        )
        await kerf.core.create_namespaced_config_map("shop", configmap("broken", "{not json"))
        await create(kerf, "proactivepolicies", proactive_policy())
        replica = await kerf.start_reconciler()

        async def api_blocked() -> dict[str, Any] | None:
            status = await status_of(kerf, "deployment-api")
            return status if status.get("reason") == "HubUnreachable" else None

        status = await wait_for(kerf, api_blocked, "api blocked HubUnreachable")
        condition = next(c for c in status["conditions"] if c["type"] == "Blocked")
        assert "ConfigMap shop/broken: recommendations.json is not JSON" in condition["message"]

        async def web_applied() -> dict[str, Any] | None:
            status = await status_of(kerf, "deployment-web")
            return status if status.get("phase") == "Applied" else None

        applied = await wait_for(kerf, web_applied, "web's valid row applied")
        assert applied["lastApplied"]["containers"]["app"]["requests"]["cpu"] == "300m"

        async def one_event() -> list[dict[str, Any]]:
            return await events_about(kerf, "broken")

        (event,) = await wait_for(kerf, one_event, "an Event on ConfigMap broken")
        assert (event["type"], event["reason"]) == ("Warning", "RecommendationsNotLoaded")
        assert "not JSON" in event["note"]
        assert not await events_about(kerf, "recs")
        for _ in range(2):  # resyncs and passes tell nothing new
            await resync(kerf, replica)
            await replica.service.write_input_reports()
        assert len(await events_about(kerf, "broken")) == 1
        lines = [r for r in caplog.records if getattr(r, "fields", {}).get("configmap")]
        assert [r.fields["reason"] for r in lines] == ["RecommendationsNotLoaded"]
        assert lines[0].fields["configmap"] == "shop/broken"

        # A new version, bad another way: told again, once.
        await kerf.core.replace_namespaced_config_map(
            "broken", "shop", configmap("broken", '{"recommendations": {}}')
        )

        async def two_events() -> list[dict[str, Any]] | None:
            found = await events_about(kerf, "broken")
            return found if len(found) == 2 else None

        events = await wait_for(kerf, two_events, "a second Event on ConfigMap broken")
        assert any("needs a list 'recommendations'" in e["note"] for e in events)


async def test_an_invalid_row_is_in_the_status_and_an_event_on_its_configmap(
    tmp_path: Path,
) -> None:
    async with running_kerf(tmp_path) as kerf:
        apps = client.AppsV1Api(kerf.api)
        await apps.create_namespaced_deployment("shop", deployment("web", replicas=1))
        await kerf.settle()
        analyzed = ts(kerf.sim.clock.now() - timedelta(hours=1))
        bad = {**row(requests={"cpu": "250m", "memory": "-384Mi"}), "analyzedAt": analyzed}
        text = orjson.dumps({"recommendations": [bad]}).decode()
        await kerf.core.create_namespaced_config_map("shop", configmap("recs", text))
        await create(kerf, "proactivepolicies", proactive_policy())
        await kerf.start_reconciler()

        status = await wait_for(
            kerf,
            lambda: status_with_reason(kerf, "InvalidRecommendation"),
            "web blocked InvalidRecommendation",
        )
        assert status["phase"] == "Blocked"
        condition = next(c for c in status["conditions"] if c["type"] == "Blocked")
        assert "requests.memory '-384Mi' is not positive" in condition["message"]
        pods = await kerf.pods("web")
        assert pods[0]["spec"]["containers"][0]["resources"]["requests"]["memory"] == "128Mi"

        async def event() -> list[dict[str, Any]]:
            return await events_about(kerf, "recs")

        (found,) = await wait_for(kerf, event, "an Event on ConfigMap recs")
        assert found["reason"] == "InvalidRecommendation" and "-384Mi" in found["note"]
