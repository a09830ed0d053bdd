"""Process plumbing every kerf service shares: the clock, JSON logs, the heap, health.

The lowest layer of `app`: it knows nothing of Kubernetes or of kerf's resources.
"""
