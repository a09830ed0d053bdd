"""The cert-manager overlay: the base unchanged but for the CA injection, and cert-manager
objects that are well formed and wired to the webhook.

kubernetes-validate has no schema for cert-manager's CRDs, so their structure is checked
here against the `cert-manager.io/v1` API: known fields only (a typo is an error, as with
strict field validation), required fields, references that resolve, durations that parse.
"""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest

from app.model.durations import parse_duration
from tests.webhook.test_manifests import KERF_API, MANIFESTS, one, render
from webhook.certs import service_dns_names

OVERLAY = MANIFESTS / "overlays" / "cert-manager"
CERT_MANAGER = "cert-manager.io/v1"
INJECT = "cert-manager.io/inject-ca-from"

#: The fields of cert-manager.io/v1 Certificate and Issuer specs (cert-manager 1.x API).
CERTIFICATE_FIELDS = {
    "additionalOutputFormats",
    "commonName",
    "dnsNames",
    "duration",
    "emailAddresses",
    "encodeUsagesInRequest",
    "ipAddresses",
    "isCA",
    "issuerRef",
    "keystores",
    "literalSubject",
    "nameConstraints",
    "otherNames",
    "privateKey",
    "renewBefore",
    "renewBeforePercentage",
    "revisionHistoryLimit",
    "secretName",
    "secretTemplate",
    "subject",
    "uris",
    "usages",
}
PRIVATE_KEY_FIELDS = {"algorithm", "encoding", "rotationPolicy", "size"}
ISSUER_REF_FIELDS = {"group", "kind", "name"}
ISSUER_TYPES = {"acme", "ca", "selfSigned", "vault", "venafi"}
USAGES = {
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
}


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return render(MANIFESTS)


@pytest.fixture(scope="module")
def overlay() -> list[dict[str, Any]]:
    return render(OVERLAY)


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def test_the_overlay_is_the_base_plus_cert_manager(
    base: list[dict[str, Any]], overlay: list[dict[str, Any]]
) -> None:
    added = [o for o in overlay if o["apiVersion"] == CERT_MANAGER]
    rest = {key(o): o for o in overlay if o["apiVersion"] != CERT_MANAGER}
    assert rest.keys() == {key(o) for o in base}
    for obj in base:
        mine = copy.deepcopy(rest[key(obj)])
        if obj["kind"] == "MutatingWebhookConfiguration":
            annotations = mine["metadata"].pop("annotations")
            assert annotations == {INJECT: "kerf-system/kerf-webhook-tls"}
        assert mine == obj, key(obj)
    assert sorted(key(o) for o in added) == [
        ("Certificate", "kerf-system", "kerf-webhook-ca"),
        ("Certificate", "kerf-system", "kerf-webhook-tls"),
        ("Issuer", "kerf-system", "kerf-selfsigned"),
        ("Issuer", "kerf-system", "kerf-webhook-ca"),
    ]


def test_every_kubernetes_object_still_validates(overlay: list[dict[str, Any]]) -> None:
    version = kubernetes_validate.latest_version()
    for obj in overlay:
        if obj["apiVersion"] in (KERF_API, CERT_MANAGER):
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")


def check_issuer(issuer: dict[str, Any]) -> None:
    spec = issuer["spec"]
    assert len(spec) == 1 and set(spec) <= ISSUER_TYPES, spec
    if "ca" in spec:
        assert set(spec["ca"]) <= {
            "secretName",
            "crlDistributionPoints",
            "ocspServers",
            "issuingCertificateURLs",
        }
        assert spec["ca"]["secretName"]
    if "selfSigned" in spec:
        assert set(spec["selfSigned"]) <= {"crlDistributionPoints"}


def check_certificate(cert: dict[str, Any], issuers: dict[tuple[str, str], Any]) -> None:
    spec = cert["spec"]
    name = cert["metadata"]["name"]
    assert set(spec) <= CERTIFICATE_FIELDS, f"{name}: unknown {set(spec) - CERTIFICATE_FIELDS}"
    assert spec["secretName"], name
    ref = spec["issuerRef"]
    assert set(ref) <= ISSUER_REF_FIELDS and ref["name"], name
    assert ref.get("group", "cert-manager.io") == "cert-manager.io"
    assert ref.get("kind", "Issuer") == "Issuer"
    assert (cert["metadata"]["namespace"], ref["name"]) in issuers, f"{name}: no such Issuer"
    assert set(spec.get("privateKey", {})) <= PRIVATE_KEY_FIELDS
    assert set(spec.get("usages", ())) <= USAGES
    assert spec.get("commonName") or spec.get("dnsNames"), name
    duration = parse_duration(spec.get("duration", "2160h"))
    assert parse_duration(spec.get("renewBefore", "0s")) < duration, name


def test_cert_manager_objects_are_well_formed(overlay: list[dict[str, Any]]) -> None:
    added = [o for o in overlay if o["apiVersion"] == CERT_MANAGER]
    issuers = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in added
        if o["kind"] == "Issuer"
    }
    for issuer in issuers.values():
        check_issuer(issuer)
    for cert in (o for o in added if o["kind"] == "Certificate"):
        check_certificate(cert, issuers)
    # The CA Issuer signs with the CA Certificate's Secret, which is a CA.
    ca_issuer = issuers[("kerf-system", "kerf-webhook-ca")]
    ca_cert = one(added, "Certificate", "kerf-webhook-ca")
    assert ca_issuer["spec"]["ca"]["secretName"] == ca_cert["spec"]["secretName"]
    assert ca_cert["spec"]["isCA"] is True


def test_the_serving_certificate_fits_the_webhook(overlay: list[dict[str, Any]]) -> None:
    config = one(overlay, "MutatingWebhookConfiguration", "kerf-webhook")
    namespace, name = config["metadata"]["annotations"][INJECT].split("/")
    cert = one(overlay, "Certificate", name)
    assert cert["metadata"]["namespace"] == namespace
    [hook] = config["webhooks"]
    assert "caBundle" not in hook["clientConfig"], "the CA injector fills it in"
    service = hook["clientConfig"]["service"]
    # The API server calls <service>.<namespace>.svc: the certificate must name it.
    expected = service_dns_names(service["name"], service["namespace"])
    assert cert["spec"]["dnsNames"] == [n for n in expected if n != "localhost"]
    assert "server auth" in cert["spec"]["usages"]
    deployment = one(overlay, "Deployment", "kerf-webhook")
    [tls] = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls"]
    assert tls["secret"]["secretName"] == cert["spec"]["secretName"]
    assert cert["metadata"]["namespace"] == deployment["metadata"]["namespace"]
