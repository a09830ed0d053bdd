"""The finished patch of an answer, kept for memoised decisions.

A memoised `AdmissionResult` answers every pod of one template, and those pods have the
same containers and kerf annotations (`AdmissionResult.template`): the patch built for
one of them, encoded, is the patch of all of them, as long as the pod's metadata and
annotations have the same shape (absent, or an object), which decides whether the
patch adds them whole. Building, encoding and reading back a patch cost more than the
rest of a memo hit, so it is done once per result and shape.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.slim import kept_annotation
from webhook.patch import build_patch, patched_resources
from webhook.review import encode_patch

if TYPE_CHECKING:
    from app.admission import AdmissionResult

#: finished patches kept: as many as the admission memo keeps decisions
#: (`app.decision_cache.MEMO_TOTAL`), so that every memo hit finds its patch
MAX_FINISHED = 4096


@dataclass(frozen=True, slots=True)
class FinishedPatch:
    """A JSON patch ready for the response and the metrics."""

    #: base64 of the JSON patch; "" when the patch is empty
    encoded: str
    #: operations in the patch
    ops: int
    #: (resource or `args`, how many container values the patch sets to it)
    values: tuple[tuple[str, int], ...]


NO_PATCH = FinishedPatch("", 0, ())


def finish(pod: Mapping[str, Any], result: AdmissionResult) -> FinishedPatch:
    """Build the patch of `result` for `pod` and encode it."""
    ops = build_patch(pod, result)
    if not ops:
        return NO_PATCH
    return FinishedPatch(
        encode_patch(ops), len(ops), tuple(Counter(patched_resources(ops)).items())
    )


def _shape(pod: Mapping[str, Any]) -> tuple[bool, bool]:
    """Whether the pod has a metadata object and an annotations object."""
    metadata = pod.get("metadata")
    if not isinstance(metadata, dict):
        return (False, False)
    return (True, isinstance(metadata.get("annotations"), dict))


@dataclass(frozen=True, slots=True)
class _Kept:
    result: AdmissionResult
    patch: FinishedPatch


class FinishedPatches:
    """Finished patches by (template digest, pod shape), oldest first out past `limit`.

    An entry holds its result and serves only that very result: a new decision for the
    template (the memo's inputs changed) builds its patch again.
    """

    def __init__(self, limit: int = MAX_FINISHED):
        self._limit = limit
        self._kept: dict[tuple[bytes, tuple[bool, bool]], _Kept] = {}

    def patch_for(self, pod: Mapping[str, Any], result: AdmissionResult) -> FinishedPatch:
        """The finished patch of `result` for `pod`, kept when the result is memoised."""
        template = result.template
        if template is None:
            return finish(pod, result)
        key = (template, _shape(pod))
        kept = self._kept.get(key)
        if kept is not None and kept.result is result:
            return kept.patch
        patch = finish(pod, result)
        # An annotation the template digest does not cover would make the patch depend on
        # the pod; kerf writes only its own, which the digest covers.
        if all(map(kept_annotation, result.annotations)):
            self._kept.pop(key, None)
            self._kept[key] = _Kept(result, patch)
            if len(self._kept) > self._limit:
                del self._kept[next(iter(self._kept))]
        return patch
