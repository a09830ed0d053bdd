"""kerf's data and formats, with no I/O: quantities, durations, annotations, the custom
resources' models, typed views of Kubernetes objects and recommendation rows.

Imports only `app.runtime`.
"""
