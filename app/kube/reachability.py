"""The API server's reachability as one process sees it: one voice for every informer,
Lease and write of the process, instead of one warning per resource per retry.

Every request to the API server tells the process's `Reachability` how it went: `failed`
with the error when it got no usable answer, `answered` when the server answered
(whatever the status, but 502 and 503: a server that answers 403 is reachable).
What counts as "unreachable" (`is_outage`): no connection, a reset, a timeout, an answer
cut short, or 502/503 from the server or a proxy before it. Anything else (401, 403, 404,
410, 500, 504, …) is about one request or one resource, and stays its caller's to say.

- A second failure with no answer since the first starts an outage (a single one may be
  a keep-alive connection the server closed as it was reused): one warning naming the
  server and the error.
- While it lasts, the failures are counted, and said again at most once per
  `report_interval_s` (a minute), with the count and how long it has lasted.
- The first answer to a request sent after the outage began ends it: one line, with how
  long it lasted and how many attempts failed.

Attempts are stamped when they start (`now()`). A failure of an attempt started before the
last recovery, or an answer to one started before the outage began, is old news (a connect
that timed out after another request got through, a response already on its way when the
server died) and changes nothing.

One `Reachability` per API client (`reachability_of`), so every part of a process that
talks through one client shares it. A one-shot command (`kerf reconciler --once`) makes
it `quiet`: what failed is said once, in the command's own last line (`app.kube.firstsync`).
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from collections.abc import Callable
from typing import Any

import aiohttp

logger = logging.getLogger("kerf.api")

#: HTTP statuses that mean "the server (or the proxy in front of it) cannot serve now".
#: Not 504: kube-apiserver answers it for one request that outlived its timeout.
OUTAGE_STATUSES = frozenset({502, 503})
#: How often a lasting outage is said again (seconds).
REPORT_INTERVAL_S = 60.0
#: Failures, with no answer between them, that make an outage: one alone may be a
#: keep-alive connection the server closed as it was reused, and the retry answers.
CONFIRMING_FAILURES = 2

_TRANSPORT_ERRORS = (
    aiohttp.ClientConnectionError,  # refused, reset, disconnected, DNS, TLS, connect timeout
    aiohttp.ClientPayloadError,  # an answer cut short
    TimeoutError,
    ConnectionError,
)


def is_transport_error(exc: BaseException) -> bool:
    """No answer at all: no connection, a reset, a timeout, an answer cut short."""
    return isinstance(exc, _TRANSPORT_ERRORS)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an error carries (`app.kube.errors.ApiStatusError.code`), if any."""
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def is_outage(exc: BaseException) -> bool:
    """The error says the API server cannot be reached or cannot serve, not that it
    refused one request."""
    return is_transport_error(exc) or status_of(exc) in OUTAGE_STATUSES


def describe(exc: BaseException) -> str:
    """The error in a few words, for a log line or a command's last line."""
    status = status_of(exc)
    if status is not None:
        return f"HTTP {exc}"
    text = " ".join(str(exc).split())
    if isinstance(exc, TimeoutError) and not text:
        return "no answer (timed out)"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def format_seconds(seconds: float) -> str:
    """`42s`, `3m5s`, `2h0m7s`: how long an outage has lasted, to the second."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


class Reachability:
    """Whether the API server at `server` can be reached, from what this process's requests
    met; logs an outage when it starts, at most once per `report_interval_s` while it
    lasts, and when it ends."""

    def __init__(
        self,
        server: str,
        *,
        report_interval_s: float = REPORT_INTERVAL_S,
        monotonic: Callable[[], float] = time.monotonic,
        quiet: bool = False,
        log: logging.Logger = logger,
    ) -> None:
        self.server = server
        self.report_interval_s = report_interval_s
        self.quiet = quiet
        self._monotonic = monotonic
        self._log = log
        #: when the current outage began (monotonic), None while the server answers
        self.down_since: float | None = None
        #: attempts that failed in the current (or last) outage
        self.failed_attempts = 0
        #: the last outage error, described
        self.last_error: str | None = None
        self._changed_at = -math.inf
        self._said_at = -math.inf
        #: failures since the last answer, before an outage is declared
        self._suspected = 0

    def now(self) -> float:
        """The stamp of an attempt that starts now."""
        return self._monotonic()

    @property
    def reachable(self) -> bool:
        """No outage is under way (true before the first request too)."""
        return self.down_since is None

    def failed(self, exc: BaseException, started: float) -> bool:
        """An attempt started at `started` failed with `exc`. True when `exc` is an outage
        error, counted and said here (the caller need not log it); False otherwise."""
        if not is_outage(exc):
            return False
        now = self.now()
        if self.down_since is not None:
            self.failed_attempts += 1
            self.last_error = describe(exc)
            if now - self._said_at >= self.report_interval_s:
                self._said_at = now
                self._say(
                    logging.WARNING,
                    f"the API server {self.server} is still unavailable after "
                    f"{format_seconds(now - self.down_since)} ({self.failed_attempts} failed "
                    f"attempts); last error: {self.last_error}",
                )
        elif started >= self._changed_at:
            self._suspected += 1
            self.last_error = describe(exc)
            if self._suspected < CONFIRMING_FAILURES:
                return True
            self.down_since = self._changed_at = self._said_at = now
            self.failed_attempts = self._suspected
            self._suspected = 0
            self._say(
                logging.WARNING,
                f"the API server {self.server} is unavailable: {self.last_error}; retrying "
                f"(said again at most every {format_seconds(self.report_interval_s)} "
                "until it answers)",
            )
        return True

    def answered(self, started: float) -> None:
        """The server answered an attempt started at `started` (with a status that is not
        an outage's)."""
        if self.down_since is None:
            self._suspected = 0
            return
        if started < self._changed_at:
            return
        now = self.now()
        lasted = now - self.down_since
        self.down_since = None
        self._changed_at = now
        self._say(
            logging.INFO,
            f"the API server {self.server} answers again after {format_seconds(lasted)} "
            f"({self.failed_attempts} failed attempts)",
        )

    def _say(self, level: int, message: str) -> None:
        fields: dict[str, Any] = {
            "server": self.server,
            "reachable": self.reachable,
            "failedAttempts": self.failed_attempts,
        }
        if self.down_since is not None:
            fields["error"] = self.last_error
        self._log.log(logging.DEBUG if self.quiet else level, message, extra={"fields": fields})


_BY_CLIENT: weakref.WeakKeyDictionary[Any, Reachability] = weakref.WeakKeyDictionary()


def server_of(api_client: Any) -> str:
    """The API server's address an API client talks to."""
    host = getattr(getattr(api_client, "configuration", None), "host", None)
    return str(host) if host else "(unknown address)"


def reachability_of(api_client: Any) -> Reachability:
    """The `Reachability` of everything that talks through `api_client` (made on first
    use)."""
    found = _BY_CLIENT.get(api_client)
    if found is None:
        found = _BY_CLIENT[api_client] = Reachability(server_of(api_client))
    return found


def attach(api_client: Any, reachability: Reachability) -> Reachability:
    """Make `reachability` the one of `api_client` (a quiet one for a one-shot command, or a
    test's with its own clock)."""
    _BY_CLIENT[api_client] = reachability
    return reachability
