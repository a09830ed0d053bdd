"""Writes the GlobalConfiguration's status (app/policy/global_status.py) where it differs from
the one in the cluster: the webhook's health and the recommendation reloads. Leader
only, like every write."""

from __future__ import annotations

from app.model.crd import GlobalConfiguration, Status
from app.model.durations import parse_duration
from app.policy.global_status import global_status, reload_of
from app.runtime.clock import Clock
from app.store.view import ClusterView
from reconciler.api import Writer
from reconciler.plan import LeaseAge

GLOBAL_CONFIG = "global-config"


class GlobalStatusReporter:
    """Keeps the ConfigMap versions it last wrote for (a new set is a reload)."""

    def __init__(self, writer: Writer, lease: LeaseAge | None, *, clock: Clock) -> None:
        self._writer = writer
        self._lease = lease
        self._clock = clock
        self._versions: frozenset[tuple[str, str, str]] | None = None

    async def report(self, view: ClusterView) -> int:
        """Write the status if it changed; returns the number of writes."""
        if self._lease is None:  # no cluster (state dir): no object to write
            return 0
        with view.lock:
            config = view.kerf_object("GlobalConfiguration", "", GLOBAL_CONFIG)
            reload = reload_of(view.recommendations("sources"))
            max_age = parse_duration(view.global_config.webhook_lease_max_age)
        if not isinstance(config, GlobalConfiguration):
            return 0
        previous = (
            config.status.model_dump(by_alias=True, mode="json", exclude_none=True)
            if config.status is not None
            else None
        )
        wanted = global_status(
            previous,
            renewed_at=await self._lease(),
            max_age=max_age,
            reload=reload,
            reload_changed=reload.versions != self._versions,
            now=self._clock(),
        )
        self._versions = reload.versions
        shown = Status.model_validate(wanted).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
        if previous is not None and all(previous.get(k) == v for k, v in shown.items()):
            return 0
        await self._writer.patch_status("", GLOBAL_CONFIG, wanted, kind="GlobalConfiguration")
        return 1
