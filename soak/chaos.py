"""The chaos, on a seeded schedule printed as it happens: the leader (sharded: the holder
of the workloads' bucket) killed (SIGKILL) or stopped (SIGSTOP) for longer than the Lease
every 15–25 s, API fault windows (500, 409,
429, slow answers, 410 on watches, answers lost after the commit), pods deleted and
Deployments scaled, and the policies' values changed once midway, with one lost answer
whose resource's watches then lag behind for a while."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kubesim.errors import ApiError
from kubesim.faults import FaultRule, WatchLag
from soak.cluster import LEASE_DURATION_S, Cluster
from soak.workloads import MAX_REPLICAS, NAMESPACE, PHASE_A, PHASE_B, WORKLOADS

READS = frozenset({"get", "list"})
WRITES = frozenset({"create", "update", "patch", "delete"})
#: a rule's `times`, so large no window uses it up: what is left says how often it fired
FIRE_BUDGET = 1_000_000
FAULT_KINDS = ("500", "409", "429", "slow", "410", "lost-500", "lost-504")
#: what a lost answer's lagging watches can be of: the reconciler's records, the pods it
#: resizes and the workloads it annotates
LAGGED = ("rightsizingrecommendations", "pods", "deployments")
#: how long the lagging-watch fault waits for its write (kerf writes those resources only
#: when something changes: it is armed just before phase B's change, which writes all
#: three) before its window starts anyway
LAG_ARMED_S = 20.0
PODS = ("", "pods")


@dataclass
class Timeline:
    """What the chaos did, with seconds since the chaos began; printed as it happens."""

    start: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def note(self, kind: str, text: str) -> None:
        """Record and print one action."""
        self.counts[kind] += 1
        line = f"  [{time.monotonic() - self.start:6.1f}s] {text}"
        self.lines.append(line)
        print(line, flush=True)


def fault_rule(kind: str, rng: random.Random) -> FaultRule:
    """The rule of one fault window."""
    every = READS | WRITES
    if kind == "500":
        return FaultRule(status=500, fraction=0.3, verbs=every, times=FIRE_BUDGET)
    if kind == "409":
        return FaultRule(
            status=409, fraction=0.4, verbs=frozenset({"update", "patch"}), times=FIRE_BUDGET
        )
    if kind == "429":
        return FaultRule(status=429, fraction=0.3, verbs=every, times=FIRE_BUDGET)
    if kind == "slow":
        delay = round(rng.uniform(0.3, 1.5), 2)
        return FaultRule(status=0, delay=delay, fraction=0.5, verbs=every, times=FIRE_BUDGET)
    if kind == "410":
        return FaultRule(status=410, fraction=0.5, verbs=frozenset({"watch"}), times=FIRE_BUDGET)
    status = int(kind.removeprefix("lost-"))
    return FaultRule(
        status=status, fraction=0.3, verbs=WRITES, times=FIRE_BUDGET, after_commit=True
    )


def lagging_rule(rng: random.Random) -> tuple[FaultRule, WatchLag]:
    """The lost answer whose resource's watches then lag (one of `LAGGED`), and its lag."""
    resource = rng.choice(LAGGED)
    lag = WatchLag(resource)
    rule = FaultRule(
        status=504, verbs=WRITES, resource=resource, times=1, after_commit=True, lag=lag
    )
    return rule, lag


def describe(rule: FaultRule) -> str:
    """One line for a rule."""
    what = f"delay {rule.delay}s" if not rule.status else str(rule.status)
    when = " after the commit" if rule.after_commit else ""
    verbs = ",".join(sorted(rule.verbs))
    if rule.lag is not None:
        return (
            f"{what}{when} on the next {verbs} of {rule.resource}, its watches lagging "
            "from that write on"
        )
    return f"{what}{when} on {rule.fraction:.0%} of {verbs}"


class Chaos:
    """Runs the schedule for `duration_s` seconds over a cluster."""

    def __init__(
        self, cluster: Cluster, rng: random.Random, duration_s: float, timeline: Timeline
    ) -> None:
        self.cluster = cluster
        self.rng = rng
        self.duration_s = duration_s
        self.timeline = timeline
        #: faults that fired, by kind
        self.fired: Counter[str] = Counter()

    async def run(self) -> None:
        """All of the chaos at once, until the duration has passed; then undo it."""
        await self.set_policies(PHASE_A, "phase A")
        tasks = [
            asyncio.create_task(self._loop(self._leader)),
            asyncio.create_task(self._loop(self._api_faults)),
            asyncio.create_task(self._loop(self._pods)),
            asyncio.create_task(self._phase_b()),
        ]
        try:
            await asyncio.sleep(self.duration_s)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._undo()

    async def _loop(self, step: Callable[[], Awaitable[None]]) -> None:
        while True:
            await step()

    async def _phase_b(self) -> None:
        await asyncio.sleep(self.duration_s / 2)
        faults = self.cluster.sim.faults
        rule, lag = lagging_rule(self.rng)
        faults.add(rule)
        window = round(self.rng.uniform(3, 6), 1)
        self.timeline.note("fault-lost-lag", f"for {window}s once it fires: {describe(rule)}")
        try:
            await self.set_policies(PHASE_B, "phase B")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lag.wait_started(), LAG_ARMED_S)
            if lag.started:
                self.fired["lost-lag"] += 1
                self.timeline.note("lag", f"{lag.resource} watches lag from version {lag.first}")
            await asyncio.sleep(window)
        finally:
            faults.remove(rule)

    async def set_policies(self, phase: dict[str, dict[str, str]], label: str) -> None:
        """Every StaticPolicy to a phase's values (through the API server directly, so
        the chaos's own faults do not refuse it)."""
        api = self.cluster.sim.api
        rt = api.resource("rightsizing.kubex.ai", "v1alpha1", "staticpolicies")
        for workload in WORKLOADS:
            policy = workload.policy(phase)
            if self.cluster.sim.store.get(rt.key, NAMESPACE, workload.name) is None:
                await api.create(rt, NAMESPACE, policy)
            else:
                body = {"spec": {"resources": policy["spec"]["resources"]}}
                await api.patch(rt, NAMESPACE, workload.name, "application/merge-patch+json", body)
        await self.cluster.sim.settle()
        self.timeline.note("policies", f"policies set to {label}: {phase}")

    # ------------------------------------------------------------ the leader

    async def _leader(self) -> None:
        await asyncio.sleep(self.rng.uniform(15, 25))
        kill = self.timeline.counts["kill"] <= self.timeline.counts["stop"]
        if self.timeline.counts["kill"] == self.timeline.counts["stop"] == 0:
            kill = self.rng.random() < 0.5
        holder = self.cluster.lease_holder()
        lease = self.cluster.lease_of(NAMESPACE).split("/")[1]
        replica = self.cluster.replica(holder)
        if replica is None or not replica.running:
            self.timeline.note("no-leader", f"no running holder to disrupt ({lease}: {holder!r})")
            return
        if kill:
            await replica.kill()
            self.timeline.note("kill", f"SIGKILL {holder}, the holder of {lease}")
            await asyncio.sleep(self.rng.uniform(1, 3))
            await replica.start()
            self.timeline.note("restart", f"{holder} restarted")
        else:
            pause = round(LEASE_DURATION_S + self.rng.uniform(2, 5), 1)
            replica.pause()
            self.timeline.note("stop", f"SIGSTOP {holder}, the holder of {lease}, for {pause}s")
            await asyncio.sleep(pause)
            replica.resume()
            self.timeline.note("cont", f"SIGCONT {holder}")

    # ------------------------------------------------------------ the API

    async def _api_faults(self) -> None:
        for kind in self.rng.sample(FAULT_KINDS, len(FAULT_KINDS)):
            await asyncio.sleep(self.rng.uniform(1, 3))
            rule = fault_rule(kind, self.rng)
            faults = self.cluster.sim.faults
            if kind == "410":
                dropped = faults.drop_watches()
                self.timeline.note("drop-watches", f"{dropped} watches dropped")
            faults.add(rule)
            window = round(self.rng.uniform(3, 6), 1)
            self.timeline.note(f"fault-{kind}", f"for {window}s: {describe(rule)}")
            try:
                await asyncio.sleep(window)
            finally:
                faults.remove(rule)
                self.fired[kind] += FIRE_BUDGET - (rule.times or 0)

    # ------------------------------------------------------------ the workloads

    async def _pods(self) -> None:
        await asyncio.sleep(self.rng.uniform(3, 7))
        sim = self.cluster.sim
        try:
            if self.rng.random() < 0.6:
                names = sorted(p["metadata"]["name"] for p in sim.store.iter(PODS, NAMESPACE))
                if not names:
                    return
                name = self.rng.choice(names)
                await sim.api.delete(sim.api.resource("", "v1", "pods"), NAMESPACE, name)
                self.timeline.note("delete-pod", f"pod {name} deleted")
            else:
                workload = self.rng.choice([w for w in WORKLOADS if w.scalable])
                replicas = self.rng.randint(1, MAX_REPLICAS)
                await self._scale(workload.name, replicas)
                self.timeline.note("scale", f"deployment {workload.name} scaled to {replicas}")
        except ApiError as exc:
            self.timeline.note("refused", f"the chaos's own write was refused: {exc.message}")
        await sim.settle()

    async def _scale(self, name: str, replicas: int) -> None:
        api = self.cluster.sim.api
        rt = api.resource("apps", "v1", "deployments")
        body = {"spec": {"replicas": replicas}}
        await api.patch(rt, NAMESPACE, name, "application/merge-patch+json", body)

    async def _undo(self) -> None:
        """No faults, every replica running, every Deployment at its own size."""
        self.cluster.sim.faults.clear()
        for replica in self.cluster.reconcilers:
            if replica.paused:
                replica.resume()
                self.timeline.note("cont", f"SIGCONT {replica.name} (the chaos ended)")
            elif not replica.running:
                await replica.start()
                self.timeline.note("restart", f"{replica.name} restarted (the chaos ended)")
        for workload in WORKLOADS:
            await self._scale(workload.name, workload.replicas)
        await self.cluster.sim.settle()
        self.timeline.note("end", "chaos over: faults cleared, Deployments at their own size")
