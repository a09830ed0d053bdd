"""JSON-lines logging: one object per line, decision records merged in at the top level."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import IO, Any

import orjson

LOGGER_NAME = "kerf.webhook"
# The `extra` attribute a decision record travels in, so the formatter can tell it apart.
DECISION_ATTR = "kerf_decision"


class JsonLinesFormatter(logging.Formatter):
    """Format every record as one JSON object; decision fields are top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        decision = getattr(record, DECISION_ATTR, None)
        if isinstance(decision, Mapping):
            line.update(decision)
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
                key: entry.get(key)
                for key in ("container", "field", "resource", "value", "policyKind")
            }
            | {"policy": _policy_name(entry)}
            for entry in selected
        ],
        "patchOps": patch_ops,
        "dryRun": dry_run,
    }


def _policy_name(entry: Mapping[str, Any]) -> str | None:
    name = entry.get("policyName")
    namespace = entry.get("policyNamespace")
    return f"{namespace}/{name}" if namespace and name else name


def log_decision(logger: logging.Logger, record: Mapping[str, Any]) -> None:
    """Emit one decision record (warning level when kerf failed open)."""
    level = logging.WARNING if record.get("outcome") == "failopen" else logging.INFO
    if logger.isEnabledFor(level):
        logger.log(level, "admission decision", extra={DECISION_ATTR: record})
