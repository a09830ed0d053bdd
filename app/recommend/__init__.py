"""The rules of kerf's own recommender: Prometheus's answers and the view in, recommendation
rows out; and the GpuReactivePolicy evaluation.

Imports the layers below it; only `app.decide` sits above.
"""
