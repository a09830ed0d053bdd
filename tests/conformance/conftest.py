"""The conformance suite's backend: kubesim in `make test`, the real control plane in
`make e2e` (`KERF_E2E_BACKEND`). Every test here passes on both: each one pins a behaviour
of the real API server that kerf relies on and kubesim reproduces."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from harness.backend import ROOT, Backend
from harness.kubectl import Kubectl
from harness.wait import wait_until
from tests.e2e.backends import selected_backend

_NAMES = itertools.count(1)


@pytest.fixture(scope="session")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """The selected backend, for the session."""
    with selected_backend(tmp_path_factory, "conformance") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kerf_crds(backend: Backend) -> None:
    """kerf's CRDs, installed from manifests/crds/ and Established."""
    admin = Kubectl(backend.kubeconfig)
    admin("apply", "-k", str(ROOT / "manifests" / "crds"))

    def established() -> bool:
        listed = admin.json("crd", "-l", "app.kubernetes.io/part-of=kerf")["items"]
        return bool(listed) and all(
            any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in (crd.get("status") or {}).get("conditions") or ()
            )
            for crd in listed
        )

    wait_until(established, "kerf's CRDs established")


@pytest.fixture
def kubectl(backend: Backend) -> Kubectl:
    """kubectl as the cluster's admin, in a fresh namespace (`kubectl.namespace`)."""
    admin = Kubectl(backend.kubeconfig)
    name = f"conformance-{next(_NAMES)}"
    admin("create", "namespace", name)
    return NamespacedKubectl(backend.kubeconfig, name)


class NamespacedKubectl(Kubectl):
    """kubectl with `-n NAMESPACE` on every call."""

    def __init__(self, kubeconfig: object, namespace: str) -> None:
        super().__init__(kubeconfig)  # type: ignore[arg-type]
        self.namespace = namespace

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        return super().__call__("-n", self.namespace, *args, stdin=stdin, check=check)


def kerf_object(kind: str, name: str, spec: dict[str, Any]) -> str:
    """A kerf custom resource of `kind` as JSON, for `kubectl create -f -`."""
    return json.dumps(
        {
            "apiVersion": "rightsizing.kubex.ai/v1alpha1",
            "kind": kind,
            "metadata": {"name": name},
            "spec": spec,
        }
    )
