"""`kerf certs`: a private CA and a serving certificate for the webhook Service.

The API server calls the webhook at `https://<service>.<namespace>.svc`, so the serving
certificate names every form of that host, plus localhost and 127.0.0.1 for local runs.
Files are written atomically (temporary file, then rename) because the server watches
them for hot reload and must never read half a file; private keys are mode 0600.

A serving certificate can also be issued from an existing CA (`--ca-cert`, `--ca-key`):
the caBundle the API server trusts stays the same, so renewal touches only the Secret.
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
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.defaults import DEFAULT_NAMESPACE, DEFAULT_SERVICE

WEBHOOK_CONFIGURATION = "kerf-webhook"
WEBHOOK_NAME = "pods.kerf.rightsizing.kubex.ai"
# Clock skew between the machine that runs `kerf certs` and the cluster.
BACKDATE = timedelta(minutes=5)
CA_VALIDITY = timedelta(days=3650)
SigningKey = (
    ec.EllipticCurvePrivateKey
    | rsa.RSAPrivateKey
    | ed25519.Ed25519PrivateKey
    | ed448.Ed448PrivateKey
)
SIGNING_KEY_TYPES = (
    ec.EllipticCurvePrivateKey,
    rsa.RSAPrivateKey,
    ed25519.Ed25519PrivateKey,
    ed448.Ed448PrivateKey,
)


@dataclass(frozen=True, slots=True)
class IssuedCertificates:
    """PEM material of one `kerf certs` run.

    `ca_key` is set only when the run created the CA: renewing from an existing CA never
    rewrites its key.
    """

    ca_cert: bytes
    tls_cert: bytes
    tls_key: bytes
    ca_key: bytes | None = None

    @property
    def ca_bundle(self) -> str:
        """The base64 `caBundle` value of a webhook's `clientConfig`."""
        return base64.b64encode(self.ca_cert).decode("ascii")


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """A CA that signs serving certificates: its certificate (PEM, as given) and key."""

    cert_pem: bytes
    cert: x509.Certificate
    key: SigningKey


class CertificateError(ValueError):
    """Certificate input kerf cannot use; the message names the file and the problem."""


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


def new_certificate_authority(
    namespace: str = DEFAULT_NAMESPACE, *, now: datetime | None = None
) -> tuple[CertificateAuthority, bytes]:
    """A fresh self-signed CA valid 10 years, and its private key in PEM (PKCS#8).

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
        .not_valid_after(start + CA_VALIDITY)
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
    pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    return CertificateAuthority(pem, ca_cert, ca_key), _private_pem(ca_key)


def _private_pem(key: SigningKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def load_certificate_authority(
    cert_path: Path, key_path: Path, *, now: datetime | None = None
) -> CertificateAuthority:
    """The CA in `cert_path` (the first certificate of the file) with its key.

    Refuses, naming the file, what could not sign a certificate the API server trusts: a
    file that is not PEM, a certificate that is not a CA or has expired, a key that is
    encrypted, of an unsupported type, or not the certificate's.
    """
    try:
        cert_pem = cert_path.read_bytes()
        key_pem = key_path.read_bytes()
    except OSError as exc:
        raise CertificateError(f"{exc.filename}: {exc.strerror}") from None
    try:
        cert = x509.load_pem_x509_certificates(cert_pem)[0]
    except ValueError:
        raise CertificateError(f"{cert_path}: not a PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        raise CertificateError(f"{key_path}: the key is encrypted; give it unencrypted") from None
    except ValueError:
        raise CertificateError(f"{key_path}: not a PEM private key") from None
    if not isinstance(key, SIGNING_KEY_TYPES):
        raise CertificateError(f"{key_path}: unsupported key type {type(key).__name__}")
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is None or not constraints.ca:
        raise CertificateError(f"{cert_path}: not a CA certificate (basicConstraints CA:FALSE)")
    if cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) != key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ):
        raise CertificateError(f"{key_path}: not the private key of {cert_path}")
    if cert.not_valid_after_utc <= (now or datetime.now(UTC)):
        raise CertificateError(
            f"{cert_path}: the CA expired at {cert.not_valid_after_utc.isoformat()}"
        )
    return CertificateAuthority(cert_pem, cert, key)


def issue_certificates(
    service: str = DEFAULT_SERVICE,
    namespace: str = DEFAULT_NAMESPACE,
    *,
    days: int = 365,
    now: datetime | None = None,
    ca: CertificateAuthority | None = None,
) -> IssuedCertificates:
    """A serving certificate valid `days`, signed by `ca` or by a fresh CA.

    With an existing CA the caBundle stays the same, so renewing needs no change to the
    MutatingWebhookConfiguration. The certificate never outlives its CA.
    """
    current = now or datetime.now(UTC)
    start = current - BACKDATE
    ca_key_pem = None
    if ca is None:
        ca, ca_key_pem = new_certificate_authority(namespace, now=current)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in service_dns_names(service, namespace)]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{service}.{namespace}.svc"))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(min(start + timedelta(days=days), ca.cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), False
        )
        .sign(ca.key, _signature_hash(ca.key))
    )
    return IssuedCertificates(
        ca_cert=ca.cert_pem,
        tls_cert=cert.public_bytes(serialization.Encoding.PEM),
        tls_key=_private_pem(key),
        ca_key=ca_key_pem,
    )


def _signature_hash(key: SigningKey) -> hashes.SHA256 | None:
    # Ed25519 and Ed448 sign without a separate digest.
    return (
        None
        if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey)
        else hashes.SHA256()
    )


def expires_at(cert_path: Path) -> datetime:
    """When the (first) certificate in `cert_path` expires."""
    try:
        data = cert_path.read_bytes()
    except OSError as exc:
        raise CertificateError(f"{exc.filename}: {exc.strerror}") from None
    try:
        return x509.load_pem_x509_certificates(data)[0].not_valid_after_utc
    except ValueError:
        raise CertificateError(f"{cert_path}: not a PEM certificate") from None


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
    """Write ca.crt, tls.key (0600) and tls.crt into `out`, and ca.key (0600) for a new CA.

    The key goes first: a reloading server that sees the new key with the old certificate
    finds a mismatch and keeps serving the old pair until the certificate follows.
    """
    if issued.ca_key is not None:
        write_atomic(out / "ca.key", issued.ca_key, mode=0o600)
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
