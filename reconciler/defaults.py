"""The reconciler's defaults, with no heavy import: `kerf --help` shows them without
loading the reconciler and its cluster client."""

from __future__ import annotations

DEFAULT_METRICS_PORT = 8080
DEFAULT_RESYNC_S = 300.0
DEFAULT_WORKERS = 4
