"""The webhook's defaults and connection limits, with no heavy import: `kerf --help`
shows them without loading the server, uvicorn or the certificate code."""

from __future__ import annotations

from dataclasses import dataclass

from webhook.limits import DEFAULT_READ_TIMEOUT_S, MAX_BODY_VALUES

DEFAULT_SERVICE = "kerf-webhook"
DEFAULT_NAMESPACE = "kerf-system"
DEFAULT_HOST = "0.0.0.0"
DEFAULT_PORT = 8443
DEFAULT_RELOAD_INTERVAL_S = 10.0


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What one connection, and all of them together, may hold."""

    max_connections: int = 1000
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    #: request line plus headers; the API server sends well under 4 KiB
    max_header_bytes: int = 32 * 1024
    max_headers: int = 100
    #: JSON values in one request body (checked by the app: `webhook.limits`)
    max_body_values: int = MAX_BODY_VALUES
