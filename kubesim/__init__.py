"""kubesim: an in-process Kubernetes API server simulator for kerf's tests and demo.

It serves the Kubernetes REST API over real HTTP so the real kubernetes-asyncio client and
the real kubectl talk to it unchanged, and it acts out the cluster behaviour kerf depends
on (controllers, scheduler, kubelet resizes, admission webhooks, PDB-aware eviction).
See docs/kubesim.md for what it serves and how it differs from a real cluster.
"""

from kubesim.sim import Simulator

__all__ = ["Simulator"]
