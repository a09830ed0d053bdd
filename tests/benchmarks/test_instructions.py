"""The instruction-count bench: each load measures what it claims, and the counts are
read from callgrind's report (valgrind itself is not run here)."""

from __future__ import annotations

import argparse

import orjson

from benchmarks.instructions import (
    LOADS,
    fresh_variant,
    inclusive_counts,
    problems,
    run_loads,
    summarize,
)
from benchmarks.webhook import TEMPLATE

ANNOTATED = """\
--------------------------------------------------------------------------------
Ir                       file:function
--------------------------------------------------------------------------------
3,000,000,000 (100.0%)  PROGRAM TOTALS
1,080,771,000 (61.17%)  /src/Modules/_collectionsmodule.c:deque_extend [/lib/libpython3.11.so]
  440,121,000 (24.91%)  /src/Modules/_collectionsmodule.c:deque_extendleft [/lib/libpython3.11.so]
      900,000 ( 0.05%)  /src/Modules/_collectionsmodule.c:deque_extend'2 [/lib/libpython3.11.so]
  246,064,000 (13.93%)  /src/Objects/bytearrayobject.c:bytearray_extend [/lib/libpython3.11.so]
  370,500,000 (12.35%)  /src/Modules/arraymodule.c:array_array_extend [/lib/libpython3.11.so]
  100,000,000 ( 5.00%)  /src/Python/ceval.c:_PyEval_EvalFrameDefault [/lib/libpython3.11.so]
"""


def test_the_inclusive_count_of_each_load_function_is_read_from_the_report() -> None:
    assert inclusive_counts(ANNOTATED, LOADS.values()) == {
        "deque_extend": 1_080_771_000,
        "deque_extendleft": 440_121_000,
        "bytearray_extend": 246_064_000,
        "array_array_extend": 370_500_000,
    }
    assert inclusive_counts("nothing here", ["deque_extend"]) == {"deque_extend": 0}


def test_the_figures_are_per_answer_and_above_each_noop() -> None:
    checks = {name: {"answers": 1000} for name in LOADS}
    figures = summarize(inclusive_counts(ANNOTATED, LOADS.values()), checks)
    assert figures["instructions_per_answer"] == {
        "noop": 246_064,
        "fastapi_noop": 370_500,
        "hits": 440_121,
        "fresh": 1_080_771,
    }
    assert figures["above_noop"] == {"hits": 194_057, "fresh": 834_707}
    assert figures["noop_over_mutate"] == {"hits": 0.559, "fresh": 0.228}
    assert figures["above_fastapi_noop"] == {"hits": 69_621, "fresh": 710_271}
    assert figures["fastapi_noop_over_mutate"] == {"hits": 0.842, "fresh": 0.343}


def test_a_fresh_variant_is_the_same_pod_with_one_more_environment_variable() -> None:
    body = TEMPLATE.read_bytes()
    original, variant = orjson.loads(body), orjson.loads(fresh_variant(body))
    added = variant["request"]["object"]["spec"]["containers"][0].pop("env")
    first = original["request"]["object"]["spec"]["containers"][0]
    assert added == [*first.pop("env", []), {"name": "KERF_BENCH", "value": "1"}]
    assert variant == original


def test_each_load_answers_as_it_claims() -> None:
    size = argparse.Namespace(workloads=200, policies=10, namespaces=4, nodes=4, answers=40)
    checks = run_loads(size)
    assert problems(checks) == []
    assert checks["fresh"] == {"answers": 40, "with_patch": 40, "memo_hits": 0, "memo_misses": 40}
    assert checks["hits"]["memo_hits"] == 40
    assert checks["noop"]["with_patch"] == 0
    assert checks["fastapi_noop"] == {
        "answers": 40,
        "with_patch": 0,
        "memo_hits": 0,
        "memo_misses": 0,
    }


def test_a_load_that_measures_something_else_is_told() -> None:
    checks = {
        "noop": {"answers": 10, "with_patch": 0, "memo_hits": 0, "memo_misses": 0},
        "fastapi_noop": {"answers": 10, "with_patch": 0, "memo_hits": 0, "memo_misses": 1},
        "hits": {"answers": 10, "with_patch": 10, "memo_hits": 9, "memo_misses": 1},
        "fresh": {"answers": 10, "with_patch": 4, "memo_hits": 6, "memo_misses": 4},
    }
    assert problems(checks) == [
        "fresh: 4 of 10 answers patched",
        "hits: 9 memo hits",
        "fresh: 4 memo misses",
        "fastapi_noop: decided or patched, not a no-op",
    ]
