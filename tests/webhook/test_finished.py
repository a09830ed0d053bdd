"""The finished patches of memoised results: one build per result and pod shape, the
same patch a fresh build gives, and never a patch of another result; the log fields of a
plan's selection rendered once."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from app.model.owners import WorkloadRef
from tests.webhook.fakes import load_example, result
from webhook.finished import FinishedAnswers, finish
from webhook.patch import build_patch
from webhook.review import decode_patch

INFO = "rightsizing.kubex.ai/pod-info"


def _pod() -> dict[str, Any]:
    return copy.deepcopy(load_example("replicaset-pod.json")["request"]["object"])


def _memoised() -> Any:
    resources = {"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}}
    return replace(
        result(resources=resources, annotations={INFO: "{}"}), template=b"digest-of-template"
    )


def _patch(encoded: str) -> list[dict[str, Any]]:
    return decode_patch({"response": {"patch": encoded}})


def test_a_memoised_result_has_its_patch_built_once_per_shape() -> None:
    patches = FinishedAnswers()
    decided = _memoised()
    first = patches.answer_for(_pod(), decided)
    again = patches.answer_for(_pod(), decided)
    assert again is first
    assert _patch(first.encoded) == build_patch(_pod(), decided)
    assert first.ops == len(build_patch(_pod(), decided))


def test_a_pod_of_another_shape_gets_its_own_patch() -> None:
    patches = FinishedAnswers()
    decided = _memoised()
    with_annotations = _pod()
    with_annotations["metadata"]["annotations"] = {"team": "shop"}
    bare = _pod()
    bare["metadata"].pop("annotations", None)
    for pod in (with_annotations, bare, with_annotations):
        assert _patch(patches.answer_for(pod, decided).encoded) == build_patch(pod, decided)


def test_a_new_decision_for_the_template_builds_its_patch_again() -> None:
    patches = FinishedAnswers()
    old = _memoised()
    patches.answer_for(_pod(), old)
    new = replace(old, resources={"app": {"requests": {"cpu": "500m"}}})
    assert _patch(patches.answer_for(_pod(), new).encoded) == build_patch(_pod(), new)


def test_a_one_off_decision_is_not_kept() -> None:
    patches = FinishedAnswers()
    decided = replace(_memoised(), template=None)
    first = patches.answer_for(_pod(), decided)
    assert patches.answer_for(_pod(), decided) is not first
    assert first == finish(_pod(), decided)


def test_the_kept_patches_are_bounded() -> None:
    patches = FinishedAnswers(limit=2)
    results = [replace(_memoised(), template=bytes([n])) for n in range(3)]
    kept = [patches.answer_for(_pod(), r) for r in results]
    assert patches.answer_for(_pod(), results[2]) is kept[2]
    assert patches.answer_for(_pod(), results[0]) is not kept[0]


def test_an_answer_writing_an_annotation_outside_kerf_is_not_kept() -> None:
    # The template digest covers kerf's annotations only: another one's current value
    # could differ between pods of one template.
    patches = FinishedAnswers()
    decided = replace(_memoised(), annotations={"example.com/owner": "kerf"})
    first = patches.answer_for(_pod(), decided)
    assert patches.answer_for(_pod(), decided) is not first
    assert _patch(first.encoded) == build_patch(_pod(), decided)


def test_a_plans_selection_is_rendered_once_for_every_decision_of_the_plan() -> None:
    patches = FinishedAnswers()
    first = _memoised()
    # Another decision of the same plan: another template, the plan's very `selected`.
    second = replace(first, message="again", template=b"digest-of-another-template")
    one_off = replace(first, message="once more", template=None)
    expected = [finish(_pod(), decided).logged for decided in (first, second, one_off)]
    answered = patches.answer_for(_pod(), first)
    # A probe (readers never change a selection): a later answer that rendered the
    # selection again would show the new value; one that reuses the first rendering
    # does not. Observed through the answers, so it holds in the compiled build too.
    first.selected[0]["value"] = "999m"
    later = [patches.answer_for(_pod(), decided) for decided in (second, one_off)]
    assert [answered.logged, *(answer.logged for answer in later)] == expected
    assert b"999m" not in b"".join(answer.logged for answer in later)


def test_an_equal_selection_of_another_plan_is_rendered_for_itself() -> None:
    patches = FinishedAnswers()
    first = _memoised()
    other = replace(
        first,
        selected=({**first.selected[0], "policyName": "other"},),
        template=b"digest-of-another-template",
    )
    assert b'"shop/other"' in patches.answer_for(_pod(), other).logged
    assert b'"shop/other"' not in patches.answer_for(_pod(), first).logged


def test_the_rendered_selections_are_bounded() -> None:
    patches = FinishedAnswers(selections=2)
    results = [
        replace(
            _memoised(),
            owner=WorkloadRef("Deployment", "shop", f"web-{n}"),
            selected=({"container": f"c{n}"},),
            template=bytes([n]),
        )
        for n in range(3)
    ]
    for decided in results:
        patches.answer_for(_pod(), decided)
    assert len(patches._rendered) == 2
    assert [kept[0] for kept in patches._rendered.values()] == [
        results[1].selected,
        results[2].selected,
    ]
