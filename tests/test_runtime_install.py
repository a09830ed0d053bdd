"""What a plain `pip install kerf` (no test extras) runs must not import test-only packages.

`.ci/run` also installs the package without extras into a fresh venv and runs it; this test
catches the same defect inside the suite, in seconds: a child interpreter refuses to import
anything that only the `test` extra brings, then runs the commands a user runs first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Distributions that arrive only through the `test` extra (and what they pull in).
TEST_ONLY = (
    "jsonschema",
    "kubernetes_validate",
    "hypothesis",
    "pytest",
    "_pytest",
    "ruff",
    "httpx",
)

BLOCKER = textwrap.dedent(
    f"""
    import sys
    class _Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {TEST_ONLY!r}:
                raise ImportError(f"{{name}} is a test-only dependency")
            return None
    sys.meta_path.insert(0, _Block())
    """
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _runtime_modules() -> list[str]:
    names = []
    for package in ("kerf", "app", "webhook", "reconciler", "recommender"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if path.stem != "__main__":
                names.append(".".join(parts).removesuffix(".__init__"))
    return names


def test_the_blocker_refuses_test_only_packages() -> None:
    result = _run("import jsonschema")
    assert result.returncode != 0
    assert "jsonschema is a test-only dependency" in result.stderr


def test_every_runtime_module_imports_without_the_test_extra() -> None:
    modules = _runtime_modules()
    assert "app.kube.informer" in modules and "kerf.cli" in modules
    result = _run(f"import importlib\nfor m in {modules!r}: importlib.import_module(m)")
    assert result.returncode == 0, result.stderr


def test_kerf_help_and_explain_run_without_the_test_extra() -> None:
    result = _run(
        """
        from kerf.cli import main
        for argv in (["--help"], ["webhook", "--help"], ["reconciler", "--help"],
                     ["recommend", "--help"],
                     ["explain", "-f", "examples/storefront", "-o", "text"]):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
            assert code in (0, None), (argv, code)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "usage: kerf" in result.stdout
    assert "shop/api-" in result.stdout
