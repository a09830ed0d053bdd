"""Per-workload policy decisions over the view: which policies apply and their values,
guardrails, schedules, rollback state and what a pod's status says.

Imports `app.runtime`, `app.model` and `app.store`, never the API edge (`app.kube`).
"""
