"""The webhook bench's reading of the server's own figures (no load is run here)."""

from __future__ import annotations

from benchmarks.webhook import loop_lag_in, server_side


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
