"""What an operator sees and does in audit mode, on the selected backend (kubesim in `make
test`, the real API server in `make e2e`, whose table conversion prints the columns):
`kubectl get rsrec` with the values current → target, `kerf approve` of one step,
`kerf status`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.services import KERF
from harness.wait import wait_until
from tests.cluster import table_cells
from tests.e2e.scenario import Namespace, container, deployment, requests, static_policy

ROOT = Path(__file__).resolve().parents[2]


def table(ns: Namespace, *extra: str) -> list[dict[str, str]]:
    """`kubectl get rsrec` in the test's namespace: a dict per row, column → cell."""
    return table_cells(str(ns.kerf.kubectl("get", "rsrec", "-n", ns.name, *extra)))


def kerf(ns: Namespace, *argv: str) -> subprocess.CompletedProcess[str]:
    """The kerf CLI as a user runs it, with the cluster admin's kubeconfig."""
    config = str(ns.kerf.kubectl.kubeconfig)
    return subprocess.run(
        [KERF, *argv, "--kubeconfig", config],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )


def test_kubectl_get_shows_the_values_and_kerf_approve_applies_one_step(
    ns: Namespace,
) -> None:
    ns.apply(deployment(replicas=1, containers=[container("app", cpu="400m", memory="256Mi")]))
    ns.running("web", 1)
    # 400m to 80m at the default 50 %: 200m, 100m, 80m.
    ns.apply(static_policy({"app": {"requests": {"cpu": "80m"}}}, mode="audit"))
    wait_until(lambda: ns.status().get("phase") == "Proposed", "an audited proposal")
    assert ns.status()["proposal"]["steps"] == 3
    (row,) = table(ns)
    assert list(row) == ["NAME", "CPU", "MEMORY", "PHASE", "REASON", "AGE"]
    assert list(row.values())[:5] == ["deployment-web", "400m→80m", "256Mi", "Proposed", "Audit"]
    (wide,) = table(ns, "-o", "wide")
    assert list(wide)[5:] == ["CPU-LIMIT", "MEMORY-LIMIT", "POLICY", "NEXT", "AGE"]
    # No limits, no time: empty cells, as the API server sends a field the object lacks.
    assert list(wide.values())[5:9] == ["", "", "StaticPolicy/web", ""]

    done = kerf(ns, "approve", "deployment/web", "-n", ns.name)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("approved proposal ")
    assert "app cpu 400m→200m" in done.stdout

    def stepped() -> bool:
        pods = ns.pods("web")
        return bool(pods) and all(requests(p)["cpu"] == "200m" for p in pods)

    wait_until(stepped, "the approved step applied")
    wait_until(
        lambda: list(table(ns)[0].values())[1:5] == ["200m→80m", "256Mi", "Applied", "Audit"],
        "the next step proposed beside the applied values",
    )
    shown = kerf(ns, "status", "-n", ns.name)
    assert shown.returncode == 0, shown.stderr
    line = shown.stdout.splitlines()[1]
    assert line.split()[:4] == [ns.name, "deployment/web", "Applied", "Audit"]
    assert "app cpu 200m→80m memory 256Mi" in line
    assert f"approve: kerf approve deployment/web -n {ns.name}" in line
