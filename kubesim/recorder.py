"""Events written by the simulated components (scheduler, kubelet, controllers).

Like the real components' event recorders they write `events.k8s.io/v1` Events
(`regarding`, `note`, `reportingController`, `eventTime`), which kubesim stores as `v1`
Events, so `kubectl get events` and `kubectl describe` show them. Components record on
state transitions only, so a settled cluster writes no more events.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubesim.apiserver import ApiServer

Obj = dict[str, Any]
NORMAL, WARNING = "Normal", "Warning"
# The API refuses longer notes (in UTF-8 bytes); the real recorders cut them the same way.
_NOTE_LIMIT = 1024


class EventRecorder:
    """Records Events for one reporting controller (and, for kubelets, one instance)."""

    def __init__(self, api: ApiServer, controller: str) -> None:
        self.api = api
        self.controller = controller
        rt = api.registry.get("events.k8s.io", "v1", "events")
        assert rt is not None
        self._rt = rt

    def record(
        self,
        regarding: Obj,
        event_type: str,
        reason: str,
        note: str,
        action: str,
        *,
        field_path: str = "",
        instance: str = "",
    ) -> Obj:
        """Write one Event about `regarding` (an object as stored)."""
        meta = regarding["metadata"]
        now = self.api.clock.now()
        ref: Obj = {
            "kind": regarding.get("kind", ""),
            "namespace": meta.get("namespace", ""),
            "name": meta["name"],
            "uid": meta.get("uid", ""),
            "apiVersion": regarding.get("apiVersion", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        if field_path:
            ref["fieldPath"] = field_path
        ref = {k: v for k, v in ref.items() if v}
        event: Obj = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # Events about cluster-scoped objects (nodes) live in `default`, as on a real
            # cluster.
            "metadata": {
                "name": self._name(meta["name"], now),
                "namespace": meta.get("namespace") or "default",
            },
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": self.controller,
            "reportingInstance": instance or self.controller,
            "action": action,
            "reason": reason,
            "note": note.encode()[:_NOTE_LIMIT].decode(errors="ignore"),
            "type": event_type,
            "regarding": ref,
        }
        return self.api.insert(self._rt, event)

    def _name(self, regarding: str, now: datetime) -> str:
        """`<object>.<hex>` like the real recorders' `<name>.<unix nanoseconds>`; adding
        the store's next resourceVersion keeps names unique and in order when the fake
        clock stands still."""
        nanos = int(now.timestamp()) * 1_000_000_000 + now.microsecond * 1000
        return f"{regarding}.{nanos + self.api.store.resource_version + 1:x}"
