"""TLS serving with certificate hot reload.

uvicorn listens with one `ssl.SSLContext` for its whole life. That context gets an SNI
callback, which OpenSSL runs on every ClientHello (also without SNI), and the callback
points the new connection at the newest good context. A watcher rebuilds that context
whenever the *content* of the certificate or key file changes: Kubernetes updates Secret
volumes by swapping a symlink, so modification times are not reliable, content is.

A pair that does not load (half-written file, key that does not match the certificate,
an encrypted key) is rejected and the previous pair keeps serving; the next change is tried
again.

An encrypted private key is refused, never decrypted: without a password callback OpenSSL
asks for the pass phrase on the controlling terminal and the process stops there, serving
nothing and ignoring SIGTERM. kerf has no pass phrase to give, so the callback refuses.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
from pathlib import Path

from webhook.logs import LOGGER_NAME

logger = logging.getLogger(LOGGER_NAME)


# TLS 1.2 suites: forward-secret key exchange and AEAD ciphers only (no CBC, no SHA-1 MAC).
# TLS 1.3 suites are all AEAD and are configured separately by OpenSSL.
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


class EncryptedKeyError(ValueError):
    """The private key file is encrypted; kerf serves only unencrypted keys."""


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A server context with TLS 1.2 as the floor and AEAD suites only, loaded from the
    given PEM files. Raises `EncryptedKeyError` (naming the file) for an encrypted key."""

    def refuse_pass_phrase() -> bytes:
        raise EncryptedKeyError(
            f"{key_file}: the private key is encrypted; kerf needs an unencrypted key "
            "(as `kerf certs` and Kubernetes TLS Secrets hold it)"
        )

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(TLS12_CIPHERS)
    context.load_cert_chain(certfile=cert_file, keyfile=key_file, password=refuse_pass_phrase)
    return context


class ReloadingCertificate:
    """The listening context plus the logic that swaps in newer certificates."""

    def __init__(self, cert_file: Path | str, key_file: Path | str):
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self._digest = self._read_digest()
        # The first pair must load: starting without a certificate helps no one.
        self.context = server_context(self.cert_file, self.key_file)
        self.context.sni_callback = self._select
        self._current = self.context
        self._rejected: str | None = None

    def _read_digest(self) -> str:
        digest = hashlib.sha256(self.cert_file.read_bytes())
        digest.update(b"\0")
        digest.update(self.key_file.read_bytes())
        return digest.hexdigest()

    def _select(
        self, connection: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext
    ) -> None:
        current = self._current
        if current is not self.context:
            connection.context = current

    def reload_if_changed(self) -> bool:
        """Load the files again if their content changed; True when a new pair took effect."""
        try:
            digest = self._read_digest()
        except OSError as exc:
            logger.warning("cannot read TLS files, keeping the current certificate: %s", exc)
            return False
        if digest in (self._digest, self._rejected):
            return False
        try:
            fresh = server_context(self.cert_file, self.key_file)
            # Files rewritten while loading: the loaded pair may not be the hashed one.
            if self._read_digest() != digest:
                return False
        except (OSError, ssl.SSLError, ValueError) as exc:
            self._rejected = digest
            logger.error(
                "new TLS files %s and %s do not load, keeping the current certificate: %s",
                self.cert_file,
                self.key_file,
                exc,
            )
            return False
        self._current = fresh
        self._digest = digest
        self._rejected = None
        logger.info("TLS certificate reloaded from %s", self.cert_file)
        return True

    async def watch(self, interval_s: float) -> None:
        """Check the files every `interval_s` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval_s)
            self.reload_if_changed()
