"""The recommendation ConfigMaps, each judged on its own (SPEC §4).

One ConfigMap that does not load (not JSON, the wrong shape, no `recommendations.json`)
stops only the workloads it feeds: those whose rows it held when it last loaded (its rows
are kept, never acted on until it loads again) and, in its namespace, the workloads no
other ConfigMap has rows for. Valid rows of every other ConfigMap keep working. A bad row
is skipped and kept as an `InvalidRow`, so the decision of its workload can name it.

Each document is read in the format it is written in: kerf's rows (`recommendations`) or
Kubex's (`results`, app/model/kubex_rows.py). Kubex's own ConfigMap (named, not labelled) feeds
the whole cluster, so when it does not load it stops the workloads of every namespace that
no other ConfigMap has rows for. Kubex holds a container with `KubexAutomation` false: while
GlobalConfiguration's `respectKubexAutomation` is on, its row is left out of the rows and
the container named as held.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from app.model.kubex_rows import is_kubex_document, parse_results
from app.model.recommendations import (
    InvalidRow,
    RecommendationRow,
    configmap_text,
    index_rows,
    load_document,
    parse_document,
)

SourceKey = tuple[str, str]  # (namespace, name) of a ConfigMap
OwnerKey = tuple[str, str, str]  # (kind, namespace, name) of a workload


@dataclass(frozen=True, slots=True)
class SourceState:
    """What one recommendation ConfigMap yielded at its last version."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    #: its rows: those of this version, or those it had when it last loaded (of a
    #: sharded replica, only those of the namespaces it keeps)
    rows: list[RecommendationRow] = field(default_factory=list)
    invalid: list[InvalidRow] = field(default_factory=list)
    #: why this version did not load (None: it loaded)
    failure: str | None = None
    #: how many of its rows were left out for their namespace (a sharded replica's)
    left_out: int = 0

    @property
    def counted(self) -> int:
        """How many rows it yielded, those left out for their namespace included."""
        return len(self.rows) + self.left_out

    @property
    def key(self) -> SourceKey:
        """(namespace, name) of the ConfigMap."""
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class WorkloadSources:
    """What the sources say about one workload beyond its rows."""

    #: why the ConfigMaps that feed it did not load (its proactive values wait)
    unreachable: tuple[str, ...] = ()
    #: the warnings of its rows that were skipped
    invalid: tuple[str, ...] = ()
    #: its containers Kubex holds (`KubexAutomation` false, `respectKubexAutomation` on)
    held: tuple[str, ...] = ()


NO_NEWS = WorkloadSources()


class _Identity(TypedDict):
    """The fields of a SourceState that name its ConfigMap's version."""

    namespace: str
    name: str
    uid: str
    resource_version: str


#: whether rows of a namespace are kept (None: all are)
NamespaceFilter = Callable[[str], bool] | None


def load_source(
    obj: Mapping[str, Any], previous: SourceState | None, keeps: NamespaceFilter = None
) -> SourceState:
    """The state of a ConfigMap's new version, of its rows those of the namespaces `keeps`;
    a version that does not load keeps the rows of the last one that did."""
    meta = obj.get("metadata") or {}
    identity: _Identity = {
        "namespace": str(meta.get("namespace") or ""),
        "name": str(meta.get("name") or ""),
        "uid": str(meta.get("uid") or ""),
        "resource_version": str(meta.get("resourceVersion") or ""),
    }
    if previous is not None and _same_version(previous, identity):
        # listed again (a relist after a 410, a sharded replica's new buckets): the
        # document is the one already read
        return previous if keeps is None else _refiltered(obj, previous, keeps)
    try:
        rows, invalid = _configmap_rows(obj)
    except ValueError as exc:
        if previous is None:
            return SourceState(**identity, failure=str(exc))
        return SourceState(
            **identity, rows=previous.rows, failure=str(exc), left_out=previous.left_out
        )
    kept = rows if keeps is None else [row for row in rows if keeps(row.namespace)]
    return SourceState(**identity, rows=kept, invalid=invalid, left_out=len(rows) - len(kept))


def _same_version(previous: SourceState, identity: _Identity) -> bool:
    """Whether `previous` loaded this very version of the ConfigMap."""
    return (
        previous.failure is None
        and bool(identity["uid"] and identity["resource_version"])
        and (previous.uid, previous.resource_version)
        == (identity["uid"], identity["resource_version"])
    )


def _refiltered(
    obj: Mapping[str, Any], previous: SourceState, keeps: Callable[[str], bool]
) -> SourceState:
    """A version loaded before, listed again after the namespaces kept changed (a sharded
    replica's buckets): the rows it kept that it still keeps, and the rows of the
    namespaces it now keeps and kept none of, read from the document. What it skipped and
    counted are those of the first read."""
    had = {row.namespace for row in previous.rows}
    rows = [row for row in previous.rows if keeps(row.namespace)]
    gained, _ = _configmap_rows(obj, lambda namespace: namespace not in had and keeps(namespace))
    rows.extend(gained)
    return replace(previous, rows=rows, left_out=previous.counted - len(rows))


def _configmap_rows(
    obj: Mapping[str, Any], namespaces: NamespaceFilter = None
) -> tuple[list[RecommendationRow], list[InvalidRow]]:
    """Rows of a ConfigMap in the format its document is written in (`namespaces`: of
    those only), and the rows it skipped; ValueError when it does not load."""
    text, source = configmap_text(obj)
    document = load_document(text, source)
    if is_kubex_document(document):
        return parse_results(document, source, namespaces)
    return parse_document(document, source, namespaces)


#: (namespace, name) of no ConfigMap: the Kubex source when none is watched
NO_SOURCE: SourceKey = ("", "")
#: `_failed_in`'s key for a failed source that feeds every namespace
EVERY_NAMESPACE = "*"


class RecommendationSources:
    """Every recommendation ConfigMap's state, and its rows indexed by workload.

    `kubex` names Kubex's ConfigMap (it feeds every namespace). A sharded replica keeps the
    rows of its buckets' namespaces only (`keeps`): every other replica keeps the rest. Its
    buckets change with a relist, which brings every ConfigMap again."""

    def __init__(self, kubex: SourceKey = NO_SOURCE, keeps: NamespaceFilter = None) -> None:
        self.kubex = kubex
        self.keeps = keeps
        self._states: dict[SourceKey, SourceState] = {}
        #: every row by workload and container, those Kubex holds included
        self._all_rows: dict[OwnerKey, dict[str, RecommendationRow]] = {}
        #: the same without the rows Kubex holds
        self._rows: dict[OwnerKey, dict[str, RecommendationRow]] = {}
        #: the containers Kubex holds, by workload
        self._held: dict[OwnerKey, tuple[str, ...]] = {}
        self._invalid: dict[OwnerKey, list[str]] = {}
        #: failed ConfigMaps by the workloads their kept rows name
        self._failed_for: dict[OwnerKey, list[str]] = {}
        #: failed ConfigMaps by namespace
        self._failed_in: dict[str, list[str]] = {}
        #: whether the indexes above are behind `_states`
        self._stale = False

    def apply(self, obj: Mapping[str, Any]) -> SourceState:
        """Take a ConfigMap's new version; returns its state."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        state = load_source(obj, self._states.get(key), self.keeps)
        self._states[key] = state
        self._outdate()
        return state

    def delete(self, namespace: str, name: str) -> bool:
        """Forget a ConfigMap; whether it was known."""
        if self._states.pop((namespace, name), None) is None:
            return False
        self._outdate()
        return True

    def knows(self, namespace: str, name: str) -> bool:
        """Whether a ConfigMap is one of the sources."""
        return (namespace, name) in self._states

    def states(self) -> Iterable[SourceState]:
        """The state of every ConfigMap."""
        return self._states.values()

    def rows_for(self, owner: OwnerKey, *, respect_kubex: bool) -> Mapping[str, RecommendationRow]:
        """A workload's rows by container (`app.model.recommendations.index_rows` chooses one
        per container); with `respect_kubex`, without those Kubex holds."""
        self._reindex()
        return (self._rows if respect_kubex else self._all_rows).get(owner, {})

    def about(self, owner: OwnerKey, *, respect_kubex: bool) -> WorkloadSources:
        """The failed ConfigMaps that feed a workload, its skipped rows and (with
        `respect_kubex`) the containers Kubex holds."""
        self._reindex()
        if not (self._failed_for or self._failed_in or self._invalid or self._held):
            return NO_NEWS  # the common case: every ConfigMap loaded, every row was sound
        unreachable = self._failed_for.get(owner, [])
        if not unreachable and owner not in self._all_rows:
            unreachable = [
                *self._failed_in.get(owner[1], []),
                *self._failed_in.get(EVERY_NAMESPACE, []),
            ]
        held = self._held.get(owner, ()) if respect_kubex else ()
        news = WorkloadSources(tuple(unreachable), tuple(self._invalid.get(owner, ())), held)
        return NO_NEWS if news == NO_NEWS else news

    def _outdate(self) -> None:
        """The indexes are rebuilt when next read, once for every ConfigMap taken since: a
        list brings dozens of them at once (37 at 100,000 workloads), and a rebuild after each
        one read all the rows again, holding the event loop seconds at that size. The old
        indexes go now, not beside the new ones. Reads and writes hold the view's lock."""
        self._all_rows, self._rows, self._held = {}, {}, {}
        self._invalid, self._failed_for, self._failed_in = {}, {}, {}
        self._stale = True

    def _reindex(self) -> None:
        if not self._stale:
            return
        states = sorted(self._states.values(), key=lambda s: s.key)
        self._all_rows = index_rows(row for s in states for row in s.rows)
        self._held = {
            owner: held
            for owner, rows in self._all_rows.items()
            if (held := tuple(sorted(c for c, row in rows.items() if not row.automation)))
        }
        self._rows = {
            owner: {c: row for c, row in rows.items() if row.automation}
            if owner in self._held
            else rows
            for owner, rows in self._all_rows.items()
        }
        self._invalid = {}
        self._failed_for = {}
        self._failed_in = {}
        for state in states:
            for bad in state.invalid:
                if bad.owner_key is not None:
                    self._invalid.setdefault(bad.owner_key, []).append(bad.warning)
            if state.failure is None:
                continue
            feeds = EVERY_NAMESPACE if state.key == self.kubex else state.namespace
            self._failed_in.setdefault(feeds, []).append(state.failure)
            for owner in dict.fromkeys(row.owner_key for row in state.rows):
                self._failed_for.setdefault(owner, []).append(state.failure)
        self._stale = False
