"""JSON-lines logs of the recommender: every record one object, with its `fields` at the top
level (the same shape as the other services' lines)."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import IO, Any

import orjson

LOGGER_NAME = "kerf.recommender"


class JsonLines(logging.Formatter):
    """`{"ts", "level", "logger", "msg", ...fields}` per record."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
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


def configure_logging(level: str = "info", stream: IO[str] | None = None) -> None:
    """Send the recommender's logs as JSON lines to `stream` (stderr by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLines())
    logger = logging.getLogger(LOGGER_NAME)
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False
