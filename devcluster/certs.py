"""The cluster's PKI: a CA, the apiserver's serving certificate, client certificates for
the admin, the controller manager and the scheduler, and the service-account signing key.

ECDSA P-256 everywhere: every component accepts it and it is generated in microseconds,
where RSA keys would cost a noticeable part of the start-up.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from devcluster.network import KUBERNETES_SERVICE_IP

_VALIDITY = datetime.timedelta(days=7)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, as files."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """Every file the components are started with."""

    ca: KeyPair
    serving: KeyPair
    admin: KeyPair
    controller_manager: KeyPair
    scheduler: KeyPair
    #: the apiserver's client certificate to kubelets (logs, exec, the node proxy)
    kubelet_client: KeyPair
    service_account_key: Path
    service_account_pub: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        # A minute back, so a component whose clock reads a little behind accepts it.
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + _VALIDITY)
    )


def _leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    directory: Path,
    stem: str,
    sans: list[x509.GeneralName] | None = None,
) -> KeyPair:
    key = _key()
    builder = (
        _builder(subject, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    pair = KeyPair(directory / f"{stem}.crt", directory / f"{stem}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, pair.key)
    return pair


def generate(directory: Path) -> Pki:
    """Write a fresh PKI into `directory` and return where each file is."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name("devcluster-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
        .sign(ca_key, hashes.SHA256())
    )
    ca = KeyPair(directory / "ca.crt", directory / "ca.key")
    ca.cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(ca_key, ca.key)

    sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address(KUBERNETES_SERVICE_IP)),
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default"),
        x509.DNSName("kubernetes.default.svc"),
        x509.DNSName("kubernetes.default.svc.cluster.local"),
    ]
    server = ExtendedKeyUsageOID.SERVER_AUTH
    client = ExtendedKeyUsageOID.CLIENT_AUTH
    sa_key = _key()
    sa_key_path, sa_pub_path = directory / "sa.key", directory / "sa.pub"
    _write_key(sa_key, sa_key_path)
    sa_pub_path.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Pki(
        ca=ca,
        serving=_leaf(
            ca_cert, ca_key, _name("kube-apiserver"), server, directory, "apiserver", sans
        ),
        admin=_leaf(
            ca_cert, ca_key, _name("devcluster-admin", "system:masters"), client, directory, "admin"
        ),
        controller_manager=_leaf(
            ca_cert,
            ca_key,
            _name("system:kube-controller-manager"),
            client,
            directory,
            "controller-manager",
        ),
        scheduler=_leaf(
            ca_cert, ca_key, _name("system:kube-scheduler"), client, directory, "scheduler"
        ),
        kubelet_client=_leaf(
            ca_cert,
            ca_key,
            _name("kube-apiserver-kubelet-client", "system:masters"),
            client,
            directory,
            "apiserver-kubelet-client",
        ),
        service_account_key=sa_key_path,
        service_account_pub=sa_pub_path,
    )


@dataclass(frozen=True)
class NodePki:
    """A kubelet's files: its client certificate (the Node authorizer's `system:node:NAME`)
    and its serving certificate, for the node's name and address."""

    client: KeyPair
    serving: KeyPair


def issue_node(pki: Pki, name: str, address: str) -> NodePki:
    """Certificates for the kubelet of node `name` at `address`, from the cluster's CA."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca.cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca.key.read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    directory = pki.ca.cert.parent
    sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address(address)),
        x509.DNSName(name),
    ]
    return NodePki(
        client=_leaf(
            ca_cert,
            ca_key,
            _name(f"system:node:{name}", "system:nodes"),
            ExtendedKeyUsageOID.CLIENT_AUTH,
            directory,
            f"kubelet-{name}-client",
        ),
        serving=_leaf(
            ca_cert,
            ca_key,
            _name(name),
            ExtendedKeyUsageOID.SERVER_AUTH,
            directory,
            f"kubelet-{name}-serving",
            sans,
        ),
    )
