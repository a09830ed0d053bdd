"""A real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler) on 127.0.0.1 with a node agent that plays the kubelet: `python -m devcluster`.

Development tooling only: nothing in app/, webhook/ or reconciler/ imports it.
"""
