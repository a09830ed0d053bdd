"""The backend the end-to-end and conformance suites run on: `KERF_E2E_BACKEND` picks one
of `harness.backend`'s two (`kubesim` by default, `real` in `make e2e`); what differs
between them is said there and in `docs/devcluster.md`.

On `real`, the end-to-end scenarios run on a real kubelet (`devcluster --kubelet real`:
containerd, kerf-load containers, real cgroups and OOM kills) wherever one can run here
(`harness.backend.real_node_missing`), else on the node agent, saying why; the conformance
suite, which checks the API server, keeps the node agent."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.kerfimage import TARBALL
from devcluster.processes import images_dir
from harness.backend import BACKENDS, Backend, real_available, real_node_missing, running_backend

#: The real node's allocatable: one node, within a 2-core machine (less the kubelet's
#: reserve), room for a scenario's pods and their resizes (kerf keeps 10 % of it free).
REAL_NODE_CPU = "1800m"
REAL_NODE_MEMORY = "6Gi"
#: The tests that start a cluster of their own with the node agent (its own Prometheus
#: scrapes the agent's played usage).
OWN_AGENT_CLUSTER = ("test_helm.py::test_the_chart_s_recommender",)
#: ... and those whose own cluster has a real node where kerf's image can run there
#: (`kerf_pods_backend`).
KERF_PODS = ("test_install_guide.py", "test_helm.py::test_the_guide_s_helm_path")
KERF_TAR = images_dir() / TARBALL


def selected() -> str:
    """The backend `KERF_E2E_BACKEND` names (kubesim when unset)."""
    backend = os.environ.get("KERF_E2E_BACKEND", "kubesim")
    if backend not in BACKENDS:
        raise ValueError(f"KERF_E2E_BACKEND={backend!r}: one of {', '.join(BACKENDS)}")
    return backend


def e2e_kubelet() -> str:
    """Who runs the shared end-to-end cluster's pods: "kubesim", or on the real control
    plane "real" (a real kubelet) where one can run here, else "agent";
    `KERF_E2E_KUBELET=agent` keeps the node agent."""
    kind = selected()
    if kind == "kubesim":
        return "kubesim"
    if os.environ.get("KERF_E2E_KUBELET") == "agent":
        return "agent"
    return "agent" if real_node_missing() else "real"


def kerf_pods_run_here() -> str:
    """Why kerf's own pods cannot run on a real node here ('' when they can)."""
    if e2e_kubelet() != "real":
        return "no real node here (the node agent runs no containers)"
    if not KERF_TAR.is_file():
        return f"{KERF_TAR} is not built (make kerf-image)"
    return ""


def kerf_pods_backend(workdir: Path) -> contextlib.AbstractContextManager[Backend]:
    """A cluster of its own for a test that installs kerf: a real node with the kerf image
    where kerf's pods can run here, else two nodes of the node agent (saying why), where
    the test plays kerf's pods or only sees them scheduled."""
    why = kerf_pods_run_here()
    if why:
        print(f"\ne2e: kerf's own pods do not run: {why}")
        return running_backend("real", workdir, nodes=2, cpu="8", memory="16Gi")
    return running_backend(
        "real",
        workdir,
        nodes=1,
        cpu=REAL_NODE_CPU,
        memory=REAL_NODE_MEMORY,
        kubelet="real",
        images=(KERF_TAR,),
    )


def scenario_backend(nodeid: str) -> str:
    """The backend an end-to-end test ran on, for the table of results: `kubesim`, `agent`
    (the real control plane, pods played by the node agent) or `kubelet` (a real one)."""
    if "test_real_node.py" in nodeid:
        return "kubelet"  # a real kubelet, shared or of its own, whatever the selection
    if selected() == "real" and any(name in nodeid for name in KERF_PODS):
        return "agent" if kerf_pods_run_here() else "kubelet"
    if selected() == "real" and any(name in nodeid for name in OWN_AGENT_CLUSTER):
        return "agent"
    kubelet = e2e_kubelet()
    return "kubelet" if kubelet == "real" else kubelet


@contextlib.contextmanager
def selected_backend(
    tmp_path_factory: pytest.TempPathFactory, purpose: str, *, real_kubelet: bool = False
) -> Iterator[Backend]:
    """The backend `KERF_E2E_BACKEND` selects, for a session fixture: skipped, naming
    `make cluster-tools`, when the real one is selected but not built. With
    `real_kubelet`, the real control plane gets a real kubelet (one node) where one can
    run here; otherwise, and without it, the node agent."""
    kind = selected()
    if kind == "real" and not real_available():
        pytest.skip("the real control plane is not built: run make cluster-tools")
    workdir = tmp_path_factory.mktemp(f"{purpose}-{kind}")
    if kind == "real" and real_kubelet and e2e_kubelet() == "real":
        with running_backend(
            kind, workdir, nodes=1, cpu=REAL_NODE_CPU, memory=REAL_NODE_MEMORY, kubelet="real"
        ) as cluster:
            yield cluster
        return
    if kind == "real" and real_kubelet:
        why = real_node_missing() or "KERF_E2E_KUBELET=agent"
        print(f"\ne2e: the node agent plays the kubelet: {why}")
    with running_backend(kind, workdir) as cluster:
        yield cluster
