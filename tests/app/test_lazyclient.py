"""kubernetes_asyncio's generated client is loaded a class at a time (app/kube/lazyclient.py),
and holds exactly what the package imported whole holds."""

from __future__ import annotations

import subprocess
import sys

import orjson

from app.kube.lazyclient import PACKAGES

_NAMES = (
    f"PACKAGES = {PACKAGES!r}\n"
    + """
import importlib, sys, orjson
names = {}
for package in PACKAGES:
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        names[f"{package}.{name}"] = f"{value.__module__}.{value.__qualname__}"
sys.stdout.write(orjson.dumps(names).decode())
"""
)


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_services_load_no_model_and_few_api_classes() -> None:
    loaded = orjson.loads(
        _run(
            "import sys, orjson\n"
            "import webhook.main, reconciler.main, recommender.main, kerf.cli\n"
            "sys.stdout.write(orjson.dumps(sorted(m for m in sys.modules"
            " if m.startswith('kubernetes_asyncio.client.'))).decode())"
        )
    )
    assert not [m for m in loaded if m.startswith("kubernetes_asyncio.client.models.")]
    apis = [m for m in loaded if m.startswith("kubernetes_asyncio.client.api.")]
    assert "kubernetes_asyncio.client.api.core_v1_api" in apis and len(apis) <= 8


def test_the_lazy_client_holds_what_the_whole_one_does() -> None:
    lazy = orjson.loads(_run("import app\n" + _NAMES))
    whole = orjson.loads(_run("import kubernetes_asyncio.client\nimport app\n" + _NAMES))
    assert len(whole) > 800
    assert lazy == whole


def test_its_packages_are_attributes_of_the_client_as_imported_ones_are() -> None:
    out = _run(
        "import app\n"
        "import sys\n"
        "from kubernetes_asyncio import client\n"
        "assert client.models is sys.modules['kubernetes_asyncio.client.models']\n"
        "assert client.api is sys.modules['kubernetes_asyncio.client.api']\n"
        "assert client.models.V1Pod.__name__ == 'V1Pod'\n"
        "print('ok')\n"
    )
    assert out.strip() == "ok"


def test_an_unknown_name_is_an_attribute_error() -> None:
    out = _run(
        "import app\n"
        "from kubernetes_asyncio import client\n"
        "try:\n"
        "    client.NoSuchApi\n"
        "except AttributeError as exc:\n"
        "    print(exc)\n"
    )
    assert "has no attribute 'NoSuchApi'" in out
