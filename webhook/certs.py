"""`kerf certs`: a private CA and a serving certificate for the webhook Service.

The API server calls the webhook at `https://<service>.<namespace>.svc`, so the serving
certificate names every form of that host, plus localhost and 127.0.0.1 for local runs.
Files are written atomically (temporary file, then rename) because the server watches
them for hot reload and must never read half a file; the private key is mode 0600.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_SERVICE = "kerf-webhook"
DEFAULT_NAMESPACE = "kerf-system"
WEBHOOK_CONFIGURATION = "kerf-webhook"
WEBHOOK_NAME = "pods.kerf.rightsizing.kubex.ai"
# Clock skew between the machine that runs `kerf certs` and the cluster.
BACKDATE = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class IssuedCertificates:
    """PEM material of one `kerf certs` run."""

    ca_cert: bytes
    tls_cert: bytes
    tls_key: bytes

    @property
    def ca_bundle(self) -> str:
        """The base64 `caBundle` value of a webhook's `clientConfig`."""
        return base64.b64encode(self.ca_cert).decode("ascii")


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The DNS names the serving certificate covers."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        "localhost",
    ]


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kerf"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def issue_certificates(
    service: str = DEFAULT_SERVICE,
    namespace: str = DEFAULT_NAMESPACE,
    *,
    days: int = 365,
    now: datetime | None = None,
) -> IssuedCertificates:
    """A fresh CA (valid 10 years) and a serving certificate signed by it (valid `days`).

    ECDSA P-256 keeps key generation instant and handshakes cheap; the API server and every
    supported TLS client accept it.
    """
    start = (now or datetime.now(UTC)) - BACKDATE
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"kerf webhook CA ({namespace})")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in service_dns_names(service, namespace)]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{service}.{namespace}.svc"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return IssuedCertificates(
        ca_cert=ca_cert.public_bytes(serialization.Encoding.PEM),
        tls_cert=cert.public_bytes(serialization.Encoding.PEM),
        tls_key=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data` in one rename; the file never exists with wider permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_certificates(issued: IssuedCertificates, out: Path) -> None:
    """Write ca.crt, tls.key (0600) and tls.crt into `out`.

    The key goes first: a reloading server that sees the new key with the old certificate
    finds a mismatch and keeps serving the old pair until the certificate follows.
    """
    write_atomic(out / "ca.crt", issued.ca_cert)
    write_atomic(out / "tls.key", issued.tls_key, mode=0o600)
    write_atomic(out / "tls.crt", issued.tls_cert)


def kustomize_ca_bundle_patch(ca_bundle: str) -> str:
    """A strategic-merge patch (kustomize `patches:` entry) that sets the webhook's caBundle."""
    return (
        "# Generated by `kerf certs`: sets the caBundle of kerf's mutating webhook.\n"
        "apiVersion: admissionregistration.k8s.io/v1\n"
        "kind: MutatingWebhookConfiguration\n"
        "metadata:\n"
        f"  name: {WEBHOOK_CONFIGURATION}\n"
        "webhooks:\n"
        f"  - name: {WEBHOOK_NAME}\n"
        "    clientConfig:\n"
        f"      caBundle: {ca_bundle}\n"
    )
