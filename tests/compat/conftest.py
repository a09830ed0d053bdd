"""The compatibility suite's cluster: the real control plane (kube-apiserver 1.35 built by
`make cluster-tools`, the node agent for its one node) with kerf's CRDs installed from
manifests/crds, and the namespaces Kubex's examples name. Only the tests marked e2e use it;
test_models.py needs no cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.backend import ROOT, Backend, real_available, running_backend
from harness.kubectl import Kubectl
from harness.wait import wait_until
from tests.compat.examples import EXAMPLES


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """The real control plane, for the session (skipped, naming the target, when unbuilt)."""
    if not real_available():
        pytest.skip("the real control plane is not built: run make cluster-tools")
    with running_backend("real", tmp_path_factory.mktemp("compat"), nodes=1) as backend:
        yield backend


@pytest.fixture(scope="session")
def admin(cluster: Backend) -> Kubectl:
    """kubectl as the cluster's admin, once kerf's CRDs are Established and the examples'
    namespaces exist (a dry run into a missing namespace is refused for that alone)."""
    kubectl = Kubectl(cluster.kubeconfig)
    kubectl("apply", "-k", str(ROOT / "manifests" / "crds"))

    def established() -> bool:
        crds = kubectl.json("crd", "-l", "app.kubernetes.io/part-of=kerf")["items"]
        return bool(crds) and all(
            any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in (crd.get("status") or {}).get("conditions") or ()
            )
            for crd in crds
        )

    wait_until(established, "kerf's CRDs established")
    for namespace in sorted({e.namespace for e in EXAMPLES if e.namespace} - {"default"}):
        kubectl("create", "namespace", namespace)
    return kubectl
