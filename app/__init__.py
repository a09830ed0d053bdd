"""kerf's library, where every decision is made; the services and the `kerf` command sit
on it. Importing it first makes kubernetes_asyncio's generated client load a class at a
time (`app.kube.lazyclient`)."""

from app.kube.lazyclient import install

install()
