"""The Kubex kinds kerf stores and does not act on (ClusterCompactionPolicy, ObjectPatch,
ClusterObjectPatch, GpuConsolidationPolicy: `app.model.crd.StoredKind`): each object is told
once, by a Warning Event `NotImplemented` on it and the condition `Supported=False`
(reason `NotImplemented`) in its status.

The condition is the memory: an object that carries it was told, whichever replica or
restart told it, so neither is written again; the Event is named after the object's uid,
so one told twice (the status write lost after it) is refused by the server (409) rather
than shown twice. Leader only, like every write."""

from __future__ import annotations

import logging
from typing import Any

from app.model.apitime import rfc3339
from app.model.crd import (
    API_VERSION,
    NOT_IMPLEMENTED,
    STORED_KINDS,
    SUPPORTED,
    StoredKind,
)
from app.model.owners import WorkloadRef
from app.runtime.clock import Clock
from app.runtime.jsonlog import log_fields
from app.store.view import ClusterView
from reconciler.api import Writer
from reconciler.events import event_body, pending_event

logger = logging.getLogger("kerf.reconciler")


def told(obj: StoredKind) -> bool:
    """Whether the object already carries kerf's `Supported=False` condition, as written."""
    conditions = obj.status.conditions if obj.status is not None else []
    return any(
        c.type == SUPPORTED
        and c.status == "False"
        and c.reason == NOT_IMPLEMENTED
        and c.message == type(obj).unsupported_message()
        for c in conditions
    )


def supported_condition(obj: StoredKind, now: str) -> dict[str, Any]:
    return {
        "type": SUPPORTED,
        "status": "False",
        "reason": NOT_IMPLEMENTED,
        "message": type(obj).unsupported_message(),
        "lastTransitionTime": now,
    }


class StoredKindReporter:
    """Tells every stored-only object, once, that kerf does not act on it."""

    def __init__(self, writer: Writer, *, instance: str, clock: Clock) -> None:
        self._writer = writer
        self._instance = instance
        self._clock = clock

    async def report(self, view: ClusterView) -> int:
        """The Event and the condition for every object not told yet; returns the number of
        objects told (0 in a steady cluster)."""
        with view.lock:
            objects = [
                obj
                for kind in STORED_KINDS
                for obj in view.kerf_objects(kind)
                if isinstance(obj, StoredKind) and not told(obj)
            ]
        for obj in objects:
            await self._tell(obj)
        return len(objects)

    async def _tell(self, obj: StoredKind) -> None:
        namespace = obj.metadata.namespace or ""
        message = type(obj).unsupported_message()
        log_fields(
            logger,
            "kerf stores a Kubex kind it does not act on",
            logging.WARNING,
            policy=f"{obj.kind} {'/'.join(filter(None, (namespace, obj.metadata.name)))}",
            reason=NOT_IMPLEMENTED,
            message=message,
        )
        now = self._clock()
        # A cluster object's Event lives in the default namespace, as kubectl's do.
        ref = WorkloadRef(obj.kind, namespace or "default", obj.metadata.name)
        identity = f"{obj.kind}/{namespace}/{obj.metadata.name}/{obj.metadata.uid}/{SUPPORTED}"
        body = event_body(
            ref,
            API_VERSION,
            obj.metadata.uid,
            pending_event(
                ref,
                NOT_IMPLEMENTED,
                message,
                warning=True,
                now=now,
                action="ValidatePolicy",
                identity=identity,
            ),
            self._instance,
        )
        if not namespace:
            del body["involvedObject"]["namespace"]
        await self._writer.create_event(body)
        # Other conditions (a Kubex controller's, carried over) are kept: the merge patch
        # replaces the list whole.
        kept = [
            c.model_dump(by_alias=True, mode="json", exclude_none=True)
            for c in (obj.status.conditions if obj.status is not None else [])
            if c.type != SUPPORTED
        ]
        await self._writer.patch_status(
            namespace,
            obj.metadata.name,
            {"conditions": [*kept, supported_condition(obj, rfc3339(now))]},
            kind=obj.kind,
        )
