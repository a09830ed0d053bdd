"""`kerf --help`, `kerf explain` and the other commands that run no service do not load the
services' heavy dependencies: the parser is built from light modules, and the web server,
the cluster client and the metrics library load only in the command that serves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("fastapi", "uvicorn", "kubernetes_asyncio", "aiohttp", "prometheus_client")
#: what only the commands that read objects need: the models and the decisions
MODELS = ("pydantic", "app.model.crd", "app.decide")

# `python -m kerf ARGS` in a fresh interpreter (after importing PRELOAD, if given), then
# which of HEAVY it imported, written to a file: the command's own output stays apart.
PROBE = """
import importlib, json, runpy, sys
report, heavy, preload, argv = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4:]
if preload:
    importlib.import_module(preload)
sys.argv = ["kerf", *argv]
try:
    runpy.run_module("kerf", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
with open(report, "w") as out:
    json.dump(sorted(name for name in heavy if name in sys.modules), out)
"""


def loaded_heavy_modules(
    tmp_path: Path, *argv: str, preload: str = "", heavy: tuple[str, ...] = HEAVY
) -> list[str]:
    """The modules of `heavy` that `python -m kerf ARGV` has imported when it ends."""
    report = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(report), ",".join(heavy), preload, *argv],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    assert report.is_file(), f"the probe reported nothing: {done.stderr.decode()}"
    return list(json.loads(report.read_text()))


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["explain", "-f", "examples/storefront"],
        ["report", "-f", "examples/storefront"],
        ["completion", "bash"],
        ["certs", "--help"],
        ["webhook", "--help"],
        ["reconciler", "--help"],
        ["recommend", "--help"],
        ["review", "--help"],
    ],
    ids=" ".join,
)
def test_a_command_that_serves_nothing_loads_no_service_dependency(
    tmp_path: Path, argv: list[str]
) -> None:
    assert loaded_heavy_modules(tmp_path, *argv) == []


def test_the_probe_names_what_the_webhook_server_loads(tmp_path: Path) -> None:
    # Without this, a renamed module would make every case above pass unseen.
    assert loaded_heavy_modules(tmp_path, "--help", preload="webhook.main") == sorted(HEAVY)


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], ["completion", "zsh"], ["webhook", "--help"], ["recommend", "-h"]],
    ids=" ".join,
)
def test_a_command_that_reads_no_object_loads_no_model(tmp_path: Path, argv: list[str]) -> None:
    assert loaded_heavy_modules(tmp_path, *argv, heavy=MODELS) == []


def test_the_probe_names_what_explain_loads(tmp_path: Path) -> None:
    loaded = loaded_heavy_modules(tmp_path, "explain", "-f", "examples/storefront", heavy=MODELS)
    assert loaded == sorted(MODELS)
