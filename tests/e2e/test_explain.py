"""`kerf explain --kubeconfig` on the selected backend (issue 36, part 4): it explains a
live workload's pods with the webhook's read-only permissions (a ServiceAccount bound as
the webhook's, whose RBAC the real API server enforces), through the same decision the
services make, and the API server's audit log of writes shows nothing from its user."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from harness.audit import read_audit
from harness.install import add_account_like, service_kubeconfig, username
from harness.services import Kerf
from tests.e2e.scenario import deployment, make_namespace, static_policy

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "kerf-explain-reader"
TARGET = {"cpu": "150m", "memory": "192Mi"}


def test_a_live_workload_is_explained_read_only(kerf: Kerf) -> None:
    ns = make_namespace(kerf, "e2e-explain")
    # Audit mode: kerf proposes and changes nothing, so the pods stay as explained.
    ns.apply(static_policy({"app": {"requests": TARGET}}, mode="audit"))
    ns.apply(deployment("web", replicas=1))
    (pod,) = ns.running("web", 1)
    add_account_like(kerf.kubectl, "webhook", ACCOUNT)
    kubeconfig = service_kubeconfig(
        kerf.backend, kerf.kubectl, ACCOUNT, kerf.workdir / f"{ACCOUNT}.kubeconfig"
    )
    done = subprocess.run(
        [sys.executable, "-m", "kerf", "explain", "--kubeconfig", str(kubeconfig)]
        + ["-n", ns.name, "deployment/web", "-o", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (decision,) = orjson.loads(done.stdout)["pods"]
    assert decision["name"] == pod["metadata"]["name"]
    assert decision["owner"] == {"kind": "Deployment", "name": "web"}
    assert (decision["outcome"], decision["reason"]) == ("skipped", "Audit")
    assert decision["proposal"]["containers"]["app"]["requests"] == TARGET
    reader = username(kerf.backend, ACCOUNT)
    assert [e.what for e in read_audit(kerf.backend.audit_log) if e.user == reader] == []
