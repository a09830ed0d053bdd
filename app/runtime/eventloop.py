"""The event loop the long-running services run on: uvloop's when it is installed
(`uvicorn[standard]`, a dependency, brings it; the webhook runs on it through uvicorn),
asyncio's own otherwise. The reconciler's passes are mostly HTTP round trips and watch
events, where the loop's own work is a tenth of its CPU on asyncio's loop
(docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None (asyncio's default) when uvloop is not installed."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """`asyncio.run(main)` on the services' event loop."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
