"""app/kube/reachability.py: an API server outage is said when it starts, at most once per
interval while it lasts (with a count), and when it ends; old news changes nothing."""

from __future__ import annotations

import logging

import aiohttp
import pytest

from app.kube.apitimeout import api_timeout
from app.kube.errors import ApiStatusError
from app.kube.reachability import Reachability, describe, format_seconds, is_outage

SERVER = "https://10.0.0.1:6443"
REFUSED = ConnectionRefusedError(111, "Connect call failed ('10.0.0.1', 6443)")


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Lines(logging.Handler):
    """The messages a logger emits, with their levels."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, record.getMessage()))

    def said(self, level: int = logging.INFO) -> list[str]:
        return [message for lvl, message in self.lines if lvl >= level]


@pytest.fixture
def lines() -> Lines:
    return Lines()


def tracker(clock: Clock, lines: Lines, **options: object) -> Reachability:
    log = logging.getLogger("test.reachability")
    log.handlers[:] = [lines]
    log.setLevel(logging.DEBUG)
    log.propagate = False
    return Reachability(SERVER, monotonic=clock, log=log, **options)  # type: ignore[arg-type]


def test_an_outage_is_said_once_then_once_a_minute_with_a_count_then_its_end(
    lines: Lines,
) -> None:
    clock = Clock()
    api = tracker(clock, lines)
    assert api.reachable
    # 26 informers fail together, and keep failing for two minutes and a half.
    for second in range(150):
        clock.now = 100.0 + second
        for _ in range(26):
            assert api.failed(REFUSED, clock.now)
        assert not api.reachable
    said = lines.said()
    assert len(said) == 3, said  # at 0 s, 60 s and 120 s
    assert said[0].startswith(f"the API server {SERVER} is unavailable: ConnectionRefusedError")
    assert "still unavailable after 1m0s (1561 failed attempts)" in said[1]
    assert "still unavailable after 2m0s (3121 failed attempts)" in said[2]
    # A request sent now is answered: one line, how long and how many.
    api.answered(clock.now)
    assert api.reachable
    assert lines.said()[3:] == [
        f"the API server {SERVER} answers again after 2m29s (3900 failed attempts)"
    ]


def test_old_news_changes_nothing(lines: Lines) -> None:
    clock = Clock()
    api = tracker(clock, lines)
    before = clock.now
    clock.now += 1
    api.failed(REFUSED, clock.now)
    api.failed(REFUSED, clock.now)  # the outage starts at 101
    # An answer to a request sent before it began was on its way: still down.
    api.answered(before)
    assert not api.reachable
    clock.now += 5
    api.answered(clock.now)  # a request sent after it began: the end
    assert api.reachable
    # Connects that timed out, sent before the recovery: no new outage.
    clock.now += 1
    api.failed(TimeoutError(), before)
    api.failed(TimeoutError(), before)
    assert api.reachable
    assert len(lines.said()) == 2


def test_one_failure_that_the_retry_answers_is_no_outage(lines: Lines) -> None:
    # A keep-alive connection the server closed just as it was reused.
    clock = Clock()
    api = tracker(clock, lines)
    for _ in range(3):
        assert api.failed(aiohttp.ServerDisconnectedError(), clock.now)
        clock.now += 1
        api.answered(clock.now)
    assert api.reachable and lines.said() == []
    api.failed(REFUSED, clock.now)
    api.failed(REFUSED, clock.now)
    assert not api.reachable and len(lines.said()) == 1


def test_only_outage_errors_are_its_own(lines: Lines) -> None:
    clock = Clock()
    api = tracker(clock, lines)
    for error in (
        ApiStatusError(403, "forbidden"),
        ApiStatusError(500, "x"),
        ApiStatusError(504, "Timeout: request did not complete within requested timeout"),
        ValueError("x"),
    ):
        assert not api.failed(error, clock.now)
    assert api.reachable and lines.said() == []
    for error in (
        ApiStatusError(503, "the server is shutting down"),
        ApiStatusError(502, "Bad Gateway"),
        aiohttp.ServerDisconnectedError(),
        aiohttp.ClientPayloadError("cut"),
        TimeoutError(),
        ConnectionResetError(104, "reset"),
    ):
        assert is_outage(error), error
    assert api.failed(ApiStatusError(503, "shutting down"), clock.now)
    assert api.failed(ApiStatusError(503, "shutting down"), clock.now)
    assert lines.said() == [
        f"the API server {SERVER} is unavailable: HTTP 503: shutting down; retrying "
        "(said again at most every 1m0s until it answers)"
    ]


def test_quiet_says_everything_at_debug_only(lines: Lines) -> None:
    clock = Clock()
    api = tracker(clock, lines, quiet=True)
    api.failed(REFUSED, clock.now)
    api.failed(REFUSED, clock.now)
    clock.now += 61
    api.failed(REFUSED, clock.now)
    api.answered(clock.now)
    assert lines.said() == []
    assert len(lines.said(logging.DEBUG)) == 3


def test_words() -> None:
    assert describe(TimeoutError()) == "no answer (timed out)"
    assert describe(ApiStatusError(503, "down")) == "HTTP 503: down"
    assert format_seconds(42) == "42s" and format_seconds(185) == "3m5s"
    assert format_seconds(7207) == "2h0m7s"
    assert api_timeout("2.5") == 2.5 and api_timeout("2m") == 120
    for bad in ("0", "-1", "soon", "nan", "inf"):
        with pytest.raises(Exception, match="--api-timeout"):
            api_timeout(bad)
