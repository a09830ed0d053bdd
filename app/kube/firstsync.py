"""The first sync of a one-shot command (`kerf reconciler --once` or `--dry-run`, `kerf
recommend --once` or `--dry-run`), bounded: it waits for the view as long as the initial
lists make progress, and gives up once none has brought a page for `--api-timeout`
seconds, with one line that names the API server and the error.

The informers keep retrying meanwhile, as in the services, so a server that is starting
up is waited for; a server that refuses kerf's credentials (401) or rights (403) is not
going to change its mind, and fails the command at once.

The process's `Reachability` is made quiet for the run (`quiet_for_one_shot`): the
command's last line says what went wrong, once, instead of a log line per retry.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from app.kube.informer import ClusterFeed, Informer
from app.kube.reachability import format_seconds, reachability_of

#: HTTP statuses a retry does not change: the command fails at once.
REFUSED_STATUSES = frozenset({401, 403})
#: How often the wait looks at the informers' last errors (seconds).
POLL_S = 0.05


class ApiUnavailable(Exception):
    """The view of a one-shot command could not be synced; the message is one line that
    names the API server and the error."""


def quiet_for_one_shot(api_client: Any) -> None:
    """Outages of `api_client`'s server are not logged as they happen: the one-shot
    command says them in its last line (`first_sync`)."""
    reachability_of(api_client).quiet = True


async def first_sync(
    feed: ClusterFeed,
    timeout_s: float,
    *,
    stop: asyncio.Event | None = None,
    flag: str = "--api-timeout",
) -> bool:
    """Wait for the feed's first sync (True) or for `stop` (False). Raise ApiUnavailable
    once no initial list has brought a page for `timeout_s` seconds (`flag` names the
    option that set it), or at once when the server refuses a list (401, 403)."""
    reachability = feed.reachability
    started = reachability.now()
    synced = asyncio.create_task(feed.wait_synced())
    stopped = asyncio.create_task((stop or asyncio.Event()).wait())
    try:
        while True:
            if synced.done():
                return True
            if stopped.done():
                return False
            refused = [i for i in feed.unlisted() if i.last_status in REFUSED_STATUSES]
            if refused:
                raise ApiUnavailable(_refused(feed, refused))
            waited = reachability.now() - max(started, feed.progress_at)
            if waited >= timeout_s:
                raise ApiUnavailable(_gave_up(feed, timeout_s, flag))
            await asyncio.wait(
                {synced, stopped},
                timeout=min(POLL_S, timeout_s - waited),
                return_when=asyncio.FIRST_COMPLETED,
            )
    finally:
        for task in (synced, stopped):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _kinds(informers: list[Informer]) -> str:
    first = informers[0].resource.kind
    others = len(informers) - 1
    return f"{first} (and {others} other kind{'s' if others > 1 else ''})" if others else first


def _refused(feed: ClusterFeed, refused: list[Informer]) -> str:
    return (
        f"the API server {feed.reachability.server} refuses to list {_kinds(refused)}: "
        f"{refused[0].last_error}"
    )


def _gave_up(feed: ClusterFeed, timeout_s: float, flag: str) -> str:
    reachability = feed.reachability
    bound = f"gave up after {format_seconds(timeout_s)} ({flag})"
    if not reachability.reachable:
        return (
            f"the API server {reachability.server} is unavailable: {reachability.last_error}; "
            f"{bound}, {reachability.failed_attempts} failed attempts"
        )
    failing = [i for i in feed.unlisted() if i.last_error is not None]
    if failing:
        return (
            f"the API server {reachability.server} did not list {_kinds(failing)}: "
            f"{failing[0].last_error}; {bound}"
        )
    waiting = feed.unlisted()
    what = f" to list {_kinds(waiting)}" if waiting else ""
    return f"no answer from the API server {reachability.server}{what}; {bound}"
