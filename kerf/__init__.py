"""The `kerf` command: the composition root above the services (`webhook`, `reconciler`,
`recommender`) and the shared library `app`; nothing below imports it."""

import app  # noqa: F401  first: kubernetes_asyncio's client, loaded lazily (app/kube/lazyclient.py)
