"""Mutating admission as kube-apiserver 1.35 runs it: `sideEffects` is validated, a
server-side dry run calls webhooks that declare no side effects, and `matchConditions`
(kerf's own, from manifests/webhook/) decide whether a webhook is called.

Each webhook here points at an address where nothing listens, with `failurePolicy:
Fail`: a request that calls it is refused with "failed calling webhook", one that does
not is admitted. Each is scoped to its test's namespace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from harness.backend import ROOT
from harness.kubectl import Kubectl
from harness.services import free_port
from harness.wait import wait_until
from tests.conformance.conftest import NamespacedKubectl

CALLED = "failed calling webhook"
KERF_WEBHOOK = ROOT / "manifests" / "webhook" / "mutatingwebhookconfiguration.yaml"


def configuration(name: str, namespace: str, **hook: Any) -> dict[str, Any]:
    """A MutatingWebhookConfiguration of one webhook on pod creation in `namespace`."""
    webhook = {
        "name": "probe.conformance.kerf.dev",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": f"https://127.0.0.1:{free_port()}/mutate"},
        "rules": [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
            }
        ],
        "failurePolicy": "Fail",
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        **hook,
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [webhook],
    }


def pod(name: str, **metadata: Any) -> str:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **metadata},
        "spec": {"containers": [{"name": "app", "image": "web:1"}]},
    }
    return json.dumps(body)


def create(kubectl: NamespacedKubectl, body: str, *flags: str) -> str:
    return kubectl("create", *flags, "-f", "-", stdin=body, check=False)


@pytest.fixture
def registered(kubectl: NamespacedKubectl) -> Iterator[list[str]]:
    """Names of the configurations a test registers, deleted after it."""
    names: list[str] = []
    yield names
    admin = Kubectl(kubectl.kubeconfig)
    for name in names:
        admin("delete", "mutatingwebhookconfiguration", name, "--ignore-not-found")


def register(kubectl: NamespacedKubectl, names: list[str], config: dict[str, Any]) -> None:
    """Create `config` and wait until the server calls it (the real server picks up
    webhook configurations from an informer, a moment after they are stored)."""
    Kubectl(kubectl.kubeconfig)("create", "-f", "-", stdin=json.dumps(config))
    names.append(config["metadata"]["name"])
    wait_until(
        lambda: CALLED in create(kubectl, pod("probe"), "--dry-run=server"),
        f"webhook configuration {config['metadata']['name']} in use",
    )


def test_side_effects_must_be_none_or_none_on_dry_run(kubectl: NamespacedKubectl) -> None:
    admin = Kubectl(kubectl.kubeconfig)
    some = configuration("conformance-side-effects-some", kubectl.namespace, sideEffects="Some")
    out = admin("create", "-f", "-", stdin=json.dumps(some), check=False)
    assert (
        'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", '
        '"NoneOnDryRun"' in out
    ), out
    missing = configuration("conformance-side-effects-missing", kubectl.namespace)
    out = admin("create", "-f", "-", stdin=json.dumps(missing), check=False)
    assert (
        "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun" in out
    ), out


def test_a_dry_run_calls_a_webhook_without_side_effects_and_stores_nothing(
    kubectl: NamespacedKubectl, registered: list[str]
) -> None:
    config = configuration("conformance-dry-run", kubectl.namespace, sideEffects="NoneOnDryRun")
    register(kubectl, registered, config)
    assert CALLED in create(kubectl, pod("dry"), "--dry-run=server")
    assert "dry" not in kubectl("get", "pods", "-o", "name")


def test_kerf_match_conditions_skip_mirror_pods_only(
    kubectl: NamespacedKubectl, registered: list[str]
) -> None:
    [kerf_hook] = yaml.safe_load(KERF_WEBHOOK.read_text())["webhooks"]
    config = configuration(
        "conformance-match-conditions",
        kubectl.namespace,
        sideEffects="None",
        matchConditions=kerf_hook["matchConditions"],
    )
    register(kubectl, registered, config)
    assert CALLED in create(kubectl, pod("plain"))
    assert CALLED in create(kubectl, pod("annotated", annotations={"team": "web"}))
    mirror = json.loads(pod("mirror", annotations={"kubernetes.io/config.mirror": "static"}))
    mirror["spec"]["nodeName"] = "node-1"
    assert "pod/mirror created" in create(kubectl, json.dumps(mirror))


def test_a_false_match_condition_skips_the_webhook_and_an_error_refuses_the_request(
    kubectl: NamespacedKubectl, registered: list[str]
) -> None:
    condition = {
        "name": "not-skipped",
        "expression": "object.metadata.labels['skip'] != 'yes'",
    }
    config = configuration(
        "conformance-condition-error",
        kubectl.namespace,
        sideEffects="None",
        matchConditions=[condition],
    )
    Kubectl(kubectl.kubeconfig)("create", "-f", "-", stdin=json.dumps(config))
    registered.append(config["metadata"]["name"])
    labelled = {"labels": {"skip": "no"}}
    wait_until(
        lambda: CALLED in create(kubectl, pod("probe", **labelled), "--dry-run=server"),
        "the webhook configuration in use",
    )
    assert "pod/skipped created" in create(kubectl, pod("skipped", labels={"skip": "yes"}))
    # No labels at all: the expression fails, and failurePolicy Fail refuses the pod.
    out = create(kubectl, pod("unlabelled"))
    assert 'pods "unlabelled" is forbidden' in out, out
    assert "no such key" in out, out


def test_a_match_condition_that_does_not_compile_is_refused(kubectl: NamespacedKubectl) -> None:
    condition = {"name": "broken", "expression": "object.metadata.("}
    config = configuration(
        "conformance-condition-syntax",
        kubectl.namespace,
        sideEffects="None",
        matchConditions=[condition],
    )
    out = Kubectl(kubectl.kubeconfig)("create", "-f", "-", stdin=json.dumps(config), check=False)
    assert (
        'webhooks[0].matchConditions[0].expression: Invalid value: "object.metadata.(": '
        "compilation failed" in out
    ), out
