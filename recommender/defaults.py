"""The recommender's defaults, with no heavy import: `kerf --help` shows them without
loading the recommender and its clients."""

from __future__ import annotations

DEFAULT_METRICS_PORT = 8082
