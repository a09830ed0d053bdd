"""The audit log of writes (`Backend.audit_log`): kube-apiserver's log backend with the
dev cluster's policy (writes at level Metadata, one line each at ResponseComplete), and
kubesim's twin of it. The SIGSTOP fail-over test counts each replica's writes from it."""

from __future__ import annotations

import json
import uuid

from harness.audit import AuditEntry, read_audit
from harness.backend import Backend
from harness.install import NAMESPACE
from harness.kubectl import Kubectl
from harness.wait import wait_until
from tests.conformance.conftest import NamespacedKubectl

CONFIGMAP = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "audited"}}'


def _entries(backend: Backend, namespace: str) -> list[AuditEntry]:
    return [e for e in read_audit(backend.audit_log) if e.namespace == namespace]


def test_each_write_is_logged_once_with_its_user_and_code_and_no_read_is(
    backend: Backend, kubectl: NamespacedKubectl
) -> None:
    kubectl("create", "-f", "-", stdin=CONFIGMAP)
    refused = kubectl("create", "-f", "-", stdin=CONFIGMAP, check=False)
    assert "AlreadyExists" in refused
    kubectl("get", "configmap", "audited")
    kubectl("patch", "configmap", "audited", "--type=merge", "-p", '{"data": {"a": "1"}}')

    def logged() -> list[AuditEntry] | None:
        entries = [e for e in _entries(backend, kubectl.namespace) if e.name == "audited"]
        return entries if len(entries) >= 3 else None

    entries = wait_until(logged, "the three writes in the audit log")
    # Reads are not logged: the get between the create and the patch left nothing.
    assert [(e.verb, e.name, e.code) for e in entries] == [
        ("create", "audited", 201),
        ("create", "audited", 409),  # named from the request's object, as it was refused
        ("patch", "audited", 200),
    ]
    created, again, patched = entries
    assert created.user and created.user == again.user == patched.user
    assert created.received <= created.completed <= again.received


def test_a_lease_write_in_kerf_s_namespace_is_logged_with_the_holder_it_named(
    backend: Backend,
) -> None:
    admin = Kubectl(backend.kubeconfig)
    admin("create", "namespace", NAMESPACE, check=False)  # AlreadyExists is fine
    name = f"audited-{uuid.uuid4().hex[:8]}"
    spec = {"holderIdentity": "replica-a", "leaseDurationSeconds": 6}
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }
    admin("create", "-f", "-", stdin=json.dumps(lease))
    released = '{"spec": {"holderIdentity": null}}'
    admin("-n", NAMESPACE, "patch", "lease", name, "--type=merge", "-p", released)
    renewed = '{"spec": {"leaseDurationSeconds": 7}}'
    admin("-n", NAMESPACE, "patch", "lease", name, "--type=merge", "-p", renewed)
    admin("-n", NAMESPACE, "delete", "lease", name)

    def logged() -> list[AuditEntry] | None:
        entries = [e for e in read_audit(backend.audit_log) if e.name == name]
        return entries if len(entries) >= 4 else None

    entries = wait_until(logged, "the Lease's four writes in the audit log")
    # A release names no holder; a patch that leaves the holder alone says nothing of it.
    assert [(e.verb, e.holder) for e in entries] == [
        ("create", "replica-a"),
        ("patch", ""),
        ("patch", None),
        ("delete", None),
    ]
