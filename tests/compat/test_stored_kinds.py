"""Kubex's compaction, patch and GPU consolidation examples stored for real, and told once
by kerf's reconciler code (reconciler/storedkinds.py) over the objects as the real API
server returns them, its writes sent with kubectl: the server takes the `Supported`
condition into the status, `kubectl get` shows it in the printer columns, and a second
round writes nothing."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from app.model.crd import STORED_KINDS, parse_object, plural
from app.store.view import ClusterView
from harness.kubectl import Kubectl
from reconciler.storedkinds import StoredKindReporter
from tests.compat.examples import EXAMPLES

pytestmark = pytest.mark.e2e

STORED = [e for e in EXAMPLES if e.kind in STORED_KINDS]
#: distinct objects: GPU-Sharing-with-KAI.md's GpuConsolidationPolicy has the name of
#: gpu-consolidation-policy.md's first example, so applying both leaves one
OBJECTS = {(e.kind, e.namespace, e.obj["metadata"]["name"]) for e in STORED}


class KubectlWriter:
    """The two writes the reporter makes, sent with kubectl as the cluster's admin."""

    def __init__(self, admin: Kubectl) -> None:
        self.admin = admin
        self.writes: list[str] = []

    async def patch_status(
        self, namespace: str, name: str, patch: Mapping[str, Any], kind: str = ""
    ) -> Mapping[str, Any]:
        where = ["-n", namespace] if namespace else []
        out = self.admin(
            "patch", *where, plural(kind), name, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": patch}), "-o", "json",
        )  # fmt: skip
        self.writes.append(f"status {kind} {name}")
        return dict(json.loads(out))

    async def create_event(self, body: Mapping[str, Any]) -> None:
        self.admin("create", "-f", "-", stdin=json.dumps(body))
        self.writes.append(
            f"event {body['involvedObject']['kind']} {body['involvedObject']['name']}"
        )


def view_of(admin: Kubectl) -> ClusterView:
    view = ClusterView()
    for kind in STORED_KINDS:
        for item in admin.json(plural(kind), "-A")["items"]:
            view.apply(parse_object(item))
    return view


async def test_each_stored_example_is_told_once_and_kubectl_shows_it(admin: Kubectl) -> None:
    for example in STORED:
        admin("apply", "-f", "-", stdin=example.text)
    writer = KubectlWriter(admin)
    reporter = StoredKindReporter(writer, instance="compat", clock=lambda: datetime.now(UTC))
    assert await reporter.report(view_of(admin)) == len(OBJECTS) == 9
    assert len(writer.writes) == 2 * len(OBJECTS)

    table = admin("get", "clustercompactionpolicies")
    header, *rows = table.splitlines()
    assert header.split() == ["NAME", "SUPPORTED", "REASON", "AGE"]
    assert len(rows) == 4
    assert all(row.split()[1:3] == ["False", "NotImplemented"] for row in rows), table
    patch = admin.json("-n", "patches-demo", "objectpatch", "deployment-patch")
    [condition] = patch["status"]["conditions"]
    assert condition["message"].startswith(
        "kerf stores ObjectPatch for Kubex compatibility and does not act on it: "
    )
    assert patch["spec"]["retryAmount"] == 3  # Kubex's default, filled in by the server
    events = admin.json("events.events.k8s.io", "-A", "--field-selector", "reason=NotImplemented")
    assert len(events["items"]) == len(OBJECTS)

    # Read back again (conditions as the server keeps them): nothing more to tell.
    assert await reporter.report(view_of(admin)) == 0
    assert len(writer.writes) == 2 * len(OBJECTS)
