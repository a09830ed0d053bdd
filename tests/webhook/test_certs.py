"""`kerf certs`: the CA, the serving certificate, file modes and the caBundle."""

from __future__ import annotations

import argparse
import base64
import ipaddress
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from webhook.certs import issue_certificates, kustomize_ca_bundle_patch, write_certificates
from webhook.cli import add_certs_arguments, certs_command


def run_certs(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    add_certs_arguments(parser)
    return certs_command(parser.parse_args(argv))


def test_serving_certificate_names_the_service_and_is_signed_by_the_ca() -> None:
    issued = issue_certificates("hook", "ops")
    ca = x509.load_pem_x509_certificate(issued.ca_cert)
    cert = x509.load_pem_x509_certificate(issued.tls_cert)
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "hook",
        "hook.ops",
        "hook.ops.svc",
        "hook.ops.svc.cluster.local",
        "localhost",
    ]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert base64.b64decode(issued.ca_bundle) == issued.ca_cert


def test_files_are_written_with_private_key_mode(tmp_path: Path) -> None:
    write_certificates(issue_certificates(), tmp_path / "certs")
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "certs").iterdir()}
    assert modes == {"ca.crt": 0o644, "ca.key": 0o600, "tls.crt": 0o644, "tls.key": 0o600}


def test_rewrite_replaces_files_without_leftovers(tmp_path: Path) -> None:
    first, second = issue_certificates(), issue_certificates()
    write_certificates(first, tmp_path)
    write_certificates(second, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert (tmp_path / "tls.crt").read_bytes() == second.tls_cert


def test_command_prints_ca_bundle_and_writes_patch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patch = tmp_path / "overlay" / "ca-bundle.yaml"
    argv = ["--service", "s", "--namespace", "n", "--out", str(tmp_path / "c")]
    assert run_certs([*argv, "--kustomize-patch", str(patch)]) == 0
    bundle = capsys.readouterr().out.strip()
    assert base64.b64decode(bundle) == (tmp_path / "c" / "ca.crt").read_bytes()
    assert patch.read_text() == kustomize_ca_bundle_patch(bundle)
    assert f"caBundle: {bundle}" in patch.read_text()


def test_command_rejects_bad_validity(tmp_path: Path) -> None:
    assert run_certs(["--out", str(tmp_path), "--days", "0"]) == 2
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------- renewal from an existing CA


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def serving(directory: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate((directory / "tls.crt").read_bytes())


def outside_ca(tmp_path: Path, *, days: int = 3650) -> tuple[Path, Path]:
    """An RSA CA made elsewhere (a company CA), not by kerf."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "corp CA")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "corp-ca.crt", tmp_path / "corp-ca.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_a_certificate_from_the_existing_ca_keeps_the_ca_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    assert run_certs(["--out", str(first)]) == 0
    bundle = capsys.readouterr().out.strip()
    ca = ["--ca-cert", str(first / "ca.crt"), "--ca-key", str(first / "ca.key")]
    assert run_certs(["--out", str(second), *ca]) == 0
    assert capsys.readouterr().out.strip() == bundle
    assert (second / "ca.crt").read_bytes() == (first / "ca.crt").read_bytes()
    assert not (second / "ca.key").exists(), "the CA key is not copied around"
    assert (second / "tls.key").read_bytes() != (first / "tls.key").read_bytes()
    root = x509.load_pem_x509_certificate((first / "ca.crt").read_bytes())
    serving(second).verify_directly_issued_by(root)


def test_a_ca_made_elsewhere_signs_and_is_the_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert_path, key_path = outside_ca(tmp_path, days=30)
    out = tmp_path / "out"
    assert (
        run_certs(["--out", str(out), "--ca-cert", str(cert_path), "--ca-key", str(key_path)]) == 0
    )
    assert base64.b64decode(capsys.readouterr().out.strip()) == cert_path.read_bytes()
    root = x509.load_pem_x509_certificate(cert_path.read_bytes())
    cert = serving(out)
    cert.verify_directly_issued_by(root)
    # Asked for 365 days, but a certificate never outlives the CA that vouches for it.
    assert cert.not_valid_after_utc == root.not_valid_after_utc


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("serving-cert-as-ca", "not a CA certificate"),
        ("other-key", "not the private key of"),
        ("not-pem", "not a PEM certificate"),
        ("missing-key", "No such file or directory"),
        ("cert-only", "--ca-cert and --ca-key go together"),
    ],
)
def test_an_unusable_ca_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, message: str
) -> None:
    kerf = tmp_path / "kerf"
    write_certificates(issue_certificates(), kerf)
    other = tmp_path / "other"
    write_certificates(issue_certificates(), other)
    (tmp_path / "junk.pem").write_text("hello\n")
    argv = {
        "serving-cert-as-ca": ["--ca-cert", kerf / "tls.crt", "--ca-key", kerf / "tls.key"],
        "other-key": ["--ca-cert", kerf / "ca.crt", "--ca-key", other / "ca.key"],
        "not-pem": ["--ca-cert", tmp_path / "junk.pem", "--ca-key", kerf / "ca.key"],
        "missing-key": ["--ca-cert", kerf / "ca.crt", "--ca-key", tmp_path / "nope.key"],
        "cert-only": ["--ca-cert", kerf / "ca.crt"],
    }[case]
    out = tmp_path / "out"
    assert run_certs(["--out", str(out), *map(str, argv)]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.startswith("kerf certs: ")
    assert captured.out == ""
    assert not out.exists()


def test_renewal_does_nothing_while_the_certificate_is_valid_long_enough(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_certs(["--out", str(tmp_path), "--days", "90"]) == 0
    capsys.readouterr()
    before = files(tmp_path)
    assert run_certs(["--out", str(tmp_path), "--renew-if-expiring-within", "30d"]) == 0
    captured = capsys.readouterr()
    assert "nothing to do" in captured.err and "more than 30d" in captured.err
    assert captured.out == ""
    assert files(tmp_path) == before


@pytest.mark.parametrize("window", ["30d", "720h"])
def test_renewal_reissues_from_the_same_ca_when_expiring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], window: str
) -> None:
    assert run_certs(["--out", str(tmp_path), "--days", "10"]) == 0
    bundle = capsys.readouterr().out.strip()
    before = files(tmp_path)
    assert run_certs(["--out", str(tmp_path), "--renew-if-expiring-within", window]) == 0
    assert capsys.readouterr().out.strip() == bundle
    after = files(tmp_path)
    assert after["ca.crt"] == before["ca.crt"] and after["ca.key"] == before["ca.key"]
    assert after["tls.crt"] != before["tls.crt"]
    renewed = serving(tmp_path)
    renewed.verify_directly_issued_by(x509.load_pem_x509_certificate(after["ca.crt"]))
    assert renewed.not_valid_after_utc - datetime.now(UTC) > timedelta(days=364)


def test_renewal_without_the_ca_key_refuses_to_make_a_new_ca(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_certs(["--out", str(tmp_path), "--days", "10"]) == 0
    (tmp_path / "ca.key").unlink()
    capsys.readouterr()
    before = files(tmp_path)
    assert run_certs(["--out", str(tmp_path), "--renew-if-expiring-within", "30d"]) == 2
    assert "a new CA would break the caBundle" in capsys.readouterr().err
    assert files(tmp_path) == before


def test_renewal_issues_when_there_is_no_certificate_yet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert_path, key_path = outside_ca(tmp_path)
    out = tmp_path / "out"
    argv = ["--ca-cert", str(cert_path), "--ca-key", str(key_path)]
    assert run_certs(["--out", str(out), "--renew-if-expiring-within", "30d", *argv]) == 0
    assert sorted(files(out)) == ["ca.crt", "tls.crt", "tls.key"]


@pytest.mark.parametrize("window", ["30", "1 month", "-5d", "30D"])
def test_a_bad_renewal_window_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], window: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        run_certs(["--out", str(tmp_path), f"--renew-if-expiring-within={window}"])
    assert exc.value.code == 2
    assert "invalid duration" in capsys.readouterr().err


def test_running_it_again_keeps_the_ca_and_so_the_ca_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_certs(["--out", str(tmp_path)]) == 0
    bundle = capsys.readouterr().out.strip()
    ca_key, tls_key = (tmp_path / "ca.key").read_bytes(), (tmp_path / "tls.key").read_bytes()
    assert run_certs(["--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == bundle
    assert (tmp_path / "ca.key").read_bytes() == ca_key
    assert (tmp_path / "tls.key").read_bytes() != tls_key  # a fresh serving certificate
    root = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    serving(tmp_path).verify_directly_issued_by(root)


def test_new_ca_replaces_the_ca_and_says_the_ca_bundle_must_follow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_certs(["--out", str(tmp_path)]) == 0
    bundle = capsys.readouterr().out.strip()
    assert run_certs(["--out", str(tmp_path), "--new-ca"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() != bundle
    assert "replaced the CA" in captured.err and "caBundle" in captured.err
    assert base64.b64decode(captured.out.strip()) == (tmp_path / "ca.crt").read_bytes()


def test_new_ca_and_a_given_ca_exclude_each_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_certs(["--out", str(tmp_path / "a")]) == 0
    ca = ["--ca-cert", str(tmp_path / "a" / "ca.crt"), "--ca-key", str(tmp_path / "a" / "ca.key")]
    capsys.readouterr()
    assert run_certs(["--out", str(tmp_path / "b"), "--new-ca", *ca]) == 2
    assert "exclude each other" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
