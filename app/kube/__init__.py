"""The API server's edge: one HTTP call, informers that fill the view, Leases and leader
election, reachability, and the flags that say how to reach the cluster.

Imports `app.runtime`, `app.model` and `app.store`; no decision imports it.
"""
