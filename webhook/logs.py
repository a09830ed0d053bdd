"""The webhook's JSON-lines logs: kerf's and uvicorn's records (`app.runtime.jsonlog`), and one
line per admission decision.

Admission requests come from anyone who can reach the port, so what reaches a log line
from a request is bounded: identifiers (uid, namespace, pod and container names) are kept
only when they are strings and cut to `MAX_IDENTIFIER` characters, messages to
`MAX_MESSAGE`, and no request value (a quantity, an annotation) is written at all. Every
request gets exactly one line: a decision, or a refusal (400, 413, 408, 431, a client gone).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

import orjson

from app.runtime import jsonlog

LOGGER_NAME = "kerf.webhook"
#: Kubernetes names are at most 253 characters; a longer "name" is cut there.
MAX_IDENTIFIER = 253
MAX_MESSAGE = 512
#: `selected` entries written per line; a pod with more is summarised by a count.
MAX_SELECTED = 32


def identifier(value: Any) -> str | None:
    """`value` when it is a string, cut to `MAX_IDENTIFIER` characters; else None.

    Request fields can hold any JSON value (an object, a list nested a thousand deep);
    only a string is an identifier, and only its head is worth a log line.
    """
    if not isinstance(value, str):
        return None
    if len(value) <= MAX_IDENTIFIER:
        return value
    return value[:MAX_IDENTIFIER] + "…"


def bounded(message: str, limit: int = MAX_MESSAGE) -> str:
    """`message` cut to `limit` characters (an ellipsis marks the cut)."""
    return message if len(message) <= limit else message[:limit] + "…"


#: uvicorn's loggers: the webhook's server logs in the same lines as kerf.
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


def configure_logging(level: str = "info", stream: IO[str] | None = None) -> None:
    """Send kerf's and uvicorn's logs as JSON lines to `stream` (stderr by default)."""
    jsonlog.configure_logging(level, stream, loggers=("kerf", *UVICORN_LOGGERS))


def _verdict_fields(
    owner: Mapping[str, str] | None, outcome: str, reason: str | None, message: str
) -> dict[str, Any]:
    """The fields of a decision line that come from the decision's verdict, bounded (see
    the module doc)."""
    return {
        "owner": {k: identifier(v) for k, v in owner.items()} if owner else None,
        "outcome": outcome,
        "reason": reason,
        "message": bounded(message),
    }


def _selected_fields(selected: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The winning value of every target, bounded. The values come from kerf's policies,
    not from the request; container names do come from the request and are cut like
    every identifier."""
    fields: dict[str, Any] = {
        "selected": [
            {
                "container": identifier(entry.get("container")),
                "field": entry.get("field"),
                "resource": identifier(entry.get("resource")),
                "value": identifier(entry.get("value")),
                "policyKind": entry.get("policyKind"),
                "policy": identifier(_policy_name(entry)),
            }
            for entry in selected[:MAX_SELECTED]
        ],
    }
    if len(selected) > MAX_SELECTED:
        fields["selectedOmitted"] = len(selected) - MAX_SELECTED
    return fields


def render_selected(selected: Sequence[Mapping[str, Any]]) -> bytes:
    """The `selected` fields of a decision line, as the JSON members
    `render_decided` ends its object with. They depend on the workload's plan alone, so
    the webhook renders them once per plan (`webhook.finished`)."""
    return orjson.dumps(_selected_fields(selected), default=str)[1:-1]


def render_decided(
    *,
    owner: Mapping[str, str] | None,
    outcome: str,
    reason: str | None,
    message: str,
    selected: Sequence[Mapping[str, Any]] = (),
    rendered_selected: bytes | None = None,
) -> bytes:
    """The fields of a decision line that come from the decision, as the JSON object
    `DecisionLog.decision` splices into its line: rendered once, it serves every answer
    of a memoised decision. `rendered_selected`, when given, is
    `render_selected(selected)` made earlier."""
    head = orjson.dumps(_verdict_fields(owner, outcome, reason, message), default=str)
    tail = render_selected(selected) if rendered_selected is None else rendered_selected
    return head[:-1] + b"," + tail + b"}"


def _policy_name(entry: Mapping[str, Any]) -> str | None:
    name = entry.get("policyName")
    namespace = entry.get("policyNamespace")
    return f"{namespace}/{name}" if namespace and name else name


class DecisionLog:
    """Writes one JSON line per admission decision straight to a stream.

    Decisions are the webhook's hot path: going through `logging` (a LogRecord, the
    handler lock, the formatter) cost about as much as the decision itself, so the lines
    are built here directly, in the same shape `app.runtime.jsonlog` gives every other log.
    A decision is logged at info, a fail-open at warning; `level` filters as `logging` does.
    """

    def __init__(self, stream: IO[str] | None = None, level: str | int = "info"):
        self._stream = stream if stream is not None else sys.stderr
        self._level = level if isinstance(level, int) else logging.getLevelName(level.upper())

    def decision(
        self,
        *,
        uid: str,
        namespace: str | None,
        pod: str | None,
        decided: bytes,
        failed: bool = False,
        patch_ops: int = 0,
        dry_run: bool = False,
    ) -> None:
        """One line for an admission decision: the request's identifiers (bounded), the
        decision's fields (`render_decided`) and the patch. A fail-open is a warning."""
        level = logging.WARNING if failed else logging.INFO
        if level < self._level:
            return
        head = orjson.dumps(
            {
                "ts": jsonlog.log_time(time.time()),
                "level": "warning" if failed else "info",
                "logger": LOGGER_NAME,
                "msg": "admission decision",
                "uid": identifier(uid),
                "namespace": identifier(namespace),
                "pod": identifier(pod),
            }
        )
        tail = b',"patchOps":%d,"dryRun":%s}' % (patch_ops, b"true" if dry_run else b"false")
        # Both are JSON objects: the decided fields go inside the head's braces.
        self._stream.write((head[:-1] + b"," + decided[1:-1] + tail).decode() + "\n")

    def refused(self, status: int | None, reason: str, message: str) -> None:
        """One line for a request answered without a decision: `status` is the HTTP
        status sent (None when the connection was closed without an answer)."""
        fields = {"status": status, "reason": reason, "message": bounded(message)}
        self._write(logging.WARNING, "request refused", fields)

    def _write(self, level: int, msg: str, fields: Mapping[str, Any]) -> None:
        if level < self._level:
            return
        line = {
            "ts": jsonlog.log_time(time.time()),
            "level": logging.getLevelName(level).lower(),
            "logger": LOGGER_NAME,
            "msg": msg,
            **fields,
        }
        self._stream.write(orjson.dumps(line, default=str).decode() + "\n")
