"""The admission step: MutatingWebhookConfigurations called over verified HTTPS."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.conftest import pod_body
from tests.kubesim.webhook_server import Webhook, patch_response, serve


async def annotate(request: dict[str, Any]) -> dict[str, Any]:
    annotations = request["object"]["metadata"].get("annotations")
    if annotations is None:
        return patch_response(
            request, [{"op": "add", "path": "/metadata/annotations", "value": {"mutated": "yes"}}]
        )
    if "mutated" in annotations:
        return patch_response(request, [])
    return patch_response(
        request, [{"op": "add", "path": "/metadata/annotations/mutated", "value": "yes"}]
    )


async def add_label(request: dict[str, Any]) -> dict[str, Any]:
    if "second" in (request["object"]["metadata"].get("labels") or {}):
        return patch_response(request, [])
    return patch_response(
        request, [{"op": "add", "path": "/metadata/labels/second", "value": "yes"}]
    )


async def deny(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "uid": request["uid"],
        "allowed": False,
        "status": {"code": 403, "message": "no pods today"},
    }


@pytest.fixture
async def webhook(tmp_path: Path) -> AsyncIterator[Webhook]:
    hook, runner = await serve(
        tmp_path,
        {"/mutate": annotate, "/label": add_label, "/deny": deny},
        ["kerf-webhook.kerf-system.svc"],
    )
    try:
        yield hook
    finally:
        await runner.cleanup()


def config(name: str, hooks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": hooks,
    }


def hook_entry(name: str, ca_bundle: str, path: str = "/mutate", **extra: Any) -> dict[str, Any]:
    entry = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": {
            "service": {"name": "kerf-webhook", "namespace": "kerf-system", "path": path},
            "caBundle": ca_bundle,
        },
        "rules": [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
            }
        ],
    }
    entry.update(extra)
    return entry


async def install(api: client.ApiClient, *hooks: dict[str, Any], name: str = "kerf") -> None:
    await client.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(
        config(name, list(hooks))
    )


async def test_pod_create_is_mutated_over_verified_tls(sim, api, core, webhook: Webhook) -> None:
    sim.service_addresses[("kerf-system", "kerf-webhook")] = webhook.address
    await install(
        api, hook_entry("pods.kerf.io", webhook.ca_bundle, timeoutSeconds=5, failurePolicy="Fail")
    )
    body = pod_body("")
    body["metadata"] = {"generateName": "web-", "labels": {"app": "web"}}
    pod = await core.create_namespaced_pod("default", body)
    assert pod.metadata.annotations == {"mutated": "yes"}
    request = webhook.reviews[0]["request"]
    assert (
        request["operation"] == "CREATE"
        and request["namespace"] == "default"
        and request["name"] == ""
    )
    assert request["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    # The webhook sees the defaulted pod, before the uid is assigned.
    assert (
        request["object"]["spec"]["restartPolicy"] == "Always"
        and "uid" not in request["object"]["metadata"]
    )


async def test_replicaset_pods_go_through_admission(sim, api, webhook: Webhook) -> None:
    sim.service_addresses[("kerf-system", "kerf-webhook")] = webhook.address
    await install(api, hook_entry("pods.kerf.io", webhook.ca_bundle))
    await sim.add_node("n1")
    await client.AppsV1Api(api).create_namespaced_replica_set(
        "default",
        {
            "metadata": {"name": "rs"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "rs"}},
                "template": {
                    "metadata": {"labels": {"app": "rs"}},
                    "spec": {"containers": [{"name": "c", "image": "x:1"}]},
                },
            },
        },
    )
    await sim.settle()
    pods = sim.store.list(("", "pods"), "default")
    assert len(pods) == 2 and all(p["metadata"]["annotations"] == {"mutated": "yes"} for p in pods)


async def test_wrong_ca_fails_closed_or_open(
    sim, api, core, webhook: Webhook, tmp_path: Path
) -> None:
    other, runner = await serve(tmp_path / "..", {"/mutate": annotate}, ["other.example"])
    await runner.cleanup()
    sim.service_addresses[("kerf-system", "kerf-webhook")] = webhook.address
    await install(
        api, hook_entry("strict.kerf.io", other.ca_bundle, failurePolicy="Fail"), name="strict"
    )
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", pod_body("p"))
    assert err.value.status == 500
    message = json.loads(err.value.body)["message"]
    assert message.startswith(
        'Internal error occurred: failed calling webhook "strict.kerf.io": failed to call webhook: Post "https://kerf-webhook.kerf-system.svc:443/mutate?timeout=10s"'
    )
    assert "CERTIFICATE_VERIFY_FAILED" in message
    await client.AdmissionregistrationV1Api(api).patch_mutating_webhook_configuration(
        "strict", [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]
    )
    pod = await core.create_namespaced_pod("default", pod_body("p"))
    assert pod.metadata.annotations is None


async def test_hostname_is_verified_for_service(sim, api, core, webhook: Webhook) -> None:
    sim.service_addresses[("kerf-system", "elsewhere")] = webhook.address
    entry = hook_entry("pods.kerf.io", webhook.ca_bundle, failurePolicy="Fail")
    entry["clientConfig"]["service"]["name"] = "elsewhere"
    await install(api, entry)
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", pod_body("p"))
    assert "elsewhere.kerf-system.svc" in json.loads(err.value.body)["message"]


async def test_url_client_config(sim, api, core, webhook: Webhook) -> None:
    entry = hook_entry("pods.kerf.io", webhook.ca_bundle, failurePolicy="Fail")
    entry["clientConfig"] = {
        "url": f"https://{webhook.address}/mutate",
        "caBundle": webhook.ca_bundle,
    }
    await install(api, entry)
    assert (await core.create_namespaced_pod("default", pod_body("p"))).metadata.annotations == {
        "mutated": "yes"
    }


async def test_slow_webhook_with_ignore_lets_pod_through(sim, api, core, webhook: Webhook) -> None:
    sim.service_addresses[("kerf-system", "kerf-webhook")] = webhook.address
    webhook.delay = 1.5
    await install(
        api, hook_entry("pods.kerf.io", webhook.ca_bundle, failurePolicy="Ignore", timeoutSeconds=1)
    )
    pod = await core.create_namespaced_pod("default", pod_body("p"))
    assert pod.metadata.annotations is None
    assert "context deadline exceeded" in sim.admission.calls[-1].error


async def test_selectors_limit_which_pods_are_sent(sim, api, core, webhook: Webhook) -> None:
    sim.service_addresses[("kerf-system", "kerf-webhook")] = webhook.address
    await sim.add_namespace("kube-tools", {"team": "infra"})
    await install(
        api,
        hook_entry(
            "pods.kerf.io",
            webhook.ca_bundle,
            namespaceSelector={
                "matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["infra"]}]
            },
            objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
        ),
    )
    await core.create_namespaced_pod("kube-tools", pod_body("a"))
    await core.create_namespaced_pod("default", pod_body("b", labels={"skip": "1"}))
    await core.create_namespaced_pod("default", pod_body("c"))
    assert [r["request"]["object"]["metadata"].get("labels") for r in webhook.reviews] == [
        {"app": "web"}
    ]


async def test_reinvocation_if_needed(sim, api, core, webhook: Webhook) -> None:
    sim.service_addresses[("kerf-system", "kerf-webhook")] = webhook.address
    await install(
        api, hook_entry("a.kerf.io", webhook.ca_bundle, reinvocationPolicy="IfNeeded"), name="a"
    )
    await install(api, hook_entry("b.kerf.io", webhook.ca_bundle, path="/label"), name="b")
    pod = await core.create_namespaced_pod("default", pod_body("p"))
    assert pod.metadata.labels == {"app": "web", "second": "yes"}
    assert [c.webhook for c in sim.admission.calls] == ["a.kerf.io", "b.kerf.io", "a.kerf.io"]


async def test_denial(sim, api, core, webhook: Webhook) -> None:
    sim.service_addresses[("kerf-system", "kerf-webhook")] = webhook.address
    await install(api, hook_entry("deny.kerf.io", webhook.ca_bundle, path="/deny"))
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", pod_body("p"))
    assert err.value.status == 403
    assert (
        json.loads(err.value.body)["message"]
        == 'admission webhook "deny.kerf.io" denied the request: no pods today'
    )
