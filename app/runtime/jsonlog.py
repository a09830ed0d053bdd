"""JSON-lines logs of every kerf service: one object per record, `ts`, `level`, `logger`,
`msg`, the record's structured `fields` at the top level, and `exception` when it has one."""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import lru_cache
from typing import IO, Any

import orjson


def log_time(unix: float) -> str:
    """The `ts` of a line: RFC 3339 in UTC, to the millisecond, as
    `datetime.fromtimestamp(unix, UTC).isoformat(timespec="milliseconds")` spells it.

    Every decision the webhook makes is a line, and building the datetime cost more than
    the rest of the line: the second is formatted once (`_second`), the milliseconds
    rounded as `datetime` rounds (to the microsecond, half to even, then cut).
    """
    fraction, whole = math.modf(unix)
    micros = round(fraction * 1e6)
    second = int(whole)
    if micros < 0:
        second, micros = second - 1, micros + 1_000_000
    elif micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    return _second(second) + _MILLIS[micros // 1000]


#: ".000+00:00" to ".999+00:00": an index is cheaper than formatting the number
_MILLIS = tuple(f".{ms:03d}+00:00" for ms in range(1000))


@lru_cache(maxsize=4)
def _second(unix: int) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%S")


class JsonLinesFormatter(logging.Formatter):
    """Format every record as one JSON object (its `fields`, when a dict, merged in)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": log_time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def configure_logging(
    level: str = "info", stream: IO[str] | None = None, loggers: Iterable[str] = ("kerf",)
) -> None:
    """Send the named loggers' records (kerf's by default) as JSON lines to `stream`
    (stderr by default), at `level` and above, and nowhere else."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLinesFormatter())
    for name in loggers:
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False


def log_fields(
    logger: logging.Logger, msg: str, level: int = logging.INFO, /, **fields: Any
) -> None:
    """One structured line: `msg` plus `fields` at the top level of the JSON object."""
    if logger.isEnabledFor(level):
        logger.log(level, msg, extra={"fields": fields})
