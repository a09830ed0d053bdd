"""The import graph keeps the product's layers: every module's imports, read with `ast`
(the ones inside functions and `TYPE_CHECKING` blocks and `importlib.import_module("...")`
included), checked against the rule of docs/decisions.md ("Packages and layers").

- `kerf` (the command) sits on top: it may import the services and `app`;
- the services `webhook`, `reconciler` and `recommender` import `app`, never each other,
  never `kerf`;
- `app` imports no other first-party package;
- no product package imports a development tool (kubesim, demo, benchmarks, harness, soak,
  devcluster, tools, tests), which may import anything.

Inside `app`, the sub-packages are layers too (APP_LAYERS): each imports only those it names.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "kerf"
SERVICES = frozenset({"webhook", "reconciler", "recommender"})
LIBRARY = "app"
PRODUCT = frozenset({COMMAND, *SERVICES, LIBRARY})
DEV_TOOLS = frozenset(
    {"kubesim", "demo", "benchmarks", "harness", "soak", "devcluster", "tools", "tests"}
)
#: `app`'s sub-packages, bottom up, each with the ones it may import. The API edge (`kube`)
#: and the policy decisions sit side by side over the store: no decision reaches the API.
APP_LAYERS: dict[str, frozenset[str]] = {
    "runtime": frozenset(),
    "model": frozenset({"runtime"}),
    "store": frozenset({"runtime", "model"}),
    "kube": frozenset({"runtime", "model", "store"}),
    "policy": frozenset({"runtime", "model", "store"}),
    "recommend": frozenset({"runtime", "model", "store", "policy"}),
    "decide": frozenset({"runtime", "model", "store", "policy"}),
    "outcome": frozenset({"runtime", "model", "store", "policy", "recommend", "decide"}),
}


@dataclass(frozen=True)
class Edge:
    """`importer` (a module) imports `imported` (a dotted name)."""

    importer: str
    imported: str

    @property
    def source(self) -> str:
        return self.importer.split(".")[0]

    @property
    def target(self) -> str:
        return self.imported.split(".")[0]


def first_party() -> frozenset[str]:
    """The repository's top-level packages."""
    return frozenset(p.parent.name for p in ROOT.glob("*/__init__.py"))


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Every module name `tree` imports, relative imports resolved against `module`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".")
                base = parts if is_package else parts[:-1]
                base = base[: len(base) - (node.level - 1)]
                yield ".".join([*base, *([node.module] if node.module else [])])
            elif node.module:
                yield node.module
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value


def edges(packages: frozenset[str]) -> list[Edge]:
    """The first-party imports of every module of `packages`."""
    ours = first_party()
    found = []
    for package in sorted(packages):
        for path in sorted((ROOT / package).rglob("*.py")):
            module = module_name(path)
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for name in imported_names(tree, module, path.name == "__init__.py"):
                edge = Edge(module, name)
                if edge.target in ours and edge.target != edge.source:
                    found.append(edge)
    return found


def broken(edge: Edge) -> str | None:
    """Which rule `edge` (between two different top-level packages) breaks, if any."""
    source, target = edge.source, edge.target
    if source in DEV_TOOLS:
        return None
    if target in DEV_TOOLS:
        return f"the product imports the development tool {target}"
    if source == LIBRARY:
        return f"{LIBRARY} imports {target}, which sits above it"
    if source in SERVICES and target in SERVICES:
        return f"the service {source} imports the service {target}"
    if target == COMMAND:
        return f"{source} imports the command, which sits on top"
    return None


def test_the_product_imports_only_downward() -> None:
    found = edges(PRODUCT)
    problems = [
        f"{edge.importer} imports {edge.imported}: {reason}"
        for edge in found
        if (reason := broken(edge)) is not None
    ]
    assert problems == []


def test_the_reader_sees_the_command_putting_the_services_together() -> None:
    """A reader that found no edge would pass the rule above without checking anything."""
    found = {(edge.importer, edge.imported) for edge in edges(PRODUCT)}
    assert {
        ("kerf.cli", "webhook"),
        ("kerf.cli", "reconciler"),
        ("kerf.cli", "app.outcome.explain"),
    } <= found
    assert ("webhook.server", "app.runtime.clock") in found


def test_every_top_level_package_has_a_layer() -> None:
    assert first_party() <= PRODUCT | DEV_TOOLS


def test_the_rule_refuses_each_kind_of_upward_or_sideways_edge() -> None:
    assert broken(Edge("app.store.view", "webhook.metrics")) is not None
    assert broken(Edge("app.store.view", "kubesim.store")) is not None
    assert broken(Edge("webhook.main", "reconciler.leader")) is not None
    assert broken(Edge("recommender.main", "kerf.cli")) is not None
    assert broken(Edge("kerf.cli", "demo.story")) is not None
    assert broken(Edge("kerf.cli", "recommender.cli")) is None
    assert broken(Edge("reconciler.main", "app.kube.informer")) is None
    assert broken(Edge("benchmarks.webhook", "webhook.server")) is None


def test_relative_imports_resolve_against_the_module() -> None:
    tree = ast.parse(
        "from . import x\nfrom ..b import y\nimport importlib\n"
        "importlib.import_module('webhook.metrics')"
    )
    names = set(imported_names(tree, "pkg.sub.mod", is_package=False))
    assert names == {"pkg.sub", "pkg.b", "importlib", "webhook.metrics"}


def private_imports_of(path: Path, module: str) -> list[str]:
    """`from module import _name` of a first-party module other than `module` itself: a
    name with a leading underscore is its module's business."""
    ours = first_party()
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if node.module.split(".")[0] not in ours or node.module == module:
            continue
        found += [
            f"{module} imports {node.module}.{alias.name}"
            for alias in node.names
            if alias.name.startswith("_") and not alias.name.startswith("__")
        ]
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    found = [
        line
        for package in sorted(PRODUCT)
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in private_imports_of(path, module_name(path))
    ]
    assert found == []


def test_the_private_import_reader_sees_one(tmp_path: Path) -> None:
    """A reader that found none would pass the rule above without checking anything."""
    path = tmp_path / "stage.py"
    path.write_text("from app.decide.context import Context, _Hidden\nfrom os import _exit\n")
    assert private_imports_of(path, "app.decide.stage") == [
        "app.decide.stage imports app.decide.context._Hidden"
    ]


def app_layer(module: str) -> str | None:
    """The sub-package of `app` that `module` belongs to (None for `app` itself)."""
    parts = module.split(".")
    return parts[1] if parts[0] == LIBRARY and len(parts) > 1 else None


def broken_in_app(edge: Edge) -> str | None:
    """Which rule of APP_LAYERS `edge` (inside `app`) breaks, if any."""
    source, target = app_layer(edge.importer), app_layer(edge.imported)
    if source is None or target is None or source == target:
        return None
    if source not in APP_LAYERS:
        return f"{source} is not one of app's layers"
    if target not in APP_LAYERS[source]:
        return f"app.{source} imports app.{target}, which it may not"
    return None


def app_edges() -> list[Edge]:
    """Every import inside `app`, between two of its modules."""
    found = []
    for path in sorted((ROOT / LIBRARY).rglob("*.py")):
        module = module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found += [
            Edge(module, name)
            for name in imported_names(tree, module, path.name == "__init__.py")
            if name.split(".")[0] == LIBRARY
        ]
    return found


def test_app_is_only_its_layers() -> None:
    top = {p.name for p in (ROOT / LIBRARY).iterdir() if p.suffix == ".py" and p.stem != "__init__"}
    packages = {p.parent.name for p in (ROOT / LIBRARY).glob("*/__init__.py")}
    assert top == set()
    assert packages == set(APP_LAYERS)


def test_app_layers_import_only_downward() -> None:
    problems = [
        f"{edge.importer} imports {edge.imported}: {reason}"
        for edge in app_edges()
        if (reason := broken_in_app(edge)) is not None
    ]
    assert problems == []


def test_the_app_rule_refuses_an_upward_edge_and_reads_real_ones() -> None:
    assert broken_in_app(Edge("app.model.workloads", "app.store.view")) is not None
    assert broken_in_app(Edge("app.policy.plans", "app.kube.informer")) is not None
    assert broken_in_app(Edge("app.kube.informer", "app.store.view")) is None
    found = {(edge.importer, edge.imported) for edge in app_edges()}
    assert ("app.kube.informer", "app.store.view") in found
