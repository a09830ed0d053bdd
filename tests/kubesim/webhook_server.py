"""A small TLS mutating webhook for the admission tests, with its own CA."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ipaddress
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_certs(directory: Path, dns_names: list[str]) -> tuple[Path, Path, str]:
    """A CA and a serving certificate for `dns_names` + 127.0.0.1; returns (cert, key, caBundle)."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("test-ca"))
        .issuer_name(_name("test-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.DNSName(n) for n in dns_names] + [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
    ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(dns_names[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    bundle = base64.b64encode(ca.public_bytes(serialization.Encoding.PEM)).decode()
    return cert_path, key_path, bundle


def patch_response(request: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """An allowed AdmissionReview response carrying a JSON patch."""
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(ops)).decode()
    return response


@dataclass
class Webhook:
    """A running webhook: its address, caBundle, and the reviews it received."""

    address: str = ""
    ca_bundle: str = ""
    reviews: list[dict[str, Any]] = field(default_factory=list)
    delay: float = 0.0


async def serve(
    directory: Path, handlers: dict[str, Handler], dns_names: list[str]
) -> tuple[Webhook, web.AppRunner]:
    """Start the webhook on 127.0.0.1 with one POST route per handler path."""
    cert, key, bundle = make_certs(directory, dns_names)
    hook = Webhook(ca_bundle=bundle)

    def route(handler: Handler) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            review = await request.json()
            hook.reviews.append(review)
            if hook.delay:
                await asyncio.sleep(hook.delay)
            response = await handler(review["request"])
            return web.json_response(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": response,
                }
            )

        return handle

    app = web.Application()
    for path, handler in handlers.items():
        app.router.add_post(path, route(handler))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    host, port = runner.addresses[0][:2]
    hook.address = f"{host}:{port}"
    return hook, runner
