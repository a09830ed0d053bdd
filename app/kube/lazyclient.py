"""kubernetes_asyncio's generated client, loaded a class at a time.

`kubernetes_asyncio.client` imports every generated API class and model when it is
imported (about 800 modules, ~25 MiB of every kerf process's memory, more than a
replica's view of a small cluster); kerf uses its ApiClient, its Configuration and a few
API classes, and reads no model (lists and watches are parsed with orjson). `install`
puts in its place, before anything imports it, packages that import a name's module when
the name is first used: the names and their modules are those the package's own
`__init__.py` files import, read from them, so the lazy package holds exactly what the
eager one does (`tests/app/test_lazyclient.py` compares them).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

#: the packages made lazy, each with its `__init__.py`'s `from <module> import <name>`
PACKAGES = (
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.api",
    "kubernetes_asyncio.client.models",
)
_IMPORT = re.compile(r"^from (kubernetes_asyncio\.client[\w.]*) import (\w+)$", re.MULTILINE)


def install() -> bool:
    """Make the packages lazy, unless they are imported already or not installed (then
    nothing changes). Returns whether they are lazy now."""
    if any(name in sys.modules for name in PACKAGES):
        return False
    spec = importlib.util.find_spec("kubernetes_asyncio")
    if spec is None or not spec.submodule_search_locations:
        return False
    client = Path(next(iter(spec.submodule_search_locations))) / "client"
    folders = [client, client / "api", client / "models"]
    try:
        sources = [(folder / "__init__.py").read_text(encoding="utf-8") for folder in folders]
    except OSError:
        return False
    client_package, api, models = (
        _lazy(name, folder, source)
        for name, folder, source in zip(PACKAGES, folders, sources, strict=True)
    )
    # as the import of a submodule sets it on its package (the ApiClient reads
    # `kubernetes_asyncio.client.models`)
    client_package.api = api  # type: ignore[attr-defined]
    client_package.models = models  # type: ignore[attr-defined]
    for package in (client_package, api, models):
        sys.modules[package.__name__] = package
    return True


def _lazy(name: str, folder: Path, source: str) -> types.ModuleType:
    where = {attribute: module for module, attribute in _IMPORT.findall(source)}
    package = types.ModuleType(name)
    package.__path__ = [str(folder)]
    package.__file__ = str(folder / "__init__.py")
    package.__all__ = sorted(where)  # type: ignore[attr-defined]

    def load(attribute: str) -> Any:
        module = where.get(attribute)
        if module is None:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        # The top package first: its own imports (the config loaders) use the client's
        # ApiClient, and imported from within the import of a name's module they would
        # find that module half made.
        importlib.import_module("kubernetes_asyncio")
        value = getattr(importlib.import_module(module), attribute)
        setattr(package, attribute, value)
        return value

    package.__getattr__ = load  # type: ignore[method-assign]
    return package
