"""The API server's error answers as one exception type, for every caller of the API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson


class ApiStatusError(Exception):
    """The API server answered with an error Status (HTTP status or a watch ERROR event)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def status_error(code: int, body: bytes | Mapping[str, Any]) -> ApiStatusError:
    """The error a Status body (or a non-JSON body) stands for; the body's `code` wins."""
    status: Any = body
    if isinstance(body, bytes):
        try:
            status = orjson.loads(body)
        except orjson.JSONDecodeError:
            status = {"message": body[:200].decode("utf-8", "replace")}
    message = status.get("message", "") if isinstance(status, Mapping) else ""
    if isinstance(status, Mapping) and isinstance(status.get("code"), int):
        code = status["code"]
    return ApiStatusError(code, str(message))
