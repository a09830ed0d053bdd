"""devcluster and harness are tooling: the product's packages never import them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


TOOLING = {"devcluster", "harness", "demo"}


def test_the_product_does_not_import_the_tooling() -> None:
    offenders = []
    for package in ("app", "webhook", "reconciler"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                if any(n.split(".")[0] in TOOLING for n in names):
                    offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
