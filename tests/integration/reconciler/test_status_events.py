"""The RightsizingRecommendation status, the dedup of Blocked/Skipped events, approve-once
in audit mode, and what `kubectl get rightsizingrecommendations -A` shows."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from tests.cluster import GROUP, VERSION, custom
from tests.integration.reconciler.harness import (
    MERGE_PATCH,
    create,
    deployment,
    requests_of,
    resync,
    running_kerf,
    static_policy,
    status_of,
    wait_for,
)
from tests.webhook.test_manifests import kubectl

TARGET = {"cpu": "250m", "memory": "256Mi"}


async def test_a_blocked_change_shows_its_reason_and_one_event(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=1)
        )
        await kerf.settle()
        replica = await kerf.start_reconciler()
        # An eviction-only strategy and one replica: SingleReplicaUnsafe.
        await custom(kerf.api).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "shop",
            "automationstrategies",
            "default",
            {"spec": {"inPlaceResize": {"enabled": False}}},
            _content_type=MERGE_PATCH,
        )
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET))

        async def blocked() -> dict[str, Any] | None:
            status = await status_of(kerf)
            return status if status.get("reason") == "SingleReplicaUnsafe" else None

        status = await wait_for(kerf, blocked, "SingleReplicaUnsafe")
        assert status["phase"] == "Blocked"
        condition = next(c for c in status["conditions"] if c["type"] == "Blocked")
        assert (condition["status"], condition["reason"]) == ("True", "SingleReplicaUnsafe")
        for _ in range(3):  # resyncs decide the same: no second event
            await resync(kerf, replica)
        events = [e for e in await kerf.events() if e["reason"] == "Blocked"]
        assert len(events) == 1
        assert events[0]["regarding"]["name"] == "web"
        assert "SingleReplicaUnsafe" in events[0]["note"]


async def test_approve_once_applies_the_audited_proposal_once(tmp_path: Path) -> None:
    async with running_kerf(tmp_path) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=2)
        )
        await kerf.settle()
        replica = await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", TARGET, mode="audit"))

        async def proposed() -> dict[str, Any] | None:
            status = await status_of(kerf)
            return status if status.get("phase") == "Proposed" else None

        status = await wait_for(kerf, proposed, "an audited proposal")
        assert status["reason"] == "Audit"
        proposal = status["proposal"]
        assert proposal["containers"]["app"]["requests"] == TARGET
        assert all(requests_of(p)["cpu"] == "100m" for p in await kerf.pods("web"))

        await custom(kerf.api).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "shop",
            "rightsizingrecommendations",
            "deployment-web",
            {"metadata": {"annotations": {"rightsizing.kubex.ai/approve": proposal["id"]}}},
            _content_type=MERGE_PATCH,
        )

        async def used() -> dict[str, Any] | None:
            status = await status_of(kerf)
            return status if status.get("approvedProposal") == proposal["id"] else None

        status = await wait_for(kerf, used, "the approval to be applied and used up")
        assert status["lastApplied"]["proposal"] == proposal["id"]
        assert all(requests_of(p) == TARGET for p in await kerf.pods("web"))
        assert replica.service.metrics.resizes.labels("requested")._value.get() == 2

        # Used once: a new proposal of the audited policy is only proposed again.
        await custom(kerf.api).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "shop",
            "staticpolicies",
            "web",
            {"spec": {"resources": {"containers": {"app": {"requests": {"cpu": "300m"}}}}}},
            _content_type=MERGE_PATCH,
        )

        async def proposed_again() -> dict[str, Any] | None:
            status = await status_of(kerf)
            new = (status.get("proposal") or {}).get("id") not in (None, proposal["id"])
            return status if status.get("reason") == "Audit" and new else None

        await wait_for(kerf, proposed_again, "the next proposal to wait for approval")
        assert all(requests_of(p)["cpu"] == "250m" for p in await kerf.pods("web"))


async def test_approve_once_shows_and_applies_the_guarded_step(tmp_path: Path) -> None:
    # 1 CPU / 1Gi down to 300m / 384Mi: maxChangePercent (50) allows 500m / 512Mi first.
    asked = {"cpu": "300m", "memory": "384Mi"}
    step = {"cpu": "500m", "memory": "512Mi"}
    async with running_kerf(tmp_path) as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=2, cpu="1", memory="1Gi")
        )
        await kerf.settle()
        await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", asked, mode="audit"))

        async def proposed() -> dict[str, Any] | None:
            status = await status_of(kerf)
            return status if status.get("phase") == "Proposed" else None

        proposal = (await wait_for(kerf, proposed, "an audited proposal"))["proposal"]
        assert proposal["containers"]["app"]["requests"] == step
        assert proposal["target"]["app"]["requests"] == asked
        notes = await wait_for(kerf, lambda: notes_of(kerf, "Skipped"), "the Skipped event")
        assert len(notes) == 1
        assert f"proposal {proposal['id']} would set app requests cpu=500m,memory=512Mi" in notes[0]
        assert "target app requests cpu=300m,memory=384Mi" in notes[0]

        await approve(kerf, proposal["id"])

        async def used() -> dict[str, Any] | None:
            status = await status_of(kerf)
            return status if status.get("approvedProposal") == proposal["id"] else None

        status = await wait_for(kerf, used, "the approval to be applied and used up")
        assert status["lastApplied"]["proposal"] == proposal["id"]
        assert all(requests_of(p) == step for p in await kerf.pods("web"))

        async def next_step() -> dict[str, Any] | None:
            status = await status_of(kerf)
            new = (status.get("proposal") or {}).get("id") not in (None, proposal["id"])
            return status if status.get("reason") == "Audit" and new else None

        following = (await wait_for(kerf, next_step, "the next step proposed"))["proposal"]
        assert (
            following["containers"]["app"]["requests"]
            == asked
            == (following["target"]["app"]["requests"])
        )
        await approve(kerf, following["id"])

        async def cooling() -> dict[str, Any] | None:
            status = await status_of(kerf)
            return status if status.get("reason") == "Cooldown" else None

        status = await wait_for(kerf, cooling, "the next step held by the cooldown")
        blocked = next(c for c in status["conditions"] if c["type"] == "Blocked")
        assert f"of the change approved as proposal {proposal['id']}," in blocked["message"]
        notes = await wait_for(kerf, lambda: notes_of(kerf, "Blocked"), "the Blocked event")
        assert any(f"approved as proposal {proposal['id']}" in n for n in notes), notes
        assert all(requests_of(p) == step for p in await kerf.pods("web"))


async def notes_of(kerf: Any, reason: str) -> list[str]:
    """The notes of the workload's events of one reason (an event is created after the
    status write that a test waits for, so tests wait for it too)."""
    return [e["note"] for e in await kerf.events() if e["reason"] == reason]


async def approve(kerf: Any, proposal: str) -> None:
    """Annotate the record with `approve=<proposal>`, as a person would."""
    await custom(kerf.api).patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "shop",
        "rightsizingrecommendations",
        "deployment-web",
        {"metadata": {"annotations": {"rightsizing.kubex.ai/approve": proposal}}},
        _content_type=MERGE_PATCH,
    )


async def test_kubectl_get_shows_the_columns(tmp_path: Path) -> None:
    async with running_kerf(tmp_path, node_cpu="1") as kerf:
        await client.AppsV1Api(kerf.api).create_namespaced_deployment(
            "shop", deployment("web", replicas=2)
        )
        await kerf.settle()
        await kerf.start_reconciler()
        await create(kerf, "staticpolicies", static_policy("web", "web", {"cpu": "900m"}))

        async def blocked() -> bool:
            return (await status_of(kerf)).get("phase") == "Blocked"

        await wait_for(kerf, blocked, "a Blocked phase")
        done = await asyncio.to_thread(
            subprocess.run,
            [
                kubectl(),
                "--kubeconfig",
                str(kerf.sim.kubeconfig_path),
                "get",
                "rightsizingrecommendations",
                "-A",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        header, row = done.stdout.splitlines()[:2]
        assert header.split() == ["NAMESPACE", "NAME", "CPU", "MEMORY", "PHASE", "REASON", "AGE"]
        assert row.split()[:6] == [
            "shop",
            "deployment-web",
            "100m→900m",
            "128Mi",
            "Blocked",
            "InsufficientNodeCapacity",
        ]
