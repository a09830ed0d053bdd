"""The finished parts of an answer (its patch, its decision's log fields), kept for
memoised decisions.

A memoised `AdmissionResult` answers every pod of one template, and those pods have the
same containers and kerf annotations (`AdmissionResult.template`): the patch built for
one of them, encoded, is the patch of all of them, as long as the pod's metadata and
annotations have the same shape (absent, or an object), which decides whether the
patch adds them whole. Building, encoding and reading back a patch, and bounding and
rendering the decision's log fields, cost more than the rest of a memo hit, so they are
done once per result and shape.

The log fields of the winning values (`webhook.logs.render_selected`) depend on the
workload's plan alone (`AdmissionResult.selected` is shared by every decision of a plan):
they are rendered once per plan's selection, so a fresh decision of a workload decided
before renders only its verdict.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.decide.admission import AdmissionResult
from app.model.owners import WorkloadRef
from app.store.decision_cache import MAX_CACHED_PLANS, MEMO_TOTAL
from app.store.slim import kept_annotation
from webhook.logs import render_decided, render_selected
from webhook.patch import plan_patch
from webhook.review import encode_patch

#: finished answers kept: as many as the admission memo keeps decisions, so that every
#: memo hit finds its answer
MAX_FINISHED = MEMO_TOTAL
#: rendered selections kept: one for each plan whose decision caches the view keeps
MAX_SELECTIONS = MAX_CACHED_PLANS


@dataclass(frozen=True, slots=True)
class FinishedAnswer:
    """A decision's JSON patch ready for the response and the metrics, and its log fields."""

    #: base64 of the JSON patch; "" when the patch is empty
    encoded: str
    #: operations in the patch
    ops: int
    #: (resource or `args`, how many container values the patch sets to it)
    values: tuple[tuple[str, int], ...]
    #: the decision's fields of its log line (`webhook.logs.render_decided`)
    logged: bytes


def finish(
    pod: Mapping[str, Any], result: AdmissionResult, rendered_selected: bytes | None = None
) -> FinishedAnswer:
    """Build the patch of `result` for `pod`, encode it and render the log fields
    (`rendered_selected`, when given, is `render_selected(result.selected)`)."""
    owner = result.owner
    logged = render_decided(
        owner=None
        if owner is None
        else {"kind": owner.kind, "namespace": owner.namespace, "name": owner.name},
        outcome=result.outcome,
        reason=result.reason,
        message=result.message,
        selected=result.selected,
        rendered_selected=rendered_selected,
    )
    patch = plan_patch(pod, result)
    if not patch.ops:
        return FinishedAnswer("", 0, (), logged)
    values = tuple(patch.values.items())
    return FinishedAnswer(encode_patch(patch.ops), len(patch.ops), values, logged)


def _shape(pod: Mapping[str, Any]) -> tuple[bool, bool]:
    """Whether the pod has a metadata object and an annotations object."""
    metadata = pod.get("metadata")
    if not isinstance(metadata, dict):
        return (False, False)
    return (True, isinstance(metadata.get("annotations"), dict))


@dataclass(frozen=True, slots=True)
class _Kept:
    result: AdmissionResult
    answer: FinishedAnswer


class FinishedAnswers:
    """Finished answers by (template digest, pod shape), oldest first out past `limit`;
    rendered selections by the identity of the plan's `selected`, oldest first out past
    `selections`.

    An entry holds its result and serves only that very result: a new decision for the
    template (the memo's inputs changed) is finished again. A rendered selection is kept
    by workload with its `selected`, and serves only that very tuple (a new plan of the
    workload renders its own).
    """

    def __init__(self, limit: int = MAX_FINISHED, selections: int = MAX_SELECTIONS):
        self._limit = limit
        self._selections = selections
        # Not a dict: taking a dict's first key after many deletions scans the deleted slots.
        self._kept: OrderedDict[tuple[bytes, tuple[bool, bool]], _Kept] = OrderedDict()
        #: by workload: its plan's selection (valid while it is that very tuple), rendered
        self._rendered: OrderedDict[
            WorkloadRef | None, tuple[tuple[dict[str, str], ...], bytes]
        ] = OrderedDict()

    def _rendered_selected(self, result: AdmissionResult) -> bytes:
        selected, key = result.selected, result.owner
        kept = self._rendered.get(key)
        if kept is not None and kept[0] is selected:
            self._rendered.move_to_end(key)
            return kept[1]
        rendered = render_selected(selected)
        self._rendered[key] = (selected, rendered)
        self._rendered.move_to_end(key)
        if len(self._rendered) > self._selections:
            self._rendered.popitem(last=False)
        return rendered

    def answer_for(self, pod: Mapping[str, Any], result: AdmissionResult) -> FinishedAnswer:
        """The finished answer of `result` for `pod`, kept when the result is memoised."""
        template = result.template
        if template is None:
            return finish(pod, result, self._rendered_selected(result))
        key = (template, _shape(pod))
        kept = self._kept.get(key)
        if kept is not None and kept.result is result:
            return kept.answer
        answer = finish(pod, result, self._rendered_selected(result))
        # An annotation or label the template digest does not cover would make the patch
        # depend on the pod; kerf's own annotations and KAI's fraction are covered.
        if not result.labels and all(map(kept_annotation, result.annotations)):
            self._kept[key] = _Kept(result, answer)
            self._kept.move_to_end(key)
            if len(self._kept) > self._limit:
                self._kept.popitem(last=False)
        return answer
