"""JSON-lines logs of the reconciler: every record one object, decisions and actions with
their structured fields (workload, pod, reason, values) under `fields`."""

from __future__ import annotations

import logging
import sys
from typing import IO, Any

import orjson

from webhook.logs import JsonLinesFormatter

LOGGER_NAME = "kerf.reconciler"


class FieldsFormatter(JsonLinesFormatter):
    """The webhook's JSON lines, plus the `fields` a record carries."""

    def format(self, record: logging.LogRecord) -> str:
        line = orjson.loads(super().format(record))
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        return orjson.dumps(line, default=str).decode()


def configure_logging(level: str = "info", stream: IO[str] | None = None) -> None:
    """Send kerf's logs as JSON lines to `stream` (stderr by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(FieldsFormatter())
    logger = logging.getLogger("kerf")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False


def log_fields(
    logger: logging.Logger, msg: str, level: int = logging.INFO, /, **fields: Any
) -> None:
    """One structured line: `msg` plus `fields` at the top level of the JSON object."""
    if logger.isEnabledFor(level):
        logger.log(level, msg, extra={"fields": fields})
