"""Fault injection: errors, slowness, dropped watches, forced 409 and 410, answers lost
after the commit (`after_commit`: the write is applied, the client gets the error), and
watches that lag behind a write whose answer was lost (`lose_answer_and_lag_watches`).

Rules match requests by verb, resource, namespace and name; each fires with a given
probability (from a seeded generator, so runs are repeatable) and optionally only a
given number of times. A rule marked `after_commit` lets the write happen and then
answers with its error, as when the API server commits to etcd but the answer is lost.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from kubesim.errors import ApiError, conflict, gone, internal
from kubesim.resources import ResourceType
from kubesim.store import Store, WatchEvent

VERBS = frozenset(
    {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
)
#: the verbs of the after-commit faults by default
WRITES = VERBS - {"get", "list", "watch"}


def _names(resource: str, rt: ResourceType) -> bool:
    """Whether a fault's `resource` (a plural, or plural.group) names `rt`."""
    return resource in (rt.plural, f"{rt.plural}.{rt.group}")


@dataclass
class FaultRule:
    """One injected fault. `status` 0 means "only delay"; `times` None means forever;
    `after_commit` answers with `status` only once the request has been carried out."""

    status: int = 500
    fraction: float = 1.0
    times: int | None = None
    delay: float = 0.0
    verbs: frozenset[str] = VERBS
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    after_commit: bool = False
    #: the answer waits until this is set (a client that hangs, or is paused, mid-request)
    release: asyncio.Event | None = None
    #: `after_commit` only: the watches lag from this write on
    lag: WatchLag | None = None

    def matches(
        self, verb: str, rt: ResourceType, namespace: str, name: str, subresource: str
    ) -> bool:
        """Whether this rule applies to the request."""
        return (
            (self.times is None or self.times > 0)
            and verb in self.verbs
            and (self.resource is None or _names(self.resource, rt))
            and self.namespace in (None, namespace)
            and self.name in (None, name)
            and self.subresource in (None, subresource)
        )


class WatchLag:
    """Watches of one resource that hold back its events from one write on, as the real
    server's watch cache does when it falls behind etcd: every watcher gets them later,
    in order, as far as `let_through` allows. A lag starts when the write its rule
    matches is carried out (`started`)."""

    def __init__(self, resource: str) -> None:
        #: the plural (or plural.group) whose watches lag
        self.resource = resource
        #: the resourceVersion of the write it starts at, once carried out
        self.first: int | None = None
        self._through = 0
        self._moved = asyncio.Event()
        self._started = asyncio.Event()

    @property
    def started(self) -> bool:
        """Whether the write it starts at was carried out."""
        return self.first is not None

    def start(self, version: int) -> None:
        """Hold back the events from `version` on (the write's own included)."""
        self.first = version
        self._through = version - 1
        self._started.set()

    async def wait_started(self) -> None:
        """Wait until the write it starts at is carried out."""
        await self._started.wait()

    def let_through(self, version: int) -> None:
        """Deliver the held events up to `version` (included); later ones stay held."""
        self._through = max(self._through, version)
        self._moved.set()
        self._moved = asyncio.Event()

    def release(self) -> None:
        """Deliver every held event and stop lagging."""
        self.let_through(2**62)

    def holds(self, event: WatchEvent, rt: ResourceType) -> bool:
        """Whether a watch of `rt` must not deliver `event` yet."""
        return self.first is not None and event.rv > self._through and _names(self.resource, rt)

    async def moved(self) -> None:
        """Wait until `let_through` or `release` lets more through."""
        await self._moved.wait()


class Faults:
    """The simulator's fault injector (`sim.faults`)."""

    def __init__(self, store: Store, seed: int = 0) -> None:
        self._store = store
        self._rng = random.Random(seed)
        self.rules: list[FaultRule] = []
        self.lags: list[WatchLag] = []

    def add(self, rule: FaultRule) -> FaultRule:
        """Install a rule; returns it so a test can later `remove` it."""
        self.rules.append(rule)
        if rule.lag is not None:
            self.lags.append(rule.lag)
        return rule

    def remove(self, rule: FaultRule) -> None:
        """Uninstall one rule; the watches its lag holds back catch up."""
        self.rules.remove(rule)
        if rule.lag is not None:
            rule.lag.release()
            self.lags.remove(rule.lag)

    def clear(self) -> None:
        """Uninstall every rule, and let every lagging watch catch up."""
        self.rules.clear()
        for lag in self.lags:
            lag.release()
        self.lags.clear()

    def error_rate(
        self,
        fraction: float,
        status: int = 500,
        verbs: set[str] | None = None,
        resource: str | None = None,
    ) -> FaultRule:
        """Answer `fraction` of matching requests with `status` (default 500)."""
        return self.add(
            FaultRule(
                status=status, fraction=fraction, verbs=frozenset(verbs or VERBS), resource=resource
            )
        )

    def slow(
        self,
        delay: float,
        verbs: set[str] | None = None,
        resource: str | None = None,
        times: int | None = None,
    ) -> FaultRule:
        """Delay matching requests by `delay` seconds (real time) before answering."""
        return self.add(
            FaultRule(
                status=0,
                delay=delay,
                verbs=frozenset(verbs or VERBS),
                resource=resource,
                times=times,
            )
        )

    def conflict(
        self,
        times: int = 1,
        resource: str | None = None,
        name: str | None = None,
        verbs: set[str] | None = None,
    ) -> FaultRule:
        """Answer the next `times` matching writes with 409 Conflict."""
        return self.add(
            FaultRule(
                status=409,
                times=times,
                verbs=frozenset(verbs or {"update", "patch"}),
                resource=resource,
                name=name,
            )
        )

    def gone(
        self, times: int = 1, resource: str | None = None, verbs: set[str] | None = None
    ) -> FaultRule:
        """Answer the next `times` matching watches (by default) with 410 Gone."""
        return self.add(
            FaultRule(
                status=410, times=times, verbs=frozenset(verbs or {"watch"}), resource=resource
            )
        )

    def drop_watches(self) -> int:
        """Close every open watch stream now; returns how many were closed."""
        return self._store.close_watches()

    def after_commit(
        self,
        fraction: float = 1.0,
        status: int = 500,
        verbs: set[str] | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        times: int | None = None,
    ) -> FaultRule:
        """Carry out `fraction` of matching writes (the next `times` of them, or all), then
        answer them with `status`: the change is stored and seen by watches, the client is
        told it failed (its answer was lost)."""
        return self.add(
            FaultRule(
                status=status,
                fraction=fraction,
                times=times,
                verbs=frozenset(verbs or WRITES),
                resource=resource,
                subresource=subresource,
                after_commit=True,
            )
        )

    def hold_answers(
        self,
        verbs: set[str] | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        times: int | None = 1,
        status: int = 0,
    ) -> asyncio.Event:
        """Carry out the next `times` matching writes, then hold their answers until the
        returned event is set: the change is stored and seen by watches while its client
        still waits (and can be killed, or lose its Lease, before it hears back). With a
        `status`, the answer it then hears is that error (its answer lost)."""
        release = asyncio.Event()
        self.add(
            FaultRule(
                status=status,
                times=times,
                verbs=frozenset(verbs or WRITES),
                resource=resource,
                subresource=subresource,
                after_commit=True,
                release=release,
            )
        )
        return release

    def lose_answer_and_lag_watches(
        self,
        resource: str,
        status: int = 504,
        verbs: set[str] | None = None,
        subresource: str | None = None,
    ) -> WatchLag:
        """Carry out the next matching write and lose its answer (as `after_commit`), and
        from that write on hold back the resource's watch events until the returned lag
        lets them through: a client that retries over its informer meets a view that has
        not seen its own write yet."""
        lag = WatchLag(resource)
        self.add(
            FaultRule(
                status=status,
                times=1,
                verbs=frozenset(verbs or WRITES),
                resource=resource,
                subresource=subresource,
                after_commit=True,
                lag=lag,
            )
        )
        return lag

    async def deliverable(self, event: WatchEvent, rt: ResourceType) -> None:
        """Return once no lag holds `event` back from a watch of `rt`."""
        for lag in self.lags:
            while lag.holds(event, rt):
                await lag.moved()

    async def apply(
        self,
        verb: str,
        rt: ResourceType,
        namespace: str,
        name: str,
        subresource: str = "",
    ) -> None:
        """Run the first matching rule that acts before the request: sleep and/or raise
        its error."""
        rule = self._pick(False, verb, rt, namespace, name, subresource)
        if rule is not None:
            await self.act(rule, rt, name)

    def pick_after_commit(
        self, verb: str, rt: ResourceType, namespace: str, name: str, subresource: str = ""
    ) -> FaultRule | None:
        """The `after_commit` rule that fires for a request just carried out, if any (it
        is counted as fired; `act` plays it)."""
        return self._pick(True, verb, rt, namespace, name, subresource)

    async def act(self, rule: FaultRule, rt: ResourceType, name: str) -> None:
        """Wait for the rule's release, sleep its delay, then raise its error (when it has a
        status)."""
        if rule.release is not None:
            await rule.release.wait()
        if rule.delay:
            await asyncio.sleep(rule.delay)
        if rule.status:
            raise _error(rule.status, rt, name)

    def _pick(
        self,
        after_commit: bool,
        verb: str,
        rt: ResourceType,
        namespace: str,
        name: str,
        subresource: str,
    ) -> FaultRule | None:
        for rule in self.rules:
            if rule.after_commit != after_commit:
                continue
            if not rule.matches(verb, rt, namespace, name, subresource):
                continue
            if rule.fraction < 1.0 and self._rng.random() >= rule.fraction:
                continue
            if rule.times is not None:
                rule.times -= 1
            return rule
        return None


def _error(status: int, rt: ResourceType, name: str) -> ApiError:
    if status == 409:
        return conflict(rt, name or rt.plural)
    if status == 410:
        return gone("too old resource version: injected fault")
    if status == 429:
        return ApiError(
            429,
            "TooManyRequests",
            "injected fault: too many requests, please try again later",
            {"retryAfterSeconds": 1},
            {"Retry-After": "1"},
        )
    if status == 500:
        return internal("injected fault")
    if status == 504:
        # The real server's answer when etcd did not confirm in time: the write may have
        # been carried out all the same.
        return ApiError(
            504,
            "Timeout",
            "injected fault: the server was unable to return a response in the time "
            "allotted, but may still be processing the request",
        )
    if status == 503:
        return ApiError(
            503,
            "ServiceUnavailable",
            "injected fault: the server is currently unable to handle the request",
        )
    return ApiError(status, "Unknown", f"injected fault ({status})")
