"""`kerf certs`: the CA, the serving certificate, file modes and the caBundle."""

from __future__ import annotations

import argparse
import base64
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509

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
    assert modes == {"ca.crt": 0o644, "tls.crt": 0o644, "tls.key": 0o600}


def test_rewrite_replaces_files_without_leftovers(tmp_path: Path) -> None:
    first, second = issue_certificates(), issue_certificates()
    write_certificates(first, tmp_path)
    write_certificates(second, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
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
