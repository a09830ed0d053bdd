"""kerf's reconciler: publishes policy values on workloads, resizes running pods in place
(evicting only as a fallback), writes status and events, one leader at a time (SPEC §7).

It makes no decision of its own: `app.decide` decides, the reconciler feeds the view,
executes plans and reports.
"""

import app  # noqa: F401  first: kubernetes_asyncio's client, loaded lazily (app/kube/lazyclient.py)
