"""`app.runtime.heap`: what freezing the loaded state changes, and the invariant that makes rarer
full collections safe — the decision caches hold no reference cycles, so reference
counting alone frees whatever they drop."""

from __future__ import annotations

import argparse
import gc
from collections.abc import Iterator

import orjson
import pytest

from app.decide.admission import admit_pod
from app.runtime.heap import FULL_COLLECTION_EVERY, freeze_for_service, freeze_loaded_state
from benchmarks.explain import NOW
from benchmarks.webhook import build_bodies, build_view
from webhook.finished import FinishedAnswers


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector's state put back after the test (it is the whole process's)."""
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    gc.enable()


@pytest.mark.usefixtures("collector")
def test_the_services_freeze_makes_full_collections_rarer() -> None:
    before = gc.get_threshold()
    freeze_loaded_state()
    assert gc.get_threshold() == before  # the freeze alone keeps CPython's thresholds
    young, middle, _ = before
    freeze_for_service()
    assert gc.get_threshold() == (young, middle, FULL_COLLECTION_EVERY)
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("collector")
def test_dropped_decision_caches_leave_no_cycles_behind() -> None:
    size = argparse.Namespace(workloads=400, policies=40, namespaces=10, nodes=5)
    view, deployments = build_view(size)
    pods = [orjson.loads(body)["request"]["object"] for body in build_bodies(deployments, 300)]
    freeze_loaded_state()
    gc.collect()
    gc.disable()
    answers = FinishedAnswers()
    for pod in pods:
        for _ in range(3):  # two fresh decisions (the second memoised), then a memo hit
            answers.answer_for(pod, admit_pod(view, pod, pod["metadata"]["namespace"], NOW))
    cached = len(gc.get_objects())
    assert view.caches.memo_hits == len(pods) and view.caches.memo_misses == 2 * len(pods)

    view.caches.drop_plans()
    view.caches.drop_settings()
    del answers
    left = len(gc.get_objects())
    assert left < cached // 10, (cached, left)  # what the caches held is gone already
    assert gc.collect() == 0  # and none of it waited for the collector
