"""The real server over TLS on a random port, with a client that verifies the CA."""

from __future__ import annotations

import asyncio
import logging
import os
import pty
import select
import signal
import ssl
import sys
from pathlib import Path

import httpx
import jsonpatch
import orjson
import pytest
from cryptography import x509

from tests.webhook.fakes import FakeView, ScriptedAdmit, load_example, result
from tests.webhook.tls_helpers import (
    client_context,
    encrypt_key,
    issue_into,
    peer_serial,
    running_server,
)
from webhook.review import decode_patch
from webhook.server import create_app

DESIRED = {"requests": {"cpu": "250m", "memory": "256Mi"}}


def serial_of(cert_file: Path) -> int:
    return x509.load_pem_x509_certificate(cert_file.read_bytes()).serial_number


@pytest.fixture
def cert_dir(tmp_path: Path) -> Path:
    issue_into(tmp_path / "certs")
    return tmp_path / "certs"


def make_app() -> object:
    return create_app(FakeView(), admit=ScriptedAdmit(result(resources={"app": DESIRED})))


async def test_mutate_over_verified_tls(cert_dir: Path) -> None:
    review = load_example("replicaset-pod.json")
    async with running_server(make_app(), cert_dir) as server:
        context = client_context(cert_dir / "ca.crt")
        async with httpx.AsyncClient(verify=context, base_url=server.url) as client:
            response = await client.post("/mutate", content=orjson.dumps(review))
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.get("/readyz")).status_code == 200
            assert "kerf_webhook_requests_total" in (await client.get("/metrics")).text
    assert response.status_code == 200
    pod = jsonpatch.apply_patch(review["request"]["object"], decode_patch(response.json()))
    assert pod["spec"]["containers"][0]["resources"]["requests"] == DESIRED["requests"]


async def test_untrusted_client_is_refused(cert_dir: Path, tmp_path: Path) -> None:
    issue_into(tmp_path / "other")
    async with running_server(make_app(), cert_dir) as server:
        context = client_context(tmp_path / "other" / "ca.crt")
        async with httpx.AsyncClient(verify=context, base_url=server.url) as client:
            with pytest.raises(httpx.ConnectError):
                await client.get("/healthz")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
async def test_tls_below_1_2_is_refused(cert_dir: Path) -> None:
    async with running_server(make_app(), cert_dir) as server:
        assert server.certificate.context.minimum_version == ssl.TLSVersion.TLSv1_2
        context = client_context(cert_dir / "ca.crt")
        # Let this client offer TLS 1.1 at all, so the refusal is the server's.
        context.set_ciphers("DEFAULT:@SECLEVEL=0")
        context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        context.maximum_version = ssl.TLSVersion.TLSv1_1
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await peer_serial(server.port, context, "localhost")


@pytest.mark.parametrize("server_name", ["localhost", None])
async def test_rotation_next_handshake_shows_new_serial(
    cert_dir: Path, tmp_path: Path, server_name: str | None
) -> None:
    old_ca = tmp_path / "old-ca.crt"
    old_ca.write_bytes((cert_dir / "ca.crt").read_bytes())
    async with running_server(make_app(), cert_dir) as server:
        context = client_context(old_ca, cert_dir / "ca.crt")
        old = await peer_serial(server.port, context, server_name)
        assert old == serial_of(cert_dir / "tls.crt")
        issue_into(cert_dir)
        assert server.certificate.reload_if_changed() is True
        context = client_context(old_ca, cert_dir / "ca.crt")
        assert await peer_serial(server.port, context, server_name) == serial_of(
            cert_dir / "tls.crt"
        )
        assert serial_of(cert_dir / "tls.crt") != old


async def test_watcher_picks_up_rewritten_files(cert_dir: Path) -> None:
    async with running_server(make_app(), cert_dir, reload_interval_s=0.02) as server:
        issue_into(cert_dir)
        context = client_context(cert_dir / "ca.crt")
        expected = serial_of(cert_dir / "tls.crt")
        # Wait for the watcher (a condition, not a duration assertion).
        for _ in range(3000):
            try:
                if await peer_serial(server.port, context, "localhost") == expected:
                    break
            except ssl.SSLCertVerificationError:
                pass
            await asyncio.sleep(0.02)
        assert await peer_serial(server.port, context, "localhost") == expected


async def test_half_written_pair_keeps_old_certificate(cert_dir: Path, tmp_path: Path) -> None:
    async with running_server(make_app(), cert_dir) as server:
        context = client_context(cert_dir / "ca.crt")
        old = await peer_serial(server.port, context, "localhost")
        original_cert = (cert_dir / "tls.crt").read_bytes()
        issue_into(tmp_path / "next")
        # The key arrived, the certificate did not: the pair does not match.
        (cert_dir / "tls.key").write_bytes((tmp_path / "next" / "tls.key").read_bytes())
        assert server.certificate.reload_if_changed() is False
        assert await peer_serial(server.port, context, "localhost") == old
        # The certificate is being written: a truncated PEM.
        new_cert = (tmp_path / "next" / "tls.crt").read_bytes()
        (cert_dir / "tls.crt").write_bytes(new_cert[: len(new_cert) // 2])
        assert server.certificate.reload_if_changed() is False
        assert await peer_serial(server.port, context, "localhost") == old
        # The pair is complete again: it takes effect.
        (cert_dir / "tls.crt").write_bytes(new_cert)
        assert server.certificate.reload_if_changed() is True
        context = client_context(tmp_path / "next" / "ca.crt")
        assert await peer_serial(server.port, context, "localhost") == serial_of(
            tmp_path / "next" / "tls.crt"
        )
        assert original_cert != new_cert


async def test_missing_files_keep_old_certificate(cert_dir: Path) -> None:
    async with running_server(make_app(), cert_dir) as server:
        context = client_context(cert_dir / "ca.crt")
        old = await peer_serial(server.port, context, "localhost")
        (cert_dir / "tls.crt").unlink()
        assert server.certificate.reload_if_changed() is False
        assert await peer_serial(server.port, context, "localhost") == old


@pytest.mark.parametrize("cipher", ["ECDHE-ECDSA-AES128-SHA256", "ECDHE-ECDSA-AES256-SHA384"])
async def test_tls_1_2_refuses_cbc_suites(cert_dir: Path, cipher: str) -> None:
    async with running_server(make_app(), cert_dir) as server:
        context = client_context(cert_dir / "ca.crt")
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        context.set_ciphers(cipher)
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await peer_serial(server.port, context, "localhost")


async def test_tls_1_2_offers_aead_suites(cert_dir: Path) -> None:
    async with running_server(make_app(), cert_dir) as server:
        context = client_context(cert_dir / "ca.crt")
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        _, writer = await asyncio.open_connection(
            "127.0.0.1", server.port, ssl=context, server_hostname="localhost"
        )
        name, version, _ = writer.get_extra_info("cipher")
        writer.close()
        assert version == "TLSv1.2" and ("GCM" in name or "CHACHA20" in name)
        tls12 = [c for c in server.certificate.context.get_ciphers() if c["protocol"] == "TLSv1.2"]
        assert tls12 and all(c["aead"] for c in tls12)


async def test_encrypted_key_is_refused_and_old_certificate_serves(
    cert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_server(make_app(), cert_dir) as server:
        context = client_context(cert_dir / "ca.crt")
        old = await peer_serial(server.port, context, "localhost")
        issue_into(tmp_path / "next")
        encrypt_key(tmp_path / "next" / "tls.key")
        for name in ("tls.key", "tls.crt"):
            (cert_dir / name).write_bytes((tmp_path / "next" / name).read_bytes())
        with caplog.at_level(logging.ERROR, logger="kerf.webhook"):
            assert server.certificate.reload_if_changed() is False
        assert await peer_serial(server.port, context, "localhost") == old
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert str(cert_dir / "tls.key") in errors[0] and "encrypted" in errors[0]


def read_terminal(terminal: int, stop: bytes, polls: int = 300) -> bytes:
    """What a child writes on its terminal, until it exits, writes `stop`, or `polls`
    tenths of a second pass (a bound, so a hanging child cannot hang the suite)."""
    output = b""
    for _ in range(polls):
        ready, _, _ = select.select([terminal], [], [], 0.1)
        if not ready:
            continue
        try:
            chunk = os.read(terminal, 4096)
        except OSError:  # EIO: the child has exited and the terminal is gone
            break
        output += chunk
        if not chunk or stop in output.lower():
            break
    return output


def test_encrypted_key_never_prompts_on_the_terminal(tmp_path: Path) -> None:
    """OpenSSL's default asks for the pass phrase on the controlling terminal and waits
    there forever; a child process with a terminal shows whether kerf lets it."""
    issue_into(tmp_path)
    encrypt_key(tmp_path / "tls.key")
    code = "import sys; from webhook.tls import ReloadingCertificate as R; R(*sys.argv[1:3])"
    files = [str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")]
    pid, terminal = pty.fork()
    if pid == 0:  # the child, whose controlling terminal is the pty
        os.execv(sys.executable, [sys.executable, "-c", code, *files])
    try:
        output = read_terminal(terminal, stop=b"pass phrase")
    finally:
        if os.waitpid(pid, os.WNOHANG) == (0, 0):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(terminal)
    assert b"pass phrase" not in output.lower(), output
    assert b"the private key is encrypted" in output, output
