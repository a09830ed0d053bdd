"""kerf's manifests applied as in production: CRDs, namespace, ServiceAccounts, RBAC,
defaults; a kubeconfig per ServiceAccount; the webhook configuration pointed at a URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.backend import ROOT, Backend
from harness.kubectl import Kubectl

NAMESPACE = "kerf-system"


def install(kubectl: Kubectl) -> None:
    """kerf's CRDs, namespace, ServiceAccounts, RBAC and defaults, from `manifests/`."""
    kubectl("apply", "-k", "manifests/crds/")
    kubectl(
        "wait",
        "--for",
        "condition=Established",
        "crd",
        "-l",
        "app.kubernetes.io/part-of=kerf",
        "--timeout=120s",
    )
    kubectl("apply", "-k", "manifests/namespace/")
    for part in ("webhook", "reconciler"):
        for name in ("serviceaccount.yaml", "rbac.yaml"):
            kubectl("apply", "-f", f"manifests/{part}/{name}")
    kubectl("apply", "-k", "manifests/defaults/")


def add_account_like(kubectl: Kubectl, part: str, account: str) -> None:
    """One more ServiceAccount with the permissions of `manifests/<part>/`'s: the account,
    and a copy of each of its bindings naming it (so two replicas can be told apart by
    user in the API server's audit log)."""
    kubectl.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": NAMESPACE},
        }
    )
    for doc in yaml.safe_load_all((ROOT / "manifests" / part / "rbac.yaml").read_text()):
        if not doc or doc.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        doc["metadata"]["name"] = f"{doc['metadata']['name']}.{account}"
        doc["subjects"] = [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
        kubectl.apply(doc)


def username(backend: Backend, account: str) -> str:
    """The user the API server names in its audit log for `account`'s token."""
    if not backend.real:
        return _kubesim_token(account)  # kubesim's user is the token it was sent
    return f"system:serviceaccount:{NAMESPACE}:{account}"


def _kubesim_token(account: str) -> str:
    return f"kubesim-{account}"  # kubesim accepts any token and enforces no RBAC


def _token(backend: Backend, kubectl: Kubectl, account: str) -> str:
    if not backend.real:
        return _kubesim_token(account)
    return kubectl("-n", NAMESPACE, "create", "token", account, "--duration", "24h").strip()


def service_kubeconfig(backend: Backend, kubectl: Kubectl, account: str, path: Path) -> Path:
    """A kubeconfig for the ServiceAccount `account`: the admin's cluster, its token."""
    admin = yaml.safe_load(backend.kubeconfig.read_text())
    cluster = admin["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": account, "user": {"token": _token(backend, kubectl, account)}}],
        "contexts": [{"name": account, "context": {"cluster": cluster["name"], "user": account}}],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)  # it holds a token
    return path


def webhook_configuration(url: str, ca_bundle: str) -> dict[str, Any]:
    """The manifests' MutatingWebhookConfiguration, pointed at `url` (kerf runs outside
    the cluster here) with the CA that signed its certificate."""
    path = ROOT / "manifests" / "webhook" / "mutatingwebhookconfiguration.yaml"
    config = yaml.safe_load(path.read_text())
    for hook in config["webhooks"]:
        hook["clientConfig"] = {"url": url, "caBundle": ca_bundle}
    return dict(config)
