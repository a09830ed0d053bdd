"""kerf's admission webhook."""

import app  # noqa: F401  first: kubernetes_asyncio's client, loaded lazily (app/kube/lazyclient.py)
