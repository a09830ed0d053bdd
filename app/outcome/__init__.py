"""What the pod decisions come to: a reconciler pass's actions on running pods, `kerf
explain`'s JSON and the savings report.

The top layer of `app`: built on `app.decide`, imported by no other layer.
"""
