"""`make demo`: kerf's main job on the embedded default, with no cluster needed.

kubesim (the in-process API server), the webhook and the reconciler run in this one
process, on 127.0.0.1; the demo applies `examples/demo/storefront.yaml` and narrates what
kerf does with real objects read back from the API (and the project's kubectl for the
final tables). One process: stopping it, even with Ctrl-C, leaves nothing running.
"""
