"""Every cache of decisions the cluster view keeps, in one owner with its bounds.

`DecisionCaches` holds what decisions derive from the view and keep between pods: the
workload plans, the decision caches of each plan, the admission memo and the templates
seen once (not memoised yet), the versions of the admission inputs no plan covers, the
values derived from one version of such an input, the settings derived from kerf
objects, and the parsed containers of pods. The view tells it
what changed; it decides what that drops. Its docstring is the one place that says
what each cache keys on and what drops each entry.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

#: plans that keep their decision caches (`Plan.memo`, `.selections`), most recently
#: used first out of the bound. The caches serve the pods of one workload decided
#: together (a pass, a rollout's admissions) and admissions cycling over the active
#: workloads: ~4 KB each, so the bound is what the webhook sees active at once (the
#: admission bench cycles 6,000 workloads), not every workload of a large cluster. An
#: older plan keeps its sync result and candidates and builds its caches again when used.
MAX_CACHED_PLANS = 8192
#: pods whose parsed containers are kept, the most recently decided. A pass decides a
#: workload's pods together and a parse is a few µs; kept for every pod they were
#: ~1.3 KB each.
MAX_PARSED_PODS = 4096
#: the same bound in the reconciler: the pods of its `RECONCILER_CACHED_PLANS` plans
RECONCILER_PARSED_PODS = 1536
#: the same bound in the reconciler, which decides one workload per pass (8 workers): its
#: caches serve a pass's pods and the follow-ups of a rollout in place, which come within
#: a few hundred passes; at ~5 KB a plan, 8,192 of them were 45 MB of its peak at 25,000
#: workloads, and a plan's caches go anyway with every write to its workload or record
RECONCILER_CACHED_PLANS = 1024
#: admission decisions a plan remembers (by pod template): a rollout has two templates
#: (old and new ReplicaSet), each also seen once more on reinvocation
MEMO_PER_PLAN = 8
#: admission decisions remembered over all plans: what a request can make the view keep
#: is bounded whatever it sends (~3.4 KB each)
MEMO_TOTAL = 4096
#: templates seen once and not memoised, the most recent: as many as the memo keeps, so a
#: template that comes back before the memo would have dropped its answer is memoised
MAX_SIGHTINGS = MEMO_TOTAL
#: the plan memo's key of its admission decisions
ADMISSIONS = "admissions"

#: (input name, its scope): `app.store.inputs`
StampKey = tuple[str, Any]
#: the version of an input never touched (or forgotten)
NEVER = object()
WorkloadKey = tuple[str, str, str]
PodKey = tuple[str, str]


class Plan(Protocol):
    """What `DecisionCaches` needs of a plan: its two decision caches."""

    @property
    def memo(self) -> dict[Any, Any]: ...

    @property
    def selections(self) -> dict[Any, Any]: ...


P = TypeVar("P", bound=Plan)


@dataclass(slots=True)
class DecisionCaches(Generic[P]):
    """The view's decision caches. What each keys on, and what drops each entry:

    - **plans**: by workload key, the workload's `WorkloadPlan` (its policy sync result
      and candidates). Only workloads the view holds have one. Dropped when the workload
      changes or goes (`drop_plan`), when the RightsizingRecommendation named after it
      changes a field the decisions read (`app.store.inputs.RECORD_FIELDS`; `drop_plan`
      of its targets), and all of them when any other kerf object or a recommendation
      ConfigMap changes (`drop_plans`).
    - **plan caches** (`plan.memo`, `plan.selections`): what decisions derive from one
      plan alone, valid exactly as long as the plan. Kept for the `max_plans` most
      recently used plans (`use_plan`; `MAX_CACHED_PLANS` unless set, the reconciler's
      `RECONCILER_CACHED_PLANS`); emptied, not dropped, when a plan falls
      out of that bound, is replaced or is dropped (a pass in flight may still hold it).
    - **admission memo**: by (plan, pod template digest), a remembered admission
      decision, kept inside the plan's memo so it goes with the plan. At most
      `MEMO_PER_PLAN` per plan and `MEMO_TOTAL` in all, oldest first out. Each entry
      carries the input stamps it read and the span of time it holds for (checked by
      `app.decide.admission`, which decides again when either differs).
    - **sightings**: the template digests seen once and not memoised, the
      `MAX_SIGHTINGS` most recent. A template is memoised from its second pod on: the
      first leaves only its digest here (`first_sighting`), so a template seen once (a
      CronJob's run, more templates cycling than the memo keeps) builds no answer that
      is dropped before any reuse. Dropped when the template is seen again, or oldest
      first past the bound.
    - **input stamps**: by (input name, scope), the version of an input no plan covers
      (`app.store.inputs` derives the keys from the declared inputs: the Namespace, its
      LimitRanges and quotas, a workload's autoscalers, the OOM evidence among its pods,
      the nodes' allocatable). `touch` gives a new object, so a key dropped
      (`forget_stamp`: the workload or its last pod went) and set again never repeats
      an earlier version. An absent stamp reads `NEVER`.
    - **by input version**: by (stamp key, key), a value derived from that input alone
      (`app/store/allocatable.py`: each node's parsed allocatable and the largest, under the
      node-allocatable version; `app/store/namespace_bounds.py`: a namespace's parsed bounds,
      under its version). All of an input's go when its version changes (`touch`) or is
      forgotten.
    - **kerf settings**: by ("priorities",), ("guardrails", policy key or None),
      ("protected", namespace) and ("cluster-policies", namespace), what the kerf objects
      alone decide: the policy-type priorities, a policy's merged guardrails, whether a
      protected namespace pattern names a namespace (kept only for namespaces the view
      holds), the cluster policies a namespace's name admits (kept only for namespaces of
      workloads the view holds): a request names any namespace it likes. All dropped when any kerf object but a RightsizingRecommendation
      changes (`drop_settings`).
    - **parsed pods**: by pod key, the parsed containers of the `max_parsed` most
      recently decided pods (`MAX_PARSED_PODS` unless set, the reconciler's
      `RECONCILER_PARSED_PODS`). Dropped when the pod changes or goes (`drop_parsed`).
    """

    _plans: dict[WorkloadKey, P] = field(default_factory=dict)
    #: the plans whose caches are kept, least recently used first
    _cached: OrderedDict[WorkloadKey, P] = field(default_factory=OrderedDict)
    #: (plan memo, key) of every remembered admission decision, oldest first
    _memo_order: deque[tuple[dict[Any, Any], Any]] = field(default_factory=deque)
    _stamps: dict[StampKey, object] = field(default_factory=dict)
    #: by stamp key: key -> a value derived from the input's current version
    _derived: dict[StampKey, dict[Any, Any]] = field(default_factory=dict)
    _settings: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    _parsed: OrderedDict[PodKey, Any] = field(default_factory=OrderedDict)
    _sightings: OrderedDict[Any, None] = field(default_factory=OrderedDict)
    #: admission decisions answered from the memo, and those decided afresh (`count`)
    memo_hits: int = 0
    memo_misses: int = 0
    #: how many plans keep their caches (None: `MAX_CACHED_PLANS`)
    max_plans: int | None = None
    #: how many pods' parses are kept (None: `MAX_PARSED_PODS`)
    max_parsed: int | None = None

    # ------------------------------------------------------------------ plans

    def plan(self, key: WorkloadKey) -> P | None:
        """The kept plan of a workload, or None."""
        return self._plans.get(key)

    def owns(self, key: WorkloadKey, plan: P) -> bool:
        """Whether `plan` is the kept plan of the workload (not a stand-in's, not one
        dropped since)."""
        return self._plans.get(key) is plan

    def keep_plan(self, key: WorkloadKey, plan: P) -> None:
        """Keep a workload's new plan and mark it most recently used."""
        self._plans[key] = plan
        self.use_plan(key, plan)

    def use_plan(self, key: WorkloadKey, plan: P) -> None:
        """Mark `plan` most recently used; empty the caches of the least recently used
        beyond `max_plans`."""
        cached = self._cached
        previous = cached.pop(key, None)
        if previous is not None and previous is not plan:
            _empty(previous)
        cached[key] = plan
        if len(cached) > (MAX_CACHED_PLANS if self.max_plans is None else self.max_plans):
            _empty(cached.popitem(last=False)[1])

    def drop_plan(self, key: WorkloadKey) -> None:
        """A workload's plan inputs changed: forget its plan and empty its caches."""
        self._plans.pop(key, None)
        dropped = self._cached.pop(key, None)
        if dropped is not None:
            _empty(dropped)

    def drop_plans(self) -> None:
        """An input of every plan changed: forget them all, and the admission memo."""
        self._plans.clear()
        for dropped in self._cached.values():
            _empty(dropped)
        self._cached.clear()
        self._memo_order.clear()

    # ------------------------------------------------------------------ admission memo

    def recall(self, plan: P, key: Any) -> Any:
        """What `remember` kept for a plan under a key, or None."""
        memo = plan.memo.get(ADMISSIONS)
        return memo.get(key) if memo is not None else None

    def remember(self, workload: WorkloadKey, plan: P, key: Any, value: Any) -> None:
        """Keep a value for a plan, bounded per plan and over all plans, oldest first
        out. Only kept plans keep anything: a stand-in workload's plan is built afresh
        for every pod."""
        if not self.owns(workload, plan):
            return
        memo = plan.memo.setdefault(ADMISSIONS, {})
        if key not in memo and len(memo) >= MEMO_PER_PLAN:
            del memo[next(iter(memo))]
        memo[key] = value
        order = self._memo_order
        order.append((memo, key))
        while len(order) > MEMO_TOTAL:
            old_memo, old_key = order.popleft()
            old_memo.pop(old_key, None)

    def count(self, *, hit: bool) -> None:
        """An admission decision was answered from the memo (`hit`) or decided afresh."""
        if hit:
            self.memo_hits += 1
        else:
            self.memo_misses += 1

    def first_sighting(self, key: Any) -> bool:
        """Whether a template is seen for the first time since the bound last dropped
        it: True records it, False forgets it (its answer is memoised from now on)."""
        sightings = self._sightings
        if key in sightings:
            del sightings[key]
            return False
        sightings[key] = None
        if len(sightings) > MAX_SIGHTINGS:
            sightings.popitem(last=False)
        return True

    # ------------------------------------------------------------------ input stamps

    def stamp(self, key: StampKey) -> object:
        """The version of an input (`NEVER` while never touched or forgotten). Versions
        compare by identity: one kept by a memo is never made again."""
        return self._stamps.get(key, NEVER)

    def stamps(self, keys: tuple[StampKey, ...]) -> tuple[object, ...]:
        """The versions of several inputs, in order."""
        get = self._stamps.get
        return tuple([get(key, NEVER) for key in keys])

    def touch(self, key: StampKey) -> None:
        """An input outside the plans changed: give it a new version."""
        self._stamps[key] = object()
        self._derived.pop(key, None)

    def forget_stamp(self, key: StampKey) -> None:
        """Drop an input's version (its absence then says what 0 says)."""
        self._stamps.pop(key, None)
        self._derived.pop(key, None)

    # ------------------------------------------------------------------ by input version

    def derived(self, stamp: StampKey, key: Any) -> Any:
        """What `keep_derived` kept under `key` from the input's current version, or None."""
        return self._derived.get(stamp, {}).get(key)

    def keep_derived(self, stamp: StampKey, key: Any, value: Any) -> None:
        """Keep a value derived from the input's current version alone, until the input
        changes."""
        self._derived.setdefault(stamp, {})[key] = value

    # ------------------------------------------------------------------ kerf settings

    def setting(self, key: tuple[Any, ...]) -> Any:
        """A kept setting, or None."""
        return self._settings.get(key)

    def keep_setting(self, key: tuple[Any, ...], value: Any) -> None:
        """Keep what the kerf objects decide under `key` until one of them changes."""
        self._settings[key] = value

    def drop_settings(self) -> None:
        """A kerf object (not a RightsizingRecommendation) changed."""
        self._settings.clear()

    # ------------------------------------------------------------------ parsed pods

    def parsed(self, key: PodKey) -> Any:
        """The kept parse of a pod, marked most recently used, or None."""
        found = self._parsed.pop(key, None)
        if found is not None:
            self._parsed[key] = found
        return found

    def keep_parsed(self, key: PodKey, value: Any) -> None:
        """Keep a pod's parse, dropping the least recently used beyond `max_parsed`."""
        self._parsed[key] = value
        if len(self._parsed) > (MAX_PARSED_PODS if self.max_parsed is None else self.max_parsed):
            self._parsed.popitem(last=False)

    def drop_parsed(self, key: PodKey) -> None:
        """The pod changed or went."""
        self._parsed.pop(key, None)

    def parsed_keys(self) -> list[PodKey]:
        """The pods whose parse is kept, least recently used first."""
        return list(self._parsed)


def _empty(plan: Plan) -> None:
    """Forget what decisions derived from a plan whose caches are no longer kept (a pass
    still holding it derives them again: they are caches)."""
    admissions = plan.memo.get(ADMISSIONS)
    if admissions:
        admissions.clear()  # `_memo_order` may still name it
    plan.memo.clear()
    plan.selections.clear()
