"""The webhook bench's reading of the server's own figures (no load is run here)."""

from __future__ import annotations

from typing import Any

from benchmarks.webhook import BASELINES, loop_lag_in, ratio_lines, server_side, summarize


def test_server_side_splits_memo_and_latency_off_the_outcomes() -> None:
    delta = {
        "apply": 100,
        "memo/hit": 99,
        "memo/miss": 1,
        "server_le/0.0005": 40,
        "server_le/0.001": 98,
        "server_le/0.002": 99,
        "server_le/0.005": 100,
        "server_le/+Inf": 100,
    }
    figures = server_side(delta)
    assert figures["server_outcomes"] == {"apply": 100}
    assert figures["memo"] == {"hit": 99, "miss": 1}
    assert (figures["server_p50_ms_at_most"], figures["server_p99_ms_at_most"]) == (1.0, 2.0)


def test_server_side_without_latency_samples() -> None:
    figures = server_side({"ignored": 3})
    assert figures["server_p99_ms_at_most"] is None and figures["memo"] == {}


def test_loop_lag_is_told_per_phase() -> None:
    # (wall-clock time, ms late, ms of CPU the process used meanwhile)
    late = [(10.0, 1.5, 6.0), (11.0, 3.0, 0.5), (11.5, 4.0, 8.0), (20.0, 9.0, 1.0)]
    assert loop_lag_in(late, [9.5, 12.0]) == {
        "over_1ms": 3,
        "over_2ms": 2,
        "over_2ms_not_running": 1,
        "max_ms": 4.0,
    }
    assert loop_lag_in(late, [30.0, 40.0])["over_1ms"] == 0


def _phase(rps: float, p99_ms: float, cpu_us: float) -> dict[str, Any]:
    return {
        "rps": rps,
        "p50_ms": p99_ms / 4,
        "p99_ms": p99_ms,
        "server_cpu_us_per_request": cpu_us,
        "with_patch": 1,
        "requests": 10,
        "statuses": {"200": 10},
        "memo": {"miss": 10},
        "server_outcomes": {"apply": 10},
    }


def _figures(fastapi_noop_rps: float) -> dict[str, Any]:
    phases = {
        "mutate_max": _phase(600.0, 0.0, 160.0),
        "mutate_miss_max": _phase(400.0, 0.0, 240.0),
        "fastapi_noop_max": _phase(fastapi_noop_rps, 0.0, 120.0),
        "noop_max": _phase(1200.0, 0.0, 80.0),
        "mutate_rate": _phase(500.0, 3.0, 0.0),
        "fastapi_noop_rate": _phase(500.0, 2.0, 0.0),
        "noop_rate": _phase(500.0, 1.0, 0.0),
    }
    return {"phases": phases, "rounds": [phases], "check": {"bodies_with_patch": 1}}


def test_the_targets_are_judged_against_the_fastapi_noop_and_both_ratios_are_kept() -> None:
    summary = summarize(_figures(fastapi_noop_rps=800.0))
    assert summary["targets"]["against"] == BASELINES["fastapi_noop"][0] == "/fastapi-noop"
    assert summary["ratios"]["fastapi_noop"] == {
        "hits": 0.75,
        "fresh": 0.5,
        "p99": 1.5,
        "cpu_hits": 0.75,
        "cpu_fresh": 0.5,
    }
    assert summary["ratios"]["noop"] == {
        "hits": 0.5,
        "fresh": 0.333,
        "p99": 3.0,
        "cpu_hits": 0.5,
        "cpu_fresh": 0.333,
    }
    assert summary["met"] == {"hits": True, "fresh": True, "p99": True}
    assert summary["warnings"] == []


def test_a_target_missed_against_the_fastapi_noop_is_not_met() -> None:
    summary = summarize(_figures(fastapi_noop_rps=1000.0))
    assert summary["ratios"]["fastapi_noop"]["hits"] == 0.6
    assert summary["met"] == {"hits": True, "fresh": False, "p99": True}
    lines = list(ratio_lines(summary, bodies=6000, rate=500))
    assert lines[-1].startswith("targets: memo hits >= 0.60: met (0.60); ")
    assert "fresh decisions >= 0.45: NOT met (0.40" in lines[-1]


def test_a_floor_slower_than_the_fastapi_noop_marks_the_run_disturbed() -> None:
    figures = _figures(fastapi_noop_rps=800.0)
    figures["phases"]["noop_max"]["rps"] = 700.0
    assert summarize(figures)["warnings"] == [
        "/noop was slower than /fastapi-noop: the run was disturbed"
    ]
