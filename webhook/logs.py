"""JSON-lines logging: one object per line, for kerf's logs and for each admission decision."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import IO, Any

import orjson

LOGGER_NAME = "kerf.webhook"


class JsonLinesFormatter(logging.Formatter):
    """Format every record as one JSON object."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def configure_logging(level: str = "info", stream: IO[str] | None = None) -> None:
    """Send kerf's and uvicorn's logs as JSON lines to `stream` (stderr by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLinesFormatter())
    for name in ("kerf", "uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False


def decision_record(
    *,
    uid: str,
    namespace: str | None,
    pod: str | None,
    owner: Mapping[str, str] | None,
    outcome: str,
    reason: str | None,
    message: str,
    selected: Sequence[Mapping[str, Any]] = (),
    patch_ops: int = 0,
    dry_run: bool = False,
) -> dict[str, Any]:
    """The structured fields of one admission decision."""
    return {
        "uid": uid,
        "namespace": namespace,
        "pod": pod,
        "owner": dict(owner) if owner else None,
        "outcome": outcome,
        "reason": reason,
        "message": message,
        "selected": [
            {
                "container": entry.get("container"),
                "field": entry.get("field"),
                "resource": entry.get("resource"),
                "value": entry.get("value"),
                "policyKind": entry.get("policyKind"),
                "policy": _policy_name(entry),
            }
            for entry in selected
        ],
        "patchOps": patch_ops,
        "dryRun": dry_run,
    }


def _policy_name(entry: Mapping[str, Any]) -> str | None:
    name = entry.get("policyName")
    namespace = entry.get("policyNamespace")
    return f"{namespace}/{name}" if namespace and name else name


class DecisionLog:
    """Writes one JSON line per admission decision straight to a stream.

    Decisions are the webhook's hot path: going through `logging` (a LogRecord, the
    handler lock, the formatter) cost about as much as the decision itself, so the lines
    are built here directly, in the same shape `JsonLinesFormatter` gives every other log.
    A decision is logged at info, a fail-open at warning; `level` filters as `logging` does.
    """

    def __init__(self, stream: IO[str] | None = None, level: str | int = "info"):
        self._stream = stream if stream is not None else sys.stderr
        self._level = level if isinstance(level, int) else logging.getLevelName(level.upper())

    def emit(self, record: Mapping[str, Any]) -> None:
        """Write `record` as one line, when its level passes the filter."""
        failed = record.get("outcome") == "failopen"
        level = logging.WARNING if failed else logging.INFO
        if level < self._level:
            return
        line = {
            "ts": datetime.fromtimestamp(time.time(), UTC).isoformat(timespec="milliseconds"),
            "level": "warning" if failed else "info",
            "logger": LOGGER_NAME,
            "msg": "admission decision",
            **record,
        }
        self._stream.write(orjson.dumps(line, default=str).decode() + "\n")
