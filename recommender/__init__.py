"""`kerf recommend`: kerf's own recommendation source, computed from Prometheus history."""

import app  # noqa: F401  first: kubernetes_asyncio's client, loaded lazily (app/kube/lazyclient.py)
