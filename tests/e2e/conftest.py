"""The end-to-end fixture: one backend (`KERF_E2E_BACKEND`, see backends.py) with kerf
installed and running, shared by the package's tests; each test gets a namespace of its own
(the table of the scenarios' results is tests/conftest.py's).

On `real` the backend has a real kubelet where one can run here: only one may run on a
machine at a time, so the cluster is the package's, stopped before the next package's
tests (tests/devcluster starts real nodes of its own), and tests/e2e/test_real_node.py
shares it. The namespaces a test created are deleted after it, on every backend: earlier
tests' pods would take the room the next test's resizes need (a real node is one of
1800m)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from harness.services import Kerf, running_kerf
from tests.e2e.backends import KERF_PODS, selected_backend
from tests.e2e.scenario import Namespace, delete_namespace, make_namespace

_COUNTER = itertools.count(1)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that start a real node of their own (`KERF_PODS`) run before the package's
    shared cluster starts, whatever tests/conftest.py put first: one real node per machine."""
    items.sort(key=lambda item: not any(name in item.nodeid for name in KERF_PODS))


@pytest.fixture(scope="package")
def shared_kerf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kerf]:
    """kerf on the selected backend (a real kubelet where one can run), for the package."""
    with (
        selected_backend(tmp_path_factory, "e2e", real_kubelet=True) as cluster,
        running_kerf(cluster, cluster.kubeconfig.parent) as running,
    ):
        yield running


@pytest.fixture(scope="package")
def kerf(shared_kerf: Kerf) -> Kerf:
    """kerf on the selected backend."""
    return shared_kerf


@pytest.fixture(autouse=True)
def _room_for_the_next_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """The namespaces a test created are deleted after it, with their pods, which hold the
    room of the nodes the next tests resize on."""
    if "kerf" not in request.fixturenames:
        yield
        return
    running: Kerf = request.getfixturevalue("kerf")
    before = _namespaces(running)
    yield
    for name in sorted(_namespaces(running) - before):
        delete_namespace(running, name)


def _namespaces(running: Kerf) -> set[str]:
    return {n["metadata"]["name"] for n in running.kubectl.json("namespaces")["items"]}


@pytest.fixture
def ns(kerf: Kerf) -> Namespace:
    """A fresh namespace with the AutomationStrategy `default` (in place and eviction)."""
    return make_namespace(kerf, f"e2e-{next(_COUNTER)}")
