"""The services run on uvloop's event loop when it is installed, on asyncio's otherwise
(app/runtime/eventloop.py)."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop

from app.runtime import eventloop


async def _loop_type() -> type:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop())


def test_the_services_run_on_uvloop_when_it_is_installed() -> None:
    assert eventloop.run(_loop_type()) is uvloop.Loop


def test_without_uvloop_they_run_on_asyncios_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert eventloop.loop_factory() is None
    assert issubclass(eventloop.run(_loop_type()), asyncio.BaseEventLoop)
    assert not issubclass(eventloop.run(_loop_type()), uvloop.Loop)
